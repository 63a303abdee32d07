"""Collection filters and their algebra, checked by enumerating collection names."""

from __future__ import annotations

import itertools

import pytest

from linen.core import errors
from linen.core._filters import (
    DenyList,
    filter_to_set,
    group_collections,
    in_filter,
    intersect_filters,
    is_infinite,
    subtract_filters,
    union_filters,
)

NAMES = ('params', 'batch_stats', 'cache', 'intermediates', 'other')

FILTERS = [
    True,
    False,
    'params',
    'cache',
    ['params', 'batch_stats'],
    ('cache', 'intermediates'),
    frozenset({'other'}),
    [],
    DenyList('intermediates'),
    DenyList(['params', 'cache']),
    DenyList(True),
    DenyList(False),
    DenyList(DenyList('params')),
]


def matches(f):
    return {n for n in NAMES if in_filter(f, n)}


@pytest.mark.parametrize(
    ('f', 'expected'),
    [
        (True, set(NAMES)),
        (False, set()),
        ('params', {'params'}),
        (['params', 'cache'], {'params', 'cache'}),
        ((), set()),
        (DenyList('intermediates'), set(NAMES) - {'intermediates'}),
        (DenyList(['params', 'cache']), set(NAMES) - {'params', 'cache'}),
        (DenyList(True), set()),
        (DenyList(DenyList('params')), {'params'}),
    ],
)
def test_in_filter(f, expected):
    assert matches(f) == expected


@pytest.mark.parametrize(('a', 'b'), list(itertools.product(FILTERS, repeat=2)))
def test_algebra_agrees_with_set_operations(a, b):
    assert matches(union_filters(a, b)) == matches(a) | matches(b)
    assert matches(intersect_filters(a, b)) == matches(a) & matches(b)
    assert matches(subtract_filters(a, b)) == matches(a) - matches(b)


def test_algebra_keeps_finite_results_finite():
    assert union_filters('a', ['b']) == {'a', 'b'}
    assert intersect_filters(['a', 'b'], DenyList('a')) == {'b'}
    assert subtract_filters(True, 'a') == DenyList('a')
    assert subtract_filters('a', True) is False
    assert not is_infinite(intersect_filters(DenyList('x'), 'y'))
    assert is_infinite(union_filters(DenyList('x'), 'y'))


@pytest.mark.parametrize('bad', [1, 2.5, {'params': True}, None, object()])
def test_invalid_filter_raises(bad):
    with pytest.raises(errors.InvalidFilterError, match='Invalid collection filter'):
        in_filter(bad, 'params')


@pytest.mark.parametrize('infinite', [True, DenyList('a')])
def test_filter_to_set_rejects_infinite(infinite):
    with pytest.raises(errors.InvalidFilterError, match='DenyList'):
        filter_to_set(infinite)


def test_filter_to_set():
    assert filter_to_set(False) == set()
    assert filter_to_set('a') == {'a'}
    assert filter_to_set(('a', 'b')) == {'a', 'b'}


def test_group_collections_first_match_wins_and_drops_rest():
    xs = {'params': 1, 'batch_stats': 2, 'cache': 3, 'intermediates': 4}
    groups = group_collections(xs, ['params', DenyList('intermediates'), True])
    assert groups == ({'params': 1}, {'batch_stats': 2, 'cache': 3}, {'intermediates': 4})
    assert group_collections(xs, ['cache']) == ({'cache': 3},)


def test_denylist_is_hashable_value():
    assert DenyList('a') == DenyList('a')
    assert hash(DenyList('a')) == hash(DenyList('a'))


@pytest.mark.parametrize(
    ('a', 'b', 'intersection', 'difference'),
    [
        (False, False, set(), set()),
        (True, False, False, DenyList(False)),
        (True, True, True, False),
        (['a', 'b'], ['b', 'c'], {'b'}, {'a'}),
        (DenyList(['a', 'b']), DenyList(['b', 'c']), DenyList({'a', 'b', 'c'}), {'c'}),
        (DenyList(['a', 'b']), ['b', 'c'], {'c'}, DenyList({'a', 'b', 'c'})),
        (True, 'a', 'a', DenyList('a')),
    ],
)
def test_results_take_flax_forms(a, b, intersection, difference):
    # Hand-written from the set algebra, in the forms Flax returns.
    assert intersect_filters(a, b) == intersection
    assert intersect_filters(b, a) == intersection
    assert subtract_filters(a, b) == difference
