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
    links: Sequence[Sequence[str]] | None = None,
) -> SafeString:
    """A square matrix of counts (rows: ``row_title``'s labels, columns: ``column_title``'s).
    ``links``, in the same shape as ``counts``, makes each cell a link (to the units it counts)."""
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
            cell = _cell(left + column * CELL, top + row * CELL, count, count / largest, row_label, column_label)
            body.append(linked(cell, links[row][column] if links else ""))
    return _svg(width, height, title, "chart--heatmap", body)


def linked(content: SafeString, href: str) -> SafeString:
    """``content`` inside an SVG link to ``href``; as it is when there is no link."""
    return element("a", {"class": "chart__link", "href": href}, content) if href else content


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
    href: str = ""  # makes the group's label a link


@dataclass(frozen=True, slots=True)
class Domain:
    """The values a bar chart's axis spans; bars start at 0 (or at the axis's end nearest 0)."""

    low: float = 0.0
    high: float = 1.0

    def x(self, value: float) -> float:
        share = (min(max(value, self.low), self.high) - self.low) / (self.high - self.low)
        return LABEL_WIDTH + share * PLOT_WIDTH

    def ticks(self) -> list[float]:
        return [self.low + (self.high - self.low) * step / 4 for step in range(5)]


UNIT_DOMAIN = Domain()


def bars_svg(
    *, title: str, series: Sequence[str], groups: Sequence[BarGroup], domain: Domain = UNIT_DOMAIN
) -> SafeString:
    """Grouped horizontal bars on the ``domain`` scale (0 to 1 unless told); series i is drawn
    with class ``chart__bar--i``."""
    group_height = len(series) * (BAR_HEIGHT + BAR_GAP) + GROUP_GAP
    top = TITLE_HEIGHT + 4
    legend_height = 20
    plot_top = top + legend_height
    height = plot_top + len(groups) * group_height + 24
    body = [_legend(series, top), *_scale(plot_top, height - 24, domain)]
    for index, group in enumerate(groups):
        y = plot_top + index * group_height
        label = _label(
            group.label, {"class": "chart__label", "x": LABEL_WIDTH - 8, "y": y + BAR_HEIGHT, "text_anchor": "end"}
        )
        body.append(linked(label, group.href))
        for position, bar in enumerate(group.bars):
            bar_y = y + position * (BAR_HEIGHT + BAR_GAP)
            body.append(_bar(bar, bar_y, position + 1, series[position], group.label, domain))
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


def _scale(top: float, bottom: float, domain: Domain) -> list[SafeString]:
    lines = []
    for tick in domain.ticks():
        x = domain.x(tick)
        lines.append(element("line", {"class": "chart__grid", "x1": x, "y1": top - 2, "x2": x, "y2": bottom}))
        lines.append(
            element("text", {"class": "chart__tick", "x": x, "y": bottom + 14, "text_anchor": "middle"}, f"{tick:g}")
        )
    return lines


def _bar(bar: Bar, y: float, series_index: int, series_name: str, group_label: str, domain: Domain) -> SafeString:
    parts = [element("title", content=f"{group_label}, {series_name}: {bar.note}")]
    if bar.value is not None:
        start, end = sorted((domain.x(min(max(0.0, domain.low), domain.high)), domain.x(bar.value)))
        parts.append(
            element(
                "rect",
                {
                    "class": f"chart__bar chart__bar--{series_index}",
                    "x": start,
                    "y": y,
                    "width": end - start,
                    "height": BAR_HEIGHT,
                },
            )
        )
    if bar.low is not None and bar.high is not None:
        low, high = (domain.x(end) for end in (bar.low, bar.high))
        middle = y + BAR_HEIGHT / 2
        parts.append(element("line", {"class": "chart__interval", "x1": low, "y1": middle, "x2": high, "y2": middle}))
    note_class = "chart__note" if bar.value is not None else "chart__note chart__note--undefined"
    note_at = {"class": note_class, "x": LABEL_WIDTH + PLOT_WIDTH + 8, "y": y + BAR_HEIGHT - 3}
    parts.append(_label(bar.note, note_at, NOTE_CHARACTERS))
    return element("g", {"class": "chart__bar-group"}, join(parts))


# Score charts: a calibration curve and histograms of scores ---------------------------------

CURVE_SIZE = 240
CURVE_MARGIN = 44
POINT_RADIUS = 4
HISTOGRAM_ROW = 56
HISTOGRAM_BAR_GAP = 2


@dataclass(frozen=True, slots=True)
class CurvePoint:
    """One bin of a calibration curve: answers scored in [low, high), their mean score and
    the share of them the reference calls correct."""

    low: float
    high: float
    n: int
    mean_score: float
    correct_rate: float
    href: str = ""  # the bin's answers


def calibration_svg(*, title: str, points: Sequence[CurvePoint]) -> SafeString:
    """Mean score (x) against the share correct (y), both 0 to 1, with the diagonal a perfectly
    calibrated judge would follow; each bin is a point, linked to its answers when ``href``."""
    left, top = CURVE_MARGIN, TITLE_HEIGHT + 8
    size = CURVE_SIZE

    def at(x: float, y: float) -> tuple[float, float]:
        return left + min(max(x, 0.0), 1.0) * size, top + (1 - min(max(y, 0.0), 1.0)) * size

    body = list(_curve_axes(left, top, size))
    x0, y0 = at(0, 0)
    x1, y1 = at(1, 1)
    body.append(element("line", {"class": "chart__diagonal", "x1": x0, "y1": y0, "x2": x1, "y2": y1}))
    if len(points) > 1:
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in (at(point.mean_score, point.correct_rate) for point in points))
        body.append(element("polyline", {"class": "chart__curve", "points": path}))
    for point in points:
        x, y = at(point.mean_score, point.correct_rate)
        tooltip = (
            f"scores {point.low:g} to {point.high:g}: {point.n} answer{'s' if point.n != 1 else ''}, "
            f"mean score {point.mean_score:.2f}, {point.correct_rate:.0%} correct"
        )
        dot = element(
            "g",
            {"class": "chart__point"},
            join([element("title", content=tooltip), element("circle", {"cx": x, "cy": y, "r": POINT_RADIUS})]),
        )
        body.append(linked(dot, point.href))
    return _svg(left + size + 16, top + size + 40, title, "chart--curve", body)


def _curve_axes(left: float, top: float, size: float) -> list[SafeString]:
    parts = []
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        x, y = left + tick * size, top + (1 - tick) * size
        parts.append(element("line", {"class": "chart__grid", "x1": x, "y1": top, "x2": x, "y2": top + size}))
        parts.append(element("line", {"class": "chart__grid", "x1": left, "y1": y, "x2": left + size, "y2": y}))
        parts.append(
            element(
                "text", {"class": "chart__tick", "x": x, "y": top + size + 14, "text_anchor": "middle"}, f"{tick:g}"
            )
        )
        parts.append(
            element("text", {"class": "chart__tick", "x": left - 6, "y": y + 4, "text_anchor": "end"}, f"{tick:g}")
        )
    parts.append(
        element(
            "text",
            {"class": "chart__axis-title", "x": left + size / 2, "y": top + size + 32, "text_anchor": "middle"},
            "mean judge score",
        )
    )
    y_title = top + size / 2
    parts.append(
        element(
            "text",
            {
                "class": "chart__axis-title",
                "x": 12,
                "y": y_title,
                "text_anchor": "middle",
                "transform": f"rotate(-90 12 {y_title:.1f})",
            },
            "share correct",
        )
    )
    return parts


@dataclass(frozen=True, slots=True)
class HistogramRow:
    """Counts of answers over equal-width score bins from 0 to 1, for one human label."""

    label: str
    counts: tuple[int, ...]
    hrefs: tuple[str, ...] = ()  # per bin: its answers


def histogram_svg(*, title: str, rows: Sequence[HistogramRow]) -> SafeString:
    """One row of vertical bars per label over a shared score axis, all on one count scale, so
    the rows compare: a judge that separates the labels puts their bars at different ends."""
    bins = max((len(row.counts) for row in rows), default=0) or 1
    largest = max((count for row in rows for count in row.counts), default=0) or 1
    top = TITLE_HEIGHT + 4
    width = (PLOT_WIDTH - HISTOGRAM_BAR_GAP * bins) / bins
    body: list[SafeString] = []
    for index, row in enumerate(rows):
        y = top + index * (HISTOGRAM_ROW + GROUP_GAP)
        body.append(
            _label(
                row.label,
                {"class": "chart__label", "x": LABEL_WIDTH - 8, "y": y + HISTOGRAM_ROW / 2 + 4, "text_anchor": "end"},
            )
        )
        body.append(
            element(
                "line",
                {
                    "class": "chart__grid",
                    "x1": LABEL_WIDTH,
                    "y1": y + HISTOGRAM_ROW,
                    "x2": LABEL_WIDTH + PLOT_WIDTH,
                    "y2": y + HISTOGRAM_ROW,
                },
            )
        )
        for position, count in enumerate(row.counts):
            height = HISTOGRAM_ROW * count / largest
            x = LABEL_WIDTH + position * (width + HISTOGRAM_BAR_GAP)
            low, high = position / bins, (position + 1) / bins
            tooltip = f"{row.label}, scores {low:g} to {high:g}: {count}"
            bar = element(
                "g",
                {"class": "chart__hist"},
                join(
                    [
                        element("title", content=tooltip),
                        # A transparent full-height box keeps an empty bin hoverable and clickable.
                        element(
                            "rect",
                            {"class": "chart__hist-hit", "x": x, "y": y, "width": width, "height": HISTOGRAM_ROW},
                        ),
                        element(
                            "rect",
                            {
                                "class": "chart__hist-bar",
                                "x": x,
                                "y": y + HISTOGRAM_ROW - height,
                                "width": width,
                                "height": height,
                            },
                        ),
                    ]
                ),
            )
            body.append(linked(bar, row.hrefs[position] if position < len(row.hrefs) and count else ""))
    bottom = top + len(rows) * (HISTOGRAM_ROW + GROUP_GAP)
    for tick in (0.0, 0.5, 1.0):
        x = LABEL_WIDTH + tick * PLOT_WIDTH
        body.append(
            element("text", {"class": "chart__tick", "x": x, "y": bottom + 4, "text_anchor": "middle"}, f"{tick:g}")
        )
    body.append(
        element(
            "text",
            {
                "class": "chart__axis-title",
                "x": LABEL_WIDTH + PLOT_WIDTH / 2,
                "y": bottom + 20,
                "text_anchor": "middle",
            },
            f"judge score (tallest bar: {largest})",
        )
    )
    return _svg(LABEL_WIDTH + PLOT_WIDTH + 24, bottom + 28, title, "chart--histogram", body)
