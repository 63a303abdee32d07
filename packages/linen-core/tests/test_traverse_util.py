"""linen.core.traverse_util against hand-written nested and flat dicts."""

from __future__ import annotations

import copy
import doctest
import pickle

import pytest

from linen.core import FrozenDict, errors, traverse_util
from linen.core.traverse_util import (
    ModelParamTraversal,
    empty_node,
    flatten_dict,
    path_aware_map,
    unflatten_dict,
)

NESTED = {'b': {'y': 1, 'x': {}}, 'a': 2, 'c': {'d': {'e': 3}}}


def test_flatten_keys_and_order():
    assert list(flatten_dict(NESTED).items()) == [
        (('b', 'y'), 1),
        (('a',), 2),
        (('c', 'd', 'e'), 3),
    ]


def test_flatten_sep_joins_keys():
    assert flatten_dict(NESTED, sep='.') == {'b.y': 1, 'a': 2, 'c.d.e': 3}


def test_flatten_keeps_empty_nodes_on_request_and_unflatten_restores_them():
    flat = flatten_dict(NESTED, keep_empty_nodes=True)
    assert flat[('b', 'x')] is empty_node
    assert unflatten_dict(flat) == NESTED
    assert flatten_dict({}, keep_empty_nodes=True) == {}


def test_flatten_is_leaf_stops_descent():
    flat = flatten_dict(NESTED, is_leaf=lambda path, x: path == ('c',))
    assert flat == {('b', 'y'): 1, ('a',): 2, ('c',): {'d': {'e': 3}}}


def test_flatten_frozen_dict():
    assert flatten_dict(FrozenDict({'a': {'b': 1}})) == {('a', 'b'): 1}


def test_unflatten_sep():
    assert unflatten_dict({'a/b': 1, 'a/c': 2, 'd': 3}, sep='/') == {'a': {'b': 1, 'c': 2}, 'd': 3}


def test_path_aware_map_sees_paths_and_keeps_empty_nodes():
    out = path_aware_map(lambda path, x: (path, x * 10), NESTED)
    assert out == {
        'b': {'y': (('b', 'y'), 10), 'x': {}},
        'a': (('a',), 20),
        'c': {'d': {'e': (('c', 'd', 'e'), 30)}},
    }


def test_empty_node_is_a_singleton_across_copy_and_pickle():
    assert copy.deepcopy(empty_node) is empty_node
    assert pickle.loads(pickle.dumps(empty_node)) is empty_node


def test_model_param_traversal_iterate_update_set():
    params = {'Dense_1': {'kernel': 1, 'bias': 2}, 'Dense_0': {'kernel': 3, 'bias': 4}, 'e': {}}
    kernels = ModelParamTraversal(lambda path, _: path.endswith('/kernel'))
    assert list(kernels.iterate(params)) == [3, 1]  # sorted by path
    assert kernels.update(lambda x: -x, params) == {
        'Dense_0': {'bias': 4, 'kernel': -3},
        'Dense_1': {'bias': 2, 'kernel': -1},
        'e': {},
    }
    assert kernels.set([30, 10], params)['Dense_1']['kernel'] == 10
    frozen = kernels.update(lambda x: x, FrozenDict(params))
    assert isinstance(frozen, FrozenDict)


def test_model_param_traversal_sees_full_paths():
    seen = []
    ModelParamTraversal(lambda path, v: seen.append(path) or False).update(
        lambda x: x, {'a': {'b': 1}}
    )
    assert seen == ['/a/b']


@pytest.mark.parametrize('values', [[1], [1, 2, 3]])
def test_model_param_traversal_set_counts_values(values):
    with pytest.raises(errors.TraversalSetValuesCountError, match='one value per selected'):
        ModelParamTraversal(lambda p, _: True).set(values, {'a': 0, 'b': 0})


@pytest.mark.parametrize(
    ('call', 'pattern'),
    [
        (lambda: flatten_dict([1]), 'flatten_dict expects a dict or FrozenDict, got list'),
        (lambda: unflatten_dict([1]), 'unflatten_dict expects a dict'),
        (lambda: unflatten_dict({'a': 1}), r"non-empty tuple keys, got the key 'a'"),
        (lambda: unflatten_dict({('a',): 1}, sep='/'), 'expects string keys'),
        (lambda: ModelParamTraversal(bool).update(abs, 3), 'ModelParamTraversal expects'),
    ],
)
def test_bad_input_raises_typed_errors(call, pattern):
    with pytest.raises(errors.TraverseInputTypeError, match=pattern):
        call()


def test_errors_pickle():
    err = errors.TraverseInputTypeError('x')
    assert str(pickle.loads(pickle.dumps(err))) == 'x'


def test_docstring_examples_run():
    result = doctest.testmod(traverse_util)
    assert result.attempted > 0 and result.failed == 0
