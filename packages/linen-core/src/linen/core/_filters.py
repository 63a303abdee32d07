"""Collection filters: which variable collections an operation applies to.

A filter is ``True`` (every collection), ``False`` (none), a collection name, a
collection of names, or ``DenyList(filter)`` (every collection the inner filter
does not match). The algebra below is small pure functions over these.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from linen.core.errors import InvalidFilterError

__all__ = [
    'DenyList',
    'Filter',
    'CollectionFilter',
    'in_filter',
    'filter_to_set',
    'union_filters',
    'intersect_filters',
    'subtract_filters',
    'group_collections',
    'is_filter_empty',
]


@dataclass(frozen=True)
class DenyList:
    """Matches every collection that ``deny`` does not match.

    >>> in_filter(DenyList('intermediates'), 'params')
    True
    >>> in_filter(DenyList('intermediates'), 'intermediates')
    False
    """

    deny: Any


Filter: TypeAlias = bool | str | Collection[str] | DenyList
CollectionFilter = Filter


def in_filter(filter_like: Filter, col: str) -> bool:
    """Whether collection ``col`` is matched by ``filter_like``."""
    if filter_like is True:
        return True
    if filter_like is False:
        return False
    if isinstance(filter_like, str):
        return col == filter_like
    if isinstance(filter_like, DenyList):
        return not in_filter(filter_like.deny, col)
    if isinstance(filter_like, Collection) and not isinstance(filter_like, Mapping):
        return col in filter_like
    raise InvalidFilterError(filter_like)


def is_filter_empty(filter_like: Filter) -> bool:
    """Whether ``filter_like`` matches no collection (``False`` or an empty collection).

    >>> is_filter_empty(False), is_filter_empty([]), is_filter_empty('params')
    (True, True, False)
    """
    if filter_like is False:
        return True
    if filter_like is True or isinstance(filter_like, (str, DenyList)):
        return False
    if isinstance(filter_like, Collection) and not isinstance(filter_like, Mapping):
        return not filter_like
    raise InvalidFilterError(filter_like)


def filter_to_set(filter_like: Filter) -> set[str]:
    """The finite set of names a filter matches (``True``/``DenyList`` are not finite)."""
    if filter_like is False:
        return set()
    if isinstance(filter_like, str):
        return {filter_like}
    if filter_like is True or isinstance(filter_like, DenyList):
        raise InvalidFilterError(filter_like)
    if isinstance(filter_like, Collection) and not isinstance(filter_like, Mapping):
        return set(filter_like)
    raise InvalidFilterError(filter_like)


def _is_infinite(f: Filter) -> bool:
    return f is True or isinstance(f, DenyList)


def union_filters(a: Filter, b: Filter) -> Filter:
    """A filter matching what ``a`` or ``b`` matches."""
    if a is True or b is True:
        return True
    if isinstance(a, DenyList) and isinstance(b, DenyList):
        return DenyList(intersect_filters(a.deny, b.deny))
    if isinstance(b, DenyList):
        a, b = b, a
    if isinstance(a, DenyList):
        return DenyList(subtract_filters(a.deny, b))
    return filter_to_set(a) | filter_to_set(b)


def intersect_filters(a: Filter, b: Filter) -> Filter:
    """A filter matching what both ``a`` and ``b`` match.

    Results take Flax's forms: ``True`` and ``False`` pass the other side
    through, two finite filters give a set.

    >>> intersect_filters(['a', 'b'], DenyList('a')), intersect_filters(False, False)
    ({'b'}, set())
    """
    if a is True:
        return b
    if b is True:
        return a
    if isinstance(a, DenyList) and isinstance(b, DenyList):
        return DenyList(union_filters(a.deny, b.deny))
    if isinstance(b, DenyList):
        a, b = b, a
    if isinstance(a, DenyList):
        return subtract_filters(b, a.deny)
    return filter_to_set(a) & filter_to_set(b)


def subtract_filters(a: Filter, b: Filter) -> Filter:
    """A filter matching what ``a`` matches and ``b`` does not.

    >>> subtract_filters(DenyList(['a', 'b']), DenyList(['b', 'c']))
    {'c'}
    """
    if b is True:
        return False
    if a is True:
        return DenyList(b)
    if isinstance(a, DenyList) and isinstance(b, DenyList):
        # (everything but a.deny) minus (everything but b.deny): b.deny minus a.deny
        return subtract_filters(b.deny, a.deny)
    if isinstance(a, DenyList):
        return DenyList(union_filters(a.deny, b))
    if isinstance(b, DenyList):
        return intersect_filters(a, b.deny)
    return filter_to_set(a) - filter_to_set(b)


def group_collections(
    xs: Mapping[str, Any], col_filters: Iterable[Filter]
) -> tuple[dict[str, Any], ...]:
    """Split ``xs`` (collection -> value) into one dict per filter, first match wins.

    Collections no filter matches are dropped; use ``True`` as the last filter to
    catch the rest.
    """
    groups: list[dict[str, Any]] = []
    remaining = dict(xs)
    for f in col_filters:
        group = {col: v for col, v in remaining.items() if in_filter(f, col)}
        for col in group:
            del remaining[col]
        groups.append(group)
    return tuple(groups)


def is_infinite(f: Filter) -> bool:
    """Whether a filter matches names that cannot be listed (``True``/``DenyList``)."""
    return _is_infinite(f)
