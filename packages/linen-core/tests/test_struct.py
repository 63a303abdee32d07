import dataclasses

import jax
import jax.numpy as jnp
import pytest

from linen.core import serialization, struct
from linen.core.errors import InvalidCheckpointError


@struct.dataclass
class Point:
    x: jax.Array
    y: jax.Array
    label: str = struct.field(pytree_node=False, default='p')


class TrainState(struct.PyTreeNode):
    step: int
    params: dict
    tx_name: str = struct.field(pytree_node=False, default='sgd')


def test_dataclass_is_frozen_pytree_with_static_fields():
    p = Point(jnp.array(1.0), jnp.array(2.0), label='a')
    leaves, treedef = jax.tree_util.tree_flatten(p)
    assert [float(v) for v in leaves] == [1.0, 2.0]
    rebuilt = jax.tree_util.tree_unflatten(treedef, [3.0, 4.0])
    assert rebuilt == Point(3.0, 4.0, label='a')
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.x = 3
    # Static fields are part of the structure: a different label is a different tree.
    assert treedef != jax.tree_util.tree_structure(Point(1.0, 2.0, label='b'))


def test_paths_are_attribute_keys():
    paths = [p for p, _ in jax.tree_util.tree_flatten_with_path(Point(1.0, 2.0))[0]]
    assert paths == [(jax.tree_util.GetAttrKey('x'),), (jax.tree_util.GetAttrKey('y'),)]


def test_replace_and_transforms():
    p = Point(jnp.array(1.0), jnp.array(2.0))
    assert p.replace(x=5.0).x == 5.0 and p.replace(x=5.0).label == 'p'
    grads = jax.grad(lambda q: q.x * q.y)(p)
    assert isinstance(grads, Point)
    assert float(grads.x) == 2.0 and float(grads.y) == 1.0
    out = jax.jit(lambda q: q.replace(x=q.x + 1))(p)
    assert float(out.x) == 2.0


def test_pytreenode_subclass_and_kwargs():
    s = TrainState(step=1, params={'w': jnp.ones(2)})
    assert dataclasses.is_dataclass(TrainState)
    assert len(jax.tree_util.tree_leaves(s)) == 2
    assert s.replace(step=2).step == 2

    class KwOnly(struct.PyTreeNode, kw_only=True):
        a: int = 1
        b: int

    assert KwOnly(b=2).a == 1
    with pytest.raises(TypeError):
        KwOnly(1, 2)


def test_unflatten_rebuilds_through_the_class():
    # As Flax: __init__ and __post_init__ run on every unflatten, so validation
    # there sees the new leaves and derived state follows them.
    @struct.dataclass
    class Positive:
        v: float

        def __post_init__(self):
            if not self.v > 0:
                raise ValueError('v must be positive')

    leaves, treedef = jax.tree_util.tree_flatten(Positive(1.0))
    with pytest.raises(ValueError, match='v must be positive'):
        jax.tree_util.tree_unflatten(treedef, [-1.0])

    @struct.dataclass
    class Derived:
        a: float
        double: float = None

        def __post_init__(self):
            object.__setattr__(self, 'double', self.a * 2)

    assert jax.tree_util.tree_map(lambda v: v + 1, Derived(1.0)) == Derived(2.0)
    assert Derived(2.0).double == 4.0


def test_ordered_dict_output_comes_out_of_jit_and_while_loop():
    import collections

    @struct.dataclass
    class Output(collections.OrderedDict):
        hidden: jax.Array = None

        def __post_init__(self):
            self['hidden'] = self.hidden

    out = jax.jit(lambda x: Output(hidden=x * 2))(jnp.ones(3))
    assert type(out) is Output and list(out) == ['hidden']
    assert out['hidden'].tolist() == [2.0, 2.0, 2.0]
    carried = jax.lax.while_loop(
        lambda c: c[0] < 3, lambda c: (c[0] + 1, Output(hidden=c[1]['hidden'] + 1)), (0, out)
    )[1]
    assert carried['hidden'].tolist() == [5.0, 5.0, 5.0]


def test_init_false_field_is_rejected_at_decoration():
    with pytest.raises(ValueError, match='init=True'):

        @struct.dataclass
        class Bad:
            x: float
            y: float = dataclasses.field(init=False, default=0.0)


def test_decorating_twice_is_a_no_op():
    assert struct.dataclass(Point) is Point


def test_serialization_round_trip_uses_pytree_fields_only():
    s = TrainState(step=3, params={'w': jnp.arange(2.0)}, tx_name='adam')
    state = serialization.to_state_dict(s)
    assert set(state) == {'step', 'params'}
    target = TrainState(step=0, params={'w': jnp.zeros(2)}, tx_name='adam')
    restored = serialization.from_bytes(target, serialization.to_bytes(s))
    assert restored.step == 3 and restored.tx_name == 'adam'
    assert restored.params['w'].tolist() == [0.0, 1.0]


def test_serialization_missing_and_unknown_fields():
    target = TrainState(step=0, params={})
    with pytest.raises(InvalidCheckpointError, match=r'^Missing field params .*TrainState'):
        serialization.from_state_dict(target, {'step': 1})
    # Flax's sentence names the first; linen lists the others after it.
    with pytest.raises(InvalidCheckpointError, match=r'^Missing field step .*also missing: params'):
        serialization.from_state_dict(target, {})
    # In the state dict's order, comma-joined in one pair of quotes (Flax's form).
    with pytest.raises(InvalidCheckpointError, match=r'^Unknown field\(s\) "zeta,extra" '):
        serialization.from_state_dict(target, {'zeta': 0, 'step': 1, 'params': {}, 'extra': 2})
    with pytest.raises(InvalidCheckpointError, match='Expected a dict of fields'):
        serialization.from_state_dict(target, 3)
