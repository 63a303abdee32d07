"""Icicle charts (flame graphs) of an inclusive quantity per module: PNG and HTML.

Every module is a box whose width is its inclusive value (FLOPs, time, ...);
its submodules sit below it, left to right, and the part of its box not covered
by them is its own share. The PNG is drawn with matplotlib; the HTML is one
self-contained file (inline SVG, no scripts or links) that any browser opens.
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass

__all__ = ['Box', 'flame_boxes', 'flame_graph']


@dataclass(frozen=True)
class Box:
    path: str
    x: float  # left edge, as a fraction of the root total
    width: float  # the inclusive value as a fraction of the root total
    depth: int
    value: float


_ATTRIBUTES = {
    'flops': 'inclusive_flops',
    'bytes_accessed': 'inclusive_bytes_accessed',
    'seconds': 'inclusive_seconds',
    'params_bytes': 'inclusive_params_bytes',
}


def flame_boxes(report, value: str = 'flops') -> list[Box]:
    """The boxes of the chart for a report's rows (``module_costs``, ``profile``, ...).

    ``value`` names the inclusive quantity: ``'flops'``, ``'bytes_accessed'``,
    ``'seconds'`` or ``'params_bytes'``.
    """
    attribute = _ATTRIBUTES.get(value, value)
    values = {row.path: float(getattr(row, attribute)) for row in report.rows if row.path}
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

    Raises:
      ValueError: the file name ends with neither ``.png`` nor ``.html``.
    """
    path = os.fspath(path)
    boxes = flame_boxes(report, value)
    title = title or f'Inclusive {value} per module'
    if path.endswith('.png'):
        _png(boxes, path, title)
    elif path.endswith('.html'):
        _html(boxes, path, title, value)
    else:
        raise ValueError(
            f'flame_graph writes .png or .html files, not {path!r}: name the file '
            f'"...png" for a matplotlib image or "...html" for a self-contained page.'
        )
    return path


def _png(boxes: list[Box], path: str, title: str) -> None:
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
    figure, axes = plt.subplots(figsize=(12, 0.5 + 0.4 * depth))
    colors = plt.get_cmap('YlOrRd')
    for box in boxes:
        axes.add_patch(
            plt.Rectangle(
                (box.x, box.depth),
                box.width,
                0.95,
                facecolor=colors(0.25 + 0.6 * (box.depth / depth)),
                edgecolor='white',
            )
        )
        if box.width > 0.04:
            axes.text(
                box.x + 0.005,
                box.depth + 0.45,
                box.path.rsplit('/', 1)[-1],
                va='center',
                fontsize=8,
            )
    axes.set_xlim(0, 1)
    axes.set_ylim(depth, 0)
    axes.set_yticks([])
    axes.set_xlabel('share of the total')
    axes.set_title(title)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _html(boxes: list[Box], path: str, title: str, value: str) -> None:
    width, row = 1200, 24
    height = row * (max((box.depth for box in boxes), default=0) + 1)
    shapes = []
    for box in boxes:
        name = html.escape(box.path.rsplit('/', 1)[-1])
        x, w, y = box.x * width, max(box.width * width, 0.5), box.depth * row
        shapes.append(
            f'<g><title>{html.escape(box.path)}: {box.value:,.6g} {html.escape(value)} '
            f'({100 * box.width:.1f}%)</title>'
            f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{row - 2}" '
            f'fill="hsl({30 + 8 * box.depth}, 85%, {70 - 4 * box.depth}%)"/>'
            + (f'<text x="{x + 3:.2f}" y="{y + 16}" font-size="12">{name}</text>' if w > 40 else '')
            + '</g>'
        )
    page = (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
        f'<title>{html.escape(title)}</title></head><body>'
        f'<h3 style="font-family:sans-serif">{html.escape(title)}</h3>'
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif">{"".join(shapes)}</svg></body></html>\n'
    )
    with open(path, 'w', encoding='utf-8') as handle:
        handle.write(page)
