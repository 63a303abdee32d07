"""Icicle charts (flame graphs) of an inclusive quantity per module: PNG and HTML.

Every module is a box whose width is its inclusive value (FLOPs, time, ...);
its submodules sit below it, left to right, and the part of its box not covered
by them is its own share. The axis is in the measured unit (ms, MFLOP, kB, ...),
per step for a report of several profiled steps. A label that does not fit its
box is shortened with an ellipsis, or left out when not even that fits: labels
never overlap. The PNG is drawn with matplotlib at a width meant for a page of
documentation; the HTML is one self-contained file (inline SVG, no scripts or
links) that any browser opens, each box's numbers on hover.
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass

__all__ = ['Box', 'flame_boxes', 'flame_graph']

ELLIPSIS = '\u2026'


@dataclass(frozen=True)
class Box:
    path: str
    x: float  # left edge, as a fraction of the root total
    width: float  # the inclusive value as a fraction of the root total
    depth: int
    value: float  # the inclusive value, per step for a report of several steps


_ATTRIBUTES = {
    'flops': 'inclusive_flops',
    'bytes_accessed': 'inclusive_bytes_accessed',
    'seconds': 'inclusive_seconds',
    'params_bytes': 'inclusive_params_bytes',
}

# value -> (what the axis measures, base unit, prefixes from the largest down)
_DECIMAL = ((1e12, 'T'), (1e9, 'G'), (1e6, 'M'), (1e3, 'k'), (1.0, ''))
_QUANTITIES = {
    'flops': ('FLOPs', 'FLOP', _DECIMAL),
    'bytes_accessed': ('bytes accessed', 'B', _DECIMAL),
    'seconds': ('device time', 's', ((1.0, ''), (1e-3, 'm'), (1e-6, '\u00b5'), (1e-9, 'n'))),
    'params_bytes': ('parameter bytes', 'B', _DECIMAL),
}


def _steps(report) -> int:
    """How many profiled steps a report's values add up (``profile`` records several)."""
    return max(int(getattr(report, 'steps', 1) or 1), 1)


def flame_boxes(report, value: str = 'flops') -> list[Box]:
    """The boxes of the chart for a report's rows (``module_costs``, ``profile``, ...).

    ``value`` names the inclusive quantity: ``'flops'``, ``'bytes_accessed'``,
    ``'seconds'`` or ``'params_bytes'``. A report of several profiled steps
    (``profile(..., steps=5)``) gives each box its value per step.
    """
    attribute = _ATTRIBUTES.get(value, value)
    steps = _steps(report)
    values = {row.path: float(getattr(row, attribute)) / steps for row in report.rows if row.path}
    children: dict[str, list[str]] = {}
    for path in values:
        parent = path.rsplit('/', 1)[0] if '/' in path else ''
        children.setdefault(parent, []).append(path)
    roots = children.get('', [])
    total = sum(values[path] for path in roots) or 1.0
    boxes: list[Box] = []

    def place(path: str, x: float, depth: int) -> None:
        width = values[path] / total
        boxes.append(Box(path, x, width, depth, values[path]))
        offset = x
        for child in children.get(path, []):
            place(child, offset, depth + 1)
            offset += values[child] / total

    offset = 0.0
    for root in roots:
        place(root, offset, 0)
        offset += values[root] / total
    return boxes


def flame_graph(report, path: str | os.PathLike, value: str = 'flops', title: str = '') -> str:
    """Write the icicle chart of ``report`` to ``path`` (``.png`` or ``.html``); return the path.

    The axis is in the unit of ``value`` (per step for a report of several
    profiled steps, as ``profile`` returns).

    Raises:
      ValueError: the file name ends with neither ``.png`` nor ``.html``.
    """
    path = os.fspath(path)
    boxes = flame_boxes(report, value)
    title = title or f'Inclusive {value} per module'
    axis = _Axis.of(value, boxes, per_step=_steps(report) > 1)
    if path.endswith('.png'):
        _png(boxes, path, title, axis)
    elif path.endswith('.html'):
        _html(boxes, path, title, axis)
    else:
        raise ValueError(
            f'flame_graph writes .png or .html files, not {path!r}: name the file '
            f'"...png" for a matplotlib image or "...html" for a self-contained page.'
        )
    return path


@dataclass(frozen=True)
class _Axis:
    """The chart's scale: the root total in a readable unit."""

    quantity: str  # 'device time', 'FLOPs', ...
    total: float  # in base units (s, FLOP, B)
    factor: float  # base units per displayed unit
    unit: str  # 'ms', 'MFLOP', 'kB', ...
    label: str  # 'device time per step (ms)'
    per_step: bool

    @classmethod
    def of(cls, value: str, boxes: list[Box], per_step: bool) -> _Axis:
        what, base, prefixes = _QUANTITIES.get(value, (value, '', ((1.0, ''),)))
        total = sum(box.value for box in boxes if box.depth == 0)
        factor, prefix = prefixes[-1]
        for candidate, name in prefixes:
            if abs(total) >= candidate:
                factor, prefix = candidate, name
                break
        unit = f'{prefix}{base}' if base else ''
        label = what + (' per step' if per_step else '') + (f' ({unit})' if unit else '')
        return cls(what, total, factor, unit, label, per_step)

    def text(self, amount: float) -> str:
        shown = f'{amount / self.factor:,.3g}'
        return f'{shown} {self.unit}'.rstrip() + (' per step' if self.per_step else '')


def _elide(name: str, fits) -> str:
    """The longest of ``name``, ``name[:k] + '…'`` that ``fits``; ``''`` when none does."""
    if fits(name):
        return name
    low, high = 1, len(name) - 1
    best = ''
    while low <= high:
        middle = (low + high) // 2
        candidate = name[:middle] + ELLIPSIS
        if fits(candidate):
            best, low = candidate, middle + 1
        else:
            high = middle - 1
    return best


# The PNG: 7 inches wide at 200 dpi, the width of a documentation page's text
# column, so that the page shows its 8-point labels at about their size.
_PNG_WIDTH_INCHES, _PNG_DPI, _PNG_FONT = 7.0, 200, 8


def _png(boxes: list[Box], path: str, title: str, axis: _Axis) -> None:
    import matplotlib.pyplot as plt

    figure = _figure(boxes, title, axis)
    figure.savefig(path, dpi=_PNG_DPI)
    plt.close(figure)


def _figure(boxes: list[Box], title: str, axis: _Axis):
    """The chart as a matplotlib figure (Agg), labels placed and elided to fit."""
    try:
        import matplotlib
    except ImportError as error:
        raise ImportError(
            'flame_graph(..., "*.png") draws with matplotlib, which is not installed: '
            'pip install matplotlib (or write "*.html", which needs nothing).'
        ) from error

    matplotlib.use('Agg', force=False)
    import matplotlib.pyplot as plt

    depth = max((box.depth for box in boxes), default=0) + 1
    figure, axes = plt.subplots(figsize=(_PNG_WIDTH_INCHES, 1.1 + 0.32 * depth), dpi=_PNG_DPI)
    colors = plt.get_cmap('YlOrRd')
    span = axis.total / axis.factor or 1.0
    for box in boxes:
        axes.add_patch(
            plt.Rectangle(
                (box.x * span, box.depth),
                box.width * span,
                0.95,
                facecolor=colors(0.2 + 0.55 * (box.depth / depth)),
                edgecolor='white',
                linewidth=0.8,
            )
        )
    axes.set_xlim(0, span)
    axes.set_ylim(depth, 0)
    axes.set_yticks([])
    axes.set_xlabel(axis.label, fontsize=_PNG_FONT)
    axes.tick_params(axis='x', labelsize=_PNG_FONT - 1)
    axes.set_title(title, fontsize=_PNG_FONT + 1)
    for side in ('left', 'right', 'top'):
        axes.spines[side].set_visible(False)
    figure.tight_layout()
    # Labels are placed once the layout is final, measured in pixels against their box.
    renderer = figure.canvas.get_renderer()
    to_pixels = axes.transData.transform
    pad = 5.0
    for box in boxes:
        left = to_pixels((box.x * span, 0))[0]
        right = to_pixels(((box.x + box.width) * span, 0))[0]
        room = right - left - 2 * pad
        if room <= 0:
            continue
        label = axes.text(
            box.x * span, box.depth + 0.5, '', va='center', fontsize=_PNG_FONT, clip_on=True
        )
        label.set_x(axes.transData.inverted().transform((left + pad, 0))[0])

        def fits(text: str, label=label, room=room) -> bool:
            label.set_text(text)
            return label.get_window_extent(renderer).width <= room

        shown = _elide(box.path.rsplit('/', 1)[-1], fits)
        if shown:
            label.set_text(shown)
        else:
            label.remove()
    return figure


# The SVG's labels are 12 px sans-serif; no glyph of the module names (letters,
# digits, '_', '.') is wider than this, so a label this estimate fits never
# spills out of its box.
_SVG_WIDTH, _SVG_ROW, _SVG_FONT, _SVG_CHAR = 1000, 24, 12, 8.0


def _html(boxes: list[Box], path: str, title: str, axis: _Axis) -> None:
    width, row = _SVG_WIDTH, _SVG_ROW
    height = row * (max((box.depth for box in boxes), default=0) + 1)
    shapes = []
    for box in boxes:
        x, w, y = box.x * width, max(box.width * width, 0.5), box.depth * row
        name = _elide(
            box.path.rsplit('/', 1)[-1], lambda text, room=w - 6: len(text) * _SVG_CHAR <= room
        )
        shapes.append(
            f'<g><title>{html.escape(box.path)}: {html.escape(axis.text(box.value))} '
            f'({100 * box.width:.1f}%)</title>'
            f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{row - 2}" '
            f'fill="hsl({30 + 8 * box.depth}, 85%, {70 - 4 * box.depth}%)" stroke="white"/>'
            + (
                f'<text x="{x + 3:.2f}" y="{y + 16}" font-size="{_SVG_FONT}">'
                f'{html.escape(name)}</text>'
                if name
                else ''
            )
            + '</g>'
        )
    scale = (
        f'<p style="font-family:sans-serif;font-size:13px">Full width: '
        f'{html.escape(axis.quantity)} {html.escape(axis.text(axis.total))}. '
        'Hover over a box for its module path and value.</p>'
    )
    page = (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
        f'<title>{html.escape(title)}</title></head><body>'
        f'<h3 style="font-family:sans-serif">{html.escape(title)}</h3>'
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif">{"".join(shapes)}</svg>{scale}</body></html>\n'
    )
    with open(path, 'w', encoding='utf-8') as handle:
        handle.write(page)
