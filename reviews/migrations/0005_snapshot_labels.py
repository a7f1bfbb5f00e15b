# Snapshot raw labels move from a JSON list on each item to rows of their own, and the bulk
# snapshot rows stop paying for database foreign-key checks (see reviews/models/snapshots.py).
# Snapshots taken before keep their canonical JSON Lines spelling (jsonl_layout 1).

import re
from datetime import datetime

import django.db.models.deletion
from django.db import migrations, models

BATCH = 2000
PSEUDONYM = re.compile(r"^A([0-9]+)$")


def labels_to_rows(apps, schema_editor):
    GoldSnapshot = apps.get_model("reviews", "GoldSnapshot")
    SnapshotItem = apps.get_model("reviews", "SnapshotItem")
    SnapshotLabel = apps.get_model("reviews", "SnapshotLabel")
    GoldSnapshot.objects.update(jsonl_layout=1)
    rows = []
    items = SnapshotItem.objects.exclude(raw_labels=[]).order_by("pk").values_list("snapshot_id", "position", "raw_labels")
    for snapshot_id, position, raw_labels in items.iterator(chunk_size=BATCH):
        for label in raw_labels:
            found = PSEUDONYM.match(str(label["annotator"]))
            if found is None:
                raise RuntimeError(f"snapshot {snapshot_id} item {position}: unexpected annotator {label['annotator']!r}")
            submitted = label.get("submitted_at")
            rows.append(
                SnapshotLabel(
                    snapshot_id=snapshot_id,
                    item_position=position,
                    annotator=int(found.group(1)),
                    annotation_id=label["annotation"],
                    guideline_version=label.get("guideline_version"),
                    submitted_at=datetime.fromisoformat(submitted) if submitted else None,
                    payload=label["payload"],
                )
            )
        if len(rows) >= BATCH:
            SnapshotLabel.objects.bulk_create(rows)
            rows = []
    SnapshotLabel.objects.bulk_create(rows)


def rows_to_labels(apps, schema_editor):
    SnapshotItem = apps.get_model("reviews", "SnapshotItem")
    SnapshotLabel = apps.get_model("reviews", "SnapshotLabel")
    found = {}
    for label in SnapshotLabel.objects.order_by("snapshot_id", "item_position", "annotator").iterator(chunk_size=BATCH):
        found.setdefault((label.snapshot_id, label.item_position), []).append(
            {
                "annotation": label.annotation_id,
                "annotator": f"A{label.annotator}",
                "guideline_version": label.guideline_version,
                "submitted_at": label.submitted_at.isoformat() if label.submitted_at else None,
                "payload": label.payload,
            }
        )
    for (snapshot_id, position), raw_labels in found.items():
        SnapshotItem.objects.filter(snapshot_id=snapshot_id, position=position).update(raw_labels=raw_labels)


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0005_membership_queue_from'),
        ('reviews', '0004_review_requests'),
    ]

    operations = [
        migrations.AddField(
            model_name='goldsnapshot',
            name='jsonl_layout',
            field=models.PositiveSmallIntegerField(default=2),
        ),
        migrations.CreateModel(
            name='SnapshotLabel',
            fields=[
                ('pk', models.CompositePrimaryKey('snapshot', 'item_position', 'annotator', blank=True, editable=False, primary_key=True, serialize=False)),
                ('item_position', models.PositiveIntegerField(help_text="The SnapshotItem's position.")),
                ('annotator', models.PositiveIntegerField(help_text="The annotator's number in the snapshot: 1 is A1.")),
                ('annotation_id', models.BigIntegerField(help_text='The annotation copied (not a link: it may change or go).')),
                ('guideline_version', models.PositiveIntegerField(blank=True, null=True)),
                ('submitted_at', models.DateTimeField(blank=True, null=True)),
                ('payload', models.JSONField()),
                ('snapshot', models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='labels', to='reviews.goldsnapshot')),
            ],
        ),
        migrations.RunPython(labels_to_rows, rows_to_labels),
        migrations.RemoveField(
            model_name='snapshotitem',
            name='raw_labels',
        ),
        migrations.AlterField(
            model_name='snapshotitem',
            name='paper',
            field=models.ForeignKey(blank=True, db_constraint=False, db_index=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='items', to='reviews.snapshotpaper'),
        ),
        migrations.AlterField(
            model_name='snapshotitem',
            name='project',
            field=models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='annotation.project'),
        ),
        migrations.AlterField(
            model_name='snapshotitem',
            name='project_item',
            field=models.ForeignKey(blank=True, db_constraint=False, db_index=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='annotation.projectitem'),
        ),
        migrations.AlterField(
            model_name='snapshotitem',
            name='qa_item',
            field=models.ForeignKey(blank=True, db_constraint=False, db_index=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='annotation.qaitem'),
        ),
        migrations.AlterField(
            model_name='snapshotitem',
            name='snapshot',
            field=models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='items', to='reviews.goldsnapshot'),
        ),
    ]
