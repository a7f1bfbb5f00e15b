"""Small server-rendered SVG charts: a heatmap of counts and grouped horizontal bars of shares.

Labels come from imported data, so every text goes through ``format_html`` (escaped), and a
long label is cut short on the chart with the whole of it in a ``<title>`` tooltip. The CSP
forbids style attributes: colours are SVG presentation attributes (``fill="#…"``) where the
data sets them, and classes (styled in static/css/agreement.css) everywhere else.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

CELL = 40
LABEL_WIDTH = 150
LABEL_CHARACTERS = 16
TITLE_CHARACTERS = 30
# About how wide one character of the charts' 11-12 px text is.
CHARACTER_WIDTH = 7
TITLE_HEIGHT = 24
BAR_HEIGHT = 14
BAR_GAP = 4
GROUP_GAP = 12
PLOT_WIDTH = 300
NOTE_WIDTH = 300
NOTE_CHARACTERS = 44
# Heatmap colours run from the page's canvas to its accent colour.
LOW_COLOUR = (0xF5, 0xF6, 0xF8)
HIGH_COLOUR = (0x24, 0x56, 0xA6)
# Above this share of the largest count a cell is dark enough to need light text.
DARK_CELL = 0.55

Attributes = dict[str, object]


def element(tag: str, attributes: Attributes | None = None, content: str = "") -> SafeString:
    """``<tag attributes>content</tag>``, with the attributes and a plain-text content escaped.

    Attribute names are written with "-" for "_" (``text_anchor`` is ``text-anchor``);
    content that is already a SafeString (nested elements) is kept as it is.
    """
    pairs = ((name.replace("_", "-"), _attribute(value)) for name, value in (attributes or {}).items())
    return format_html("<{}{}>{}</{}>", tag, format_html_join("", ' {}="{}"', pairs), content, tag)


def _attribute(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.1f}".removesuffix(".0")
    return str(value)


def join(parts: Iterable[SafeString]) -> SafeString:
    return mark_safe("".join(parts))  # noqa: S308 - every part was built by format_html


def short_label(text: str, limit: int = LABEL_CHARACTERS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _label(text: str, attributes: Attributes, limit: int = LABEL_CHARACTERS) -> SafeString:
    """A text that shows at most ``limit`` characters, and all of them on hover."""
    return element(
        "text", attributes, join([element("title", content=text), format_html("{}", short_label(text, limit))])
    )


def _svg(width: float, height: float, title: str, css_class: str, body: Sequence[SafeString]) -> SafeString:
    attributes: Attributes = {
        "xmlns": "http://www.w3.org/2000/svg",
        "class": f"chart {css_class}",
        "viewBox": f"0 0 {round(width)} {round(height)}",
        "width": round(width),
        "height": round(height),
        "role": "img",
        "aria-label": title,
    }
    return element("svg", attributes, join([element("title", content=title), *body]))


def heat_colour(share: float) -> str:
    """The fill for a cell holding ``share`` of the largest count."""
    share = min(max(share, 0.0), 1.0)
    channels = (round(low + (high - low) * share) for low, high in zip(LOW_COLOUR, HIGH_COLOUR, strict=True))
    return "#" + "".join(f"{channel:02x}" for channel in channels)


def heatmap_svg(
    *,
    title: str,
    row_title: str,
    column_title: str,
    labels: Sequence[str],
    counts: Sequence[Sequence[int]],
) -> SafeString:
    """A square matrix of counts (rows: ``row_title``'s labels, columns: ``column_title``'s)."""
    size = len(labels)
    largest = max((cell for row in counts for cell in row), default=0) or 1
    # Room for the labels as long as the longest (cut) one needs, not a fixed margin.
    longest = max((len(short_label(label)) for label in labels), default=1)
    margin = min(LABEL_WIDTH, CHARACTER_WIDTH * longest + 10)
    top = left = TITLE_HEIGHT + margin
    # The axis titles sit centred on the matrix, moved in where a long title would be cut off.
    half_title = CHARACTER_WIDTH * TITLE_CHARACTERS / 2
    title_x = max(left + size * CELL / 2, half_title + 4)
    title_y = max(top + size * CELL / 2, half_title + 4)
    width = max(left + size * CELL + 8, title_x + half_title + 4)
    height = max(top + size * CELL + 8, title_y + half_title + 4)
    body = [
        _label(
            column_title,
            {"class": "chart__axis-title", "x": title_x, "y": 16, "text_anchor": "middle"},
            TITLE_CHARACTERS,
        ),
        _label(
            row_title,
            {
                "class": "chart__axis-title",
                "x": 16,
                "y": title_y,
                "text_anchor": "middle",
                "transform": f"rotate(-90 16 {title_y:.1f})",
            },
            TITLE_CHARACTERS,
        ),
    ]
    for index, label in enumerate(labels):
        centre = index * CELL + CELL / 2
        body.append(
            _label(label, {"class": "chart__label", "x": left - 6, "y": top + centre + 4, "text_anchor": "end"})
        )
        x, y = left + centre + 4, top - 6
        body.append(
            _label(label, {"class": "chart__label", "x": x, "y": y, "transform": f"rotate(-90 {x:.1f} {y:.1f})"})
        )
    for row, (row_label, cells) in enumerate(zip(labels, counts, strict=True)):
        for column, (column_label, count) in enumerate(zip(labels, cells, strict=True)):
            body.append(_cell(left + column * CELL, top + row * CELL, count, count / largest, row_label, column_label))
    return _svg(width, height, title, "chart--heatmap", body)


def _cell(x: float, y: float, count: int, share: float, row_label: str, column_label: str) -> SafeString:
    tooltip = f"{row_label} / {column_label}: {count}"
    text_class = "chart__cell-text chart__cell-text--light" if share > DARK_CELL else "chart__cell-text"
    return element(
        "g",
        {"class": "chart__cell"},
        join(
            [
                element("title", content=tooltip),
                element("rect", {"x": x, "y": y, "width": CELL, "height": CELL, "fill": heat_colour(share)}),
                element(
                    "text",
                    {"class": text_class, "x": x + CELL / 2, "y": y + CELL / 2 + 4, "text_anchor": "middle"},
                    str(count),
                ),
            ]
        ),
    )


@dataclass(frozen=True, slots=True)
class Bar:
    """One bar: a share in [0, 1] with an optional interval, or none and a note saying why."""

    value: float | None
    note: str
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True, slots=True)
class BarGroup:
    label: str
    bars: tuple[Bar, ...]  # one per series, in the order of the series


def bars_svg(*, title: str, series: Sequence[str], groups: Sequence[BarGroup]) -> SafeString:
    """Grouped horizontal bars on a 0 to 1 scale; series i is drawn with class ``chart__bar--i``."""
    group_height = len(series) * (BAR_HEIGHT + BAR_GAP) + GROUP_GAP
    top = TITLE_HEIGHT + 4
    legend_height = 20
    plot_top = top + legend_height
    height = plot_top + len(groups) * group_height + 24
    body = [_legend(series, top), *_scale(plot_top, height - 24)]
    for index, group in enumerate(groups):
        y = plot_top + index * group_height
        body.append(
            _label(
                group.label, {"class": "chart__label", "x": LABEL_WIDTH - 8, "y": y + BAR_HEIGHT, "text_anchor": "end"}
            )
        )
        for position, bar in enumerate(group.bars):
            body.append(_bar(bar, y + position * (BAR_HEIGHT + BAR_GAP), position + 1, series[position], group.label))
    return _svg(LABEL_WIDTH + PLOT_WIDTH + NOTE_WIDTH, height, title, "chart--bars", body)


def _legend(series: Sequence[str], y: float) -> SafeString:
    items = []
    for index, name in enumerate(series, start=1):
        x = LABEL_WIDTH + (index - 1) * 180
        items.append(
            element("rect", {"class": f"chart__bar chart__bar--{index}", "x": x, "y": y, "width": 12, "height": 12})
        )
        items.append(element("text", {"class": "chart__label", "x": x + 16, "y": y + 11}, name))
    return element("g", {"class": "chart__legend"}, join(items))


def _scale(top: float, bottom: float) -> list[SafeString]:
    lines = []
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        x = LABEL_WIDTH + tick * PLOT_WIDTH
        lines.append(element("line", {"class": "chart__grid", "x1": x, "y1": top - 2, "x2": x, "y2": bottom}))
        lines.append(
            element("text", {"class": "chart__tick", "x": x, "y": bottom + 14, "text_anchor": "middle"}, f"{tick:g}")
        )
    return lines


def _bar(bar: Bar, y: float, series_index: int, series_name: str, group_label: str) -> SafeString:
    parts = [element("title", content=f"{group_label}, {series_name}: {bar.note}")]
    if bar.value is not None:
        width = max(min(bar.value, 1.0), 0.0) * PLOT_WIDTH
        parts.append(
            element(
                "rect",
                {
                    "class": f"chart__bar chart__bar--{series_index}",
                    "x": LABEL_WIDTH,
                    "y": y,
                    "width": width,
                    "height": BAR_HEIGHT,
                },
            )
        )
    if bar.low is not None and bar.high is not None:
        low, high = (LABEL_WIDTH + max(min(end, 1.0), 0.0) * PLOT_WIDTH for end in (bar.low, bar.high))
        middle = y + BAR_HEIGHT / 2
        parts.append(element("line", {"class": "chart__interval", "x1": low, "y1": middle, "x2": high, "y2": middle}))
    note_class = "chart__note" if bar.value is not None else "chart__note chart__note--undefined"
    note_at = {"class": note_class, "x": LABEL_WIDTH + PLOT_WIDTH + 8, "y": y + BAR_HEIGHT - 3}
    parts.append(_label(bar.note, note_at, NOTE_CHARACTERS))
    return element("g", {"class": "chart__bar-group"}, join(parts))
