import pickle

import jax
import jax.numpy as jnp
import pytest

from linen.core.frozen_dict import FrozenDict, copy, freeze, pop, pretty_repr, unfreeze


def test_nested_values_come_back_frozen_and_storage_is_copied():
    src = {'a': {'x': 1}}
    d = FrozenDict(src)
    src['a']['x'] = 99
    assert isinstance(d['a'], FrozenDict)
    assert d['a']['x'] == 1


def test_immutable():
    d = FrozenDict({'a': 1})
    with pytest.raises(ValueError, match='immutable'):
        d['a'] = 2
    with pytest.raises(ValueError, match='immutable'):
        del d['a']
    with pytest.raises(KeyError):
        d['missing']


def test_equality_and_hash_ignore_insertion_order():
    a = FrozenDict({'b': 1, 'a': {'y': 2, 'x': 3}})
    b = FrozenDict({'a': {'x': 3, 'y': 2}, 'b': 1})
    assert a == b
    assert a == {'b': 1, 'a': {'y': 2, 'x': 3}}
    assert hash(a) == hash(b)
    assert FrozenDict({'a': 1}) != FrozenDict({'a': 2})
    assert len({a, b}) == 1
    with pytest.raises(TypeError):
        hash(FrozenDict({'a': [1]}))


def test_mapping_protocol_keeps_insertion_order():
    d = FrozenDict({'b': 1, 'a': 2})
    assert list(d) == ['b', 'a']
    assert list(d.keys()) == ['b', 'a']
    assert list(d.values()) == [1, 2]
    assert list(d.items()) == [('b', 1), ('a', 2)]
    assert len(d) == 2 and 'a' in d and 'z' not in d
    assert d.get('z', 4) == 4
    assert repr(d.keys()) == "frozen_dict_keys(['b', 'a'])"


def test_pytree_flattens_in_sorted_key_order_with_dict_keys():
    d = FrozenDict({'b': 1, 'a': {'y': 2, 'x': 3}})
    leaves, treedef = jax.tree_util.tree_flatten(d)
    assert leaves == [3, 2, 1]
    rebuilt = jax.tree_util.tree_unflatten(treedef, [7, 8, 9])
    assert isinstance(rebuilt, FrozenDict)
    assert unfreeze(rebuilt) == {'a': {'x': 7, 'y': 8}, 'b': 9}
    paths = [p for p, _ in jax.tree_util.tree_flatten_with_path(d)[0]]
    assert paths == [
        (jax.tree_util.DictKey('a'), jax.tree_util.DictKey('x')),
        (jax.tree_util.DictKey('a'), jax.tree_util.DictKey('y')),
        (jax.tree_util.DictKey('b'),),
    ]
    mapped = jax.tree_util.tree_map_with_path(lambda p, x: jax.tree_util.keystr(p), d)
    assert mapped['a']['x'] == "['a']['x']"


def test_same_items_give_same_treedef_and_jit_works():
    a = FrozenDict({'b': 1.0, 'a': 2.0})
    b = FrozenDict({'a': 2.0, 'b': 1.0})
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    out = jax.jit(lambda t: jax.tree_util.tree_map(lambda x: x * 2, t))(a)
    assert isinstance(out, FrozenDict)
    assert float(out['a']) == 4.0 and float(out['b']) == 2.0


def test_copy_and_pop_methods():
    d = FrozenDict({'b': 1, 'a': 2})
    c = d.copy({'c': 3, 'b': 9})
    assert isinstance(c, FrozenDict)
    assert list(c.items()) == [('b', 9), ('a', 2), ('c', 3)]
    assert d == {'b': 1, 'a': 2}
    rest, value = d.pop('b')
    assert value == 1 and rest == {'a': 2} and isinstance(rest, FrozenDict)
    with pytest.raises(KeyError):
        d.pop('zz')


def test_free_functions_on_dicts():
    src = {'a': 1, 'b': {'c': 2}}
    rest, value = pop(src, 'a')
    assert type(rest) is dict and rest == {'b': {'c': 2}} and value == 1
    assert src == {'a': 1, 'b': {'c': 2}}  # not mutated
    merged = copy(src, {'z': 0})
    assert type(merged) is dict and merged == {'a': 1, 'b': {'c': 2}, 'z': 0}
    merged['b']['c'] = 5
    assert src['b']['c'] == 2  # deep copy of the mapping structure
    assert isinstance(copy(FrozenDict(src), {'z': 0}), FrozenDict)
    rest, value = pop(FrozenDict(src), 'b')
    assert isinstance(rest, FrozenDict) and value == {'c': 2}


def test_freeze_unfreeze():
    f = freeze({'a': {'b': 1}, 'l': [{'x': 1}]})
    assert isinstance(f, FrozenDict) and isinstance(f['a'], FrozenDict)
    u = unfreeze(f)
    assert type(u) is dict and type(u['a']) is dict
    # Like Flax: a FrozenDict thaws in sorted (pytree) order, a dict keeps its order.
    assert list(unfreeze(FrozenDict({'b': 1, 'a': 2}))) == ['a', 'b']
    assert list(unfreeze({'b': 1, 'a': 2})) == ['b', 'a']
    assert type(unfreeze({'a': FrozenDict({'b': 1})})['a']) is dict
    assert unfreeze(3) == 3


def test_pretty_repr():
    assert pretty_repr({'a': 1, 'b': {}}) == '{\n    a: 1,\n    b: {},\n}'
    d = FrozenDict({'b': 1, 'a': {'y': 2}})
    assert repr(d) == 'FrozenDict({\n    b: 1,\n    a: {\n        y: 2,\n    },\n})'
    assert d.pretty_repr(num_spaces=2) == 'FrozenDict({\n  b: 1,\n  a: {\n    y: 2,\n  },\n})'
    assert repr(FrozenDict()) == 'FrozenDict({})'
    assert pretty_repr([1, 2]) == '[1, 2]'
    arr = jnp.ones((2, 2))
    expected_value = repr(arr).replace('\n', '\n    ')
    assert pretty_repr({'w': arr}) == '{\n    w: ' + expected_value + ',\n}'


def test_pickle_round_trip():
    d = FrozenDict({'a': {'b': 1}, 'c': 2})
    assert pickle.loads(pickle.dumps(d)) == d
