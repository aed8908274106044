"""Where the names go on the countries' plane: beside each point, clear of every other name, point and line.

plotly puts a point's text at one of nine spots around it (`textposition`): plotly.js's `textPointPosition`
moves it r = marker radius / 0.8 + 1 px off the marker's centre, beside (right, left), above or below it,
or at a corner. So a label's box on screen is known from the point's pixel position, the spot, the text and
the font; a pixel position is known from the axis ranges and the plot's size. The plane is drawn at a
half-width chart's plot size (the smallest the page gives it: at a wider chart a name covers less of the
plane) with ranges this module sets, so that every name is inside the plot rather than cut at its edge.

A name goes where it overlaps the fewest other names, then points, then lines (the pair's offset), the
crowded points first; then each name is moved again, with all the others placed, until none moves.
"""
from collections.abc import Sequence
from dataclasses import dataclass

PLOT_PX = (300.0, 290.0)  # the plot of a half-width chart at 1280 px: 402 × 430 px less margins and a two-line title
CHAR_PX = 7.0             # a lowercase character at plotly's 12 px text (Source Sans: ~6 px), with room
LINE_PX = 14.0            # a line of 12 px text, descenders included
MARKER_PX = 7.0           # the markers' size (their diameter)
GAP_PX = 2.0              # the least space kept between two names
SPOTS = ("top center", "bottom center", "middle right", "middle left",
         "top right", "top left", "bottom right", "bottom left")  # the order of preference

Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in pixels, y up


@dataclass(frozen=True)
class Placement:
    spots: list[str]                # a textposition per point
    x_range: tuple[float, float]    # axis ranges that hold every point and every name
    y_range: tuple[float, float]


def label_box(x_px: float, y_px: float, text: str, spot: str) -> Box:
    """The box `text` takes at `spot` beside a marker at (x_px, y_px), as plotly.js places it."""
    r = MARKER_PX / 2 / 0.8 + 1
    width, height = len(text) * CHAR_PX, LINE_PX
    vertical, _, horizontal = spot.partition(" ")
    x0 = {"center": x_px - width / 2, "right": x_px + r, "left": x_px - r - width}[horizontal]
    y0 = {"top": y_px + r, "bottom": y_px - r - height, "middle": y_px - height / 2}[vertical]
    return x0, y0, x0 + width, y0 + height


def place(points: Sequence[tuple[float, float, str]], segments: Sequence[tuple[int, int]] = (),
          plot_px: tuple[float, float] = PLOT_PX) -> Placement:
    """Spots and axis ranges for `points` (x, y, text) in data units; `segments` join points by index."""
    if not points:
        return Placement([], (0.0, 1.0), (0.0, 1.0))
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    ranges = (_padded(min(xs), max(xs)), _padded(min(ys), max(ys)))
    spots: list[str] = []
    for _ in range(12):  # the ranges grow to hold the names, which shrinks the scale: until they settle
        pixels = _to_pixels(points, ranges, plot_px)
        spots = _choose(pixels, [p[2] for p in points], segments, spots)
        boxes = [label_box(x, y, p[2], spot) for (x, y), p, spot in zip(pixels, points, spots)]
        grown = _holding(boxes, pixels, ranges, plot_px)
        settled = all(abs(a - b) < 1e-6 * (r[1] - r[0]) for new, r in zip(grown, ranges) for a, b in zip(new, r))
        ranges = grown
        if settled:
            break
    return Placement(spots, *ranges)


def boxes_of(points: Sequence[tuple[float, float, str]], placement: Placement,
             plot_px: tuple[float, float] = PLOT_PX) -> list[Box]:
    """Each name's box in pixels, as drawn with the placement's ranges."""
    pixels = _to_pixels(points, (placement.x_range, placement.y_range), plot_px)
    return [label_box(x, y, p[2], spot) for (x, y), p, spot in zip(pixels, points, placement.spots)]


def overlap_px(a: Box, b: Box) -> float:
    """The area two boxes share, in px²."""
    return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))


def _padded(low: float, high: float) -> tuple[float, float]:
    pad = 0.05 * ((high - low) or 1.0)
    return low - pad, high + pad


def _to_pixels(points, ranges, plot_px) -> list[tuple[float, float]]:
    (x0, x1), (y0, y1) = ranges
    return [((x - x0) / (x1 - x0) * plot_px[0], (y - y0) / (y1 - y0) * plot_px[1]) for x, y, _ in points]


def _holding(boxes: list[Box], pixels, ranges, plot_px) -> tuple[tuple[float, float], tuple[float, float]]:
    """The smallest ranges (never narrower than the padded data's) that hold every box and marker, GAP_PX in."""
    r = MARKER_PX / 2
    low_x = min([b[0] for b in boxes] + [x - r for x, _ in pixels] + [0.0]) - GAP_PX
    high_x = max([b[2] for b in boxes] + [x + r for x, _ in pixels] + [plot_px[0]]) + GAP_PX
    low_y = min([b[1] for b in boxes] + [y - r for _, y in pixels] + [0.0]) - GAP_PX
    high_y = max([b[3] for b in boxes] + [y + r for _, y in pixels] + [plot_px[1]]) + GAP_PX
    (x0, x1), (y0, y1) = ranges
    per_x, per_y = (x1 - x0) / plot_px[0], (y1 - y0) / plot_px[1]
    return (x0 + low_x * per_x, x0 + high_x * per_x), (y0 + low_y * per_y, y0 + high_y * per_y)


def _choose(pixels, texts: list[str], segments, start: list[str]) -> list[str]:
    """A spot per point: crowded points first, each where it costs least; then moved until none moves."""
    n = len(pixels)
    near = [sum((x - u) ** 2 + (y - v) ** 2 < 60 ** 2 for u, v in pixels) for x, y in pixels]
    spots: list[str | None] = list(start) if len(start) == n else [None] * n
    lines = [(pixels[a], pixels[b]) for a, b in segments]
    for i in sorted(range(n), key=lambda i: (-near[i], i)) if not start else []:
        spots[i] = _best(i, pixels, texts, spots, lines)
    for _ in range(10):
        moved = False
        for i in range(n):
            best = _best(i, pixels, texts, spots, lines)
            moved |= best != spots[i]
            spots[i] = best
        if not moved:
            break
    return [spot or SPOTS[0] for spot in spots]


def _best(i: int, pixels, texts, spots, lines) -> str:
    others = [label_box(*pixels[j], texts[j], spots[j]) for j in range(len(pixels)) if j != i and spots[j]]
    r = MARKER_PX / 2 + 1
    markers = [(x - r, y - r, x + r, y + r) for j, (x, y) in enumerate(pixels) if j != i]

    def cost(spot: str) -> float:
        box = label_box(*pixels[i], texts[i], spot)
        grown = (box[0] - GAP_PX, box[1] - GAP_PX, box[2] + GAP_PX, box[3] + GAP_PX)
        return (1000 * sum(overlap_px(grown, other) for other in others) + 100 * sum(overlap_px(box, m) for m in markers)
                + 10 * sum(_inside(box, a, b) for a, b in lines) + SPOTS.index(spot))
    return min(SPOTS, key=cost)


def _inside(box: Box, a: tuple[float, float], b: tuple[float, float]) -> float:
    """The length (px) of the segment a–b inside `box` (Liang–Barsky clipping)."""
    (ax, ay), (bx, by) = a, b
    dx, dy = bx - ax, by - ay
    low, high = 0.0, 1.0
    for p, q in ((-dx, ax - box[0]), (dx, box[2] - ax), (-dy, ay - box[1]), (dy, box[3] - ay)):
        if p == 0:
            if q < 0:
                return 0.0
            continue
        t = q / p
        if p < 0:
            low = max(low, t)
        else:
            high = min(high, t)
        if low > high:
            return 0.0
    return (high - low) * (dx * dx + dy * dy) ** 0.5
