"""Per-module tables shared by the cost and time reports."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

__all__ = ['UNLABELLED', 'ancestors', 'bytes_text', 'format_table', 'human']

UNLABELLED = '(no module)'
"""How the tables show ops that ran outside every labelled module."""


def ancestors(path: str) -> list[str]:
    """``'A/B/C'`` -> ``['A', 'A/B', 'A/B/C']``; ``''`` -> ``['']``."""
    if not path:
        return ['']
    parts = path.split('/')
    return ['/'.join(parts[: index + 1]) for index in range(len(parts))]


def inclusive_totals(
    self_values: Mapping[str, Sequence[float]], width: int
) -> dict[str, list[float]]:
    """Add each path's own values into every ancestor's (a path includes its submodules)."""
    totals: dict[str, list[float]] = {}
    for path, values in self_values.items():
        for ancestor in ancestors(path):
            bucket = totals.setdefault(ancestor, [0.0] * width)
            for index in range(width):
                bucket[index] += values[index]
    return totals


def human(value: float, unit: str = '') -> str:
    """``1.5e9`` -> ``'1.50 G'`` (SI prefixes, three significant digits)."""
    for factor, prefix in ((1e12, 'T'), (1e9, 'G'), (1e6, 'M'), (1e3, 'k')):
        if abs(value) >= factor:
            return f'{value / factor:.2f} {prefix}{unit}'
    if value == int(value):
        return f'{int(value)} {unit}'.rstrip()
    return f'{value:.3g} {unit}'.rstrip()


def display_path(path: str) -> str:
    return path or UNLABELLED


def format_table(title: str, header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A plain-text table: first column left-aligned, the rest right-aligned."""
    rows = [list(row) for row in rows]
    widths = [len(cell) for cell in header]
    for row in rows:
        widths = [max(width, len(cell)) for width, cell in zip(widths, row, strict=True)]

    def render(cells: Sequence[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = [cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True)]
        return ' | '.join([first, *rest])

    rule = '-+-'.join('-' * width for width in widths)
    return '\n'.join([title, render(header), rule, *(render(row) for row in rows)])


def bytes_text(size: float) -> str:
    """Flax's byte counts: ``'1,000 B'``, ``'1.0 KB'`` (decimal units above 1,000 B)."""
    if size <= 1000:
        return f'{size:,.0f} B'
    for unit in ('KB', 'MB', 'GB', 'TB'):
        size /= 1000
        if size <= 1000 or unit == 'TB':
            break
    return f'{size:.1f} {unit}'
