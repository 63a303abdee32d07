"""Flax as oracle for linen-core's edges that real code meets (found by issue-tracker probes).

- Checkpoints whose maps have integer keys (``msgpack_serialize`` of a dict keyed by
  ints, flax#5438): Flax reads them back; so must linen, and each read the other's.
  ``msgpack_serialize`` writes Flax's bytes: keys sorted unless ``in_place=True``.
- A struct dataclass restored from a state dict with missing or unknown fields:
  Flax's ``ValueError`` and its sentence, which linen's message starts with.
- ``flax.typing``'s annotation aliases, which ``linen.core.typing`` offers under the
  same names.
- A user's ``AxisMetadata`` subclass written as a plain class with its own
  ``__init__`` and registered as a pytree by its author: Flax accepts it, through
  ``nn.scan``'s axis metadata too.
- ``is_serializable``: the same answer as Flax's for instances and classes (builtin
  containers, ``FrozenDict``, struct dataclasses and their subclasses, namedtuples,
  arrays, modules, boxed metadata).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip('flax')
pytestmark = pytest.mark.flax

import flax.linen as flax_nn  # noqa: E402
from flax import serialization as flax_serialization  # noqa: E402
from flax import struct as flax_struct  # noqa: E402
from flax.core import meta as flax_meta  # noqa: E402

import linen.nn as linen_nn  # noqa: E402
from linen.core import meta as linen_meta  # noqa: E402
from linen.core import serialization as linen_serialization  # noqa: E402
from linen.core import struct as linen_struct  # noqa: E402

INT_KEYED = {7: {2: np.int32(5), 1: 'x'}, 0: np.arange(3.0)}


def _plain(tree):
    """Keys in order, leaf types and values (JAX's tree functions refuse mixed key types)."""
    if isinstance(tree, dict):
        return [(k, _plain(v)) for k, v in tree.items()]
    return type(tree).__name__, np.asarray(tree).tolist()


def test_integer_map_keys_read_back_as_flax_reads_them():
    # The same bytes: keys sorted as JAX orders a pytree's dict keys, as Flax writes them.
    ours = linen_serialization.msgpack_serialize(INT_KEYED)
    theirs = flax_serialization.msgpack_serialize(INT_KEYED)
    assert ours == theirs
    expected = flax_serialization.msgpack_restore(theirs)
    assert _plain(linen_serialization.msgpack_restore(theirs)) == _plain(expected)
    assert _plain(flax_serialization.msgpack_restore(ours)) == _plain(expected)
    assert list(expected) == [0, 7]


@pytest.mark.parametrize(
    'tree',
    [{'b': np.ones(2), 'a': {'z': 1, 'c': np.float32(2)}}, {'zeta': [1, {'y': 2, 'x': 3}]}],
    ids=['nested', 'list'],
)
@pytest.mark.parametrize('in_place', [False, True])
def test_msgpack_serialize_writes_flaxs_bytes(tree, in_place):
    # in_place=False: Flax copies the tree by a pytree map, which sorts dict keys.
    theirs = flax_serialization.msgpack_serialize(tree, in_place=in_place)
    assert linen_serialization.msgpack_serialize(tree, in_place=in_place) == theirs
    restored = linen_serialization.msgpack_restore(theirs)
    assert _plain(restored) == _plain(flax_serialization.msgpack_restore(theirs))


def _struct_error(struct, serialization, state):
    class Pair(struct.PyTreeNode):
        a: object
        b: object = 1

    try:
        serialization.from_state_dict(Pair(jnp.ones(2)), state)
    except Exception as error:
        return error
    raise AssertionError('restored without complaint')


@pytest.mark.parametrize(
    'state',
    [{'b': 1}, {}, {'a': 0, 'b': 1, 'z': 1}, {'y': 1, 'a': 2, 'b': 3, 'c': 4}],
    ids=['one missing', 'two missing', 'one unknown', 'two unknown'],
)
def test_struct_restore_errors_start_with_flaxs_sentence(state):
    theirs = _struct_error(flax_struct, flax_serialization, state)
    ours = _struct_error(linen_struct, linen_serialization, state)
    assert isinstance(ours, type(theirs)), (type(ours), type(theirs))
    assert str(ours).startswith(str(theirs)), (str(ours), str(theirs))


def _boxed_scan_variables(nn, meta):
    class Box(meta.AxisMetadata):
        """A plain class, as Flax's docs allow: its own __init__, registered below."""

        def __init__(self, value, names):
            self.value, self.names = value, names

        def unbox(self):
            return self.value

        def replace_boxed(self, val):
            return Box(val, self.names)

        def add_axis(self, index, params):
            names = self.names[:index] + (params['axis'],) + self.names[index:]
            return Box(self.value, names)

        def remove_axis(self, index, params):
            return Box(self.value, self.names[:index] + self.names[index + 1 :])

    jax.tree_util.register_pytree_node(
        Box, lambda b: ((b.value,), b.names), lambda names, c: Box(c[0], names)
    )

    class Cell(nn.Module):
        @nn.compact
        def __call__(self, x, _):
            w = self.param('w', lambda k, s: Box(jax.random.normal(k, s), ('embed',)), (3,))
            return x * w, None

    class Stack(nn.Module):
        @nn.compact
        def __call__(self, x):
            scan = nn.scan(
                Cell,
                variable_axes={'params': 0},
                split_rngs={'params': True},
                length=4,
                metadata_params={'axis': 'layers'},
            )
            return scan(name='cells')(x, None)[0]

    x = jnp.linspace(0.0, 1.0, 3)
    variables = Stack().init(jax.random.key(0), x)
    box = variables['params']['cells']['w']
    y = Stack().apply(variables, x)
    return type(box).__name__, box.names, np.asarray(box.value), np.asarray(y)


def test_a_plain_axis_metadata_subclass_works_as_in_flax():
    name, names, value, y = _boxed_scan_variables(linen_nn, linen_meta)
    flax_name, flax_names, flax_value, flax_y = _boxed_scan_variables(flax_nn, flax_meta)
    assert (name, names) == (flax_name, flax_names) == ('Box', ('layers', 'embed'))
    assert value.tobytes() == flax_value.tobytes() and value.shape == (4, 3)
    assert y.tobytes() == flax_y.tobytes()


# flax.typing names that are not annotation aliases of Linen code: type variables,
# re-exported typing/stdlib names and modules, the lifting markers (linen.nn.transforms
# In/Out, linen-transforms'), NNX's helpers and Flax's config internals.
NOT_LINEN_ALIASES = {
    'BaseConfigContext', 'HashableMapping', 'In', 'MISSING', 'Missing', 'Out',
    'PytreeDeque', 'ShapeDtype', 'SizeBytes', 'has_shape_dtype', 'is_key_like',
}  # fmt: skip


def test_typing_offers_flaxs_annotation_aliases():
    import types
    import typing

    import flax.typing

    import linen.core.typing

    stdlib = set(dir(typing)) | {'Callable', 'Hashable', 'Iterator', 'Mapping', 'Sequence'}
    theirs = {
        name
        for name in dir(flax.typing)
        if not name.startswith('_')
        and name not in NOT_LINEN_ALIASES
        and name not in stdlib
        and not isinstance(getattr(flax.typing, name), (typing.TypeVar, types.ModuleType))
        and name not in ('annotations', 'deque', 'partial')
    }
    ours = set(linen.core.typing.__all__)
    assert theirs - ours == set(), 'aliases Flax has and linen lacks'
    assert ours - set(dir(flax.typing)) == set(), 'names linen invented'


def _serializable_cases(struct, nn, meta, frozen_dict):
    """Equivalent objects built from one library's modules (``is_serializable``'s inputs)."""
    import collections

    @struct.dataclass
    class Point:
        x: int = 1

    class SubPoint(Point):  # not a struct dataclass of its own: not registered
        pass

    class Plain:
        pass

    Pair = collections.namedtuple('Pair', 'a b')
    return {
        'int': 1,
        'float': 1.5,
        'str': 'a',
        'none': None,
        'numpy array': np.ones(2),
        'jax array': jnp.ones(2),
        'dict': {'a': 1},
        'empty dict': {},
        'list': [1],
        'tuple': (1,),
        'dict class': dict,
        'tuple class': tuple,
        'FrozenDict': frozen_dict({'a': 1}),
        'FrozenDict class': frozen_dict,
        'struct instance': Point(),
        'struct class': Point,
        'struct subclass instance': SubPoint(),
        'plain instance': Plain(),
        'plain class': Plain,
        'namedtuple': Pair(1, 2),
        'OrderedDict': collections.OrderedDict(a=1),
        'Module': nn.Dense(3),
        'Partitioned': meta.Partitioned(jnp.ones(2), ('x',)),
        'LogicallyPartitioned class': nn.LogicallyPartitioned,
        'int class': int,
    }


def test_is_serializable_answers_as_flax():
    from flax.core import FrozenDict as FlaxFrozenDict

    from linen.core import FrozenDict as LinenFrozenDict

    theirs = _serializable_cases(flax_struct, flax_nn, flax_meta, FlaxFrozenDict)
    ours = _serializable_cases(linen_struct, linen_nn, linen_meta, LinenFrozenDict)
    expected = {name: flax_serialization.is_serializable(v) for name, v in theirs.items()}
    got = {name: linen_serialization.is_serializable(v) for name, v in ours.items()}
    assert got == expected
    # Both answers occur (the comparison above is not all-True or all-False).
    assert set(expected.values()) == {True, False}
    # A type registered by the user counts from then on, as in Flax.

    class Custom:
        pass

    assert not linen_serialization.is_serializable(Custom())
    linen_serialization.register_serialization_state(Custom, lambda c: {}, lambda c, s: c)
    assert linen_serialization.is_serializable(Custom())
    assert linen_serialization.is_serializable(Custom)
