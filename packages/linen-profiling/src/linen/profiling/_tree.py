"""The module tree that every per-module report walks: rows in tree order, lookup by path.

Each report (costs, times, memory, trace time, saved activations) sums some
values per module path (a path's *own* values), then adds each path's values
into every ancestor's (*inclusive* values) and lists the paths depth-first,
the unlabelled path ``''`` last. That walk, the lookup of a row by path and
the indented first column of the tables are here, once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from linen.profiling._report import display_path, inclusive_totals

__all__ = ['PathRows', 'indented_name', 'tree_order', 'tree_rows']


def tree_rows(
    own: Mapping[str, Sequence[float]], width: int
) -> Iterator[tuple[str, Sequence[float], Sequence[float]]]:
    """``(path, own values, inclusive values)`` of every path and ancestor, in tree order.

    A path that only groups others (an ancestor with nothing of its own) has
    zeros as own values. The unlabelled path ``''`` comes last, and its
    inclusive values are its own: it holds what is outside every module, not
    the whole tree.

    >>> [(p, list(o), list(i)) for p, o, i in tree_rows({'A/B': [1.0], '': [2.0]}, 1)]
    [('A', [0.0], [1.0]), ('A/B', [1.0], [1.0]), ('', [2.0], [2.0])]
    """
    inclusive = inclusive_totals(own, width)
    zeros = [0.0] * width
    for path in tree_order(inclusive):
        mine = own.get(path, zeros)
        yield path, mine, (inclusive[path] if path else mine)


def tree_order(paths: Iterable[str]) -> list[str]:
    """Depth-first, siblings by name, ``''`` last.

    >>> tree_order(['', 'A/B', 'A', 'A/A'])
    ['A', 'A/A', 'A/B', '']
    """
    return sorted(paths, key=lambda p: (p == '', p.split('/')))


def indented_name(path: str) -> str:
    """A table's first column: the last path component, indented two spaces per level."""
    if not path:
        return display_path('')
    return '  ' * path.count('/') + path.rsplit('/', 1)[-1]


class PathRows:
    """Lookup by module path for a report whose ``rows`` each have a ``path``."""

    rows: tuple[Any, ...]
    _report_name = 'report'

    def __getitem__(self, path: str):
        for row in self.rows:
            if row.path == path:
                return row
        known = ', '.join(repr(row.path) for row in self.rows)
        raise KeyError(f'No module path {path!r} in this {self._report_name}; paths: {known}.')

    def by_path(self) -> dict[str, Any]:
        """``{path: row}``."""
        return {row.path: row for row in self.rows}
