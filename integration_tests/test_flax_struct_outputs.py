"""Flax as the oracle for ``struct.dataclass`` as a model's output type.

Model hubs return ``struct.dataclass`` objects that subclass ``OrderedDict`` and fill
the mapping in ``__post_init__``; generation loops carry them through
``lax.while_loop``. Flax rebuilds such objects through their class on every
unflatten, so each behaviour here is checked side by side: the same class body
decorated by ``flax.struct`` and by ``linen.core.struct`` must give the same tree
structure, leaves, derived state and errors.
"""

from __future__ import annotations

import collections
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

fnn = pytest.importorskip('flax.linen')
fstruct = pytest.importorskip('flax.struct')

import linen.nn as nn  # noqa: E402
from linen.core import struct as lstruct  # noqa: E402

pytestmark = pytest.mark.flax


def assert_identical(ours, theirs):
    leaves_a, tree_a = jax.tree_util.tree_flatten(ours)
    leaves_b, tree_b = jax.tree_util.tree_flatten(theirs)
    assert str(tree_a).replace('linen', '') == str(tree_b).replace('flax', '')
    assert len(leaves_a) == len(leaves_b)
    for a, b in zip(leaves_a, leaves_b):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


def output_class(struct):
    """The model-hub output pattern: an OrderedDict filled in ``__post_init__``."""

    @struct.dataclass
    class EncoderOutput(collections.OrderedDict):
        last_hidden_state: jax.Array = None
        pooled: jax.Array = None

        def __post_init__(self):
            for f in dataclasses.fields(self):
                value = getattr(self, f.name)
                if value is not None:
                    self[f.name] = value

        def to_tuple(self):
            return tuple(self.values())

    return EncoderOutput


def seq2seq(struct, lib):
    """An encoder returning the output type, and a greedy loop that carries it."""
    Output = output_class(struct)

    class Encoder(lib.Module):
        @lib.compact
        def __call__(self, x):
            h = lib.Dense(6, name='proj')(x)
            return Output(last_hidden_state=h, pooled=h.mean(axis=1))

    class Step(lib.Module):
        @lib.compact
        def __call__(self, enc, y):
            return jnp.tanh(lib.Dense(6, name='mix')(y + enc['pooled']))

    class Model(lib.Module):
        def setup(self):
            self.encoder = Encoder()
            self.step = Step()

        def __call__(self, x):
            enc = self.encoder(x)
            return self.step(enc, enc.last_hidden_state[:, 0])

        def generate(self, x, steps):
            enc = self.encoder(x)

            def body(carry):
                i, enc, y = carry
                y = self.step(enc, y)
                # A fresh output object each step, as decoding caches do.
                enc = Output(last_hidden_state=enc.last_hidden_state, pooled=enc['pooled'] + y)
                return i + 1, enc, y

            _, enc, y = lax.while_loop(
                lambda c: c[0] < steps, body, (0, enc, jnp.zeros_like(enc.pooled))
            )
            return enc, y

    return Output, Model


def run_seq2seq(struct, lib):
    Output, Model = seq2seq(struct, lib)
    model = Model()
    x = jax.random.normal(jax.random.key(3), (2, 4, 5))
    variables = jax.jit(model.init)(jax.random.key(0), x)
    enc = jax.jit(lambda v, x: model.apply(v, x, method=lambda m, x: m.encoder(x)))(variables, x)
    assert type(enc) is Output and list(enc) == ['last_hidden_state', 'pooled']
    assert enc.to_tuple()[0] is enc.last_hidden_state
    gen_enc, y = jax.jit(lambda v, x: model.apply(v, x, 3, method=Model.generate))(variables, x)
    assert type(gen_enc) is Output and list(gen_enc) == ['last_hidden_state', 'pooled']
    # Reverse mode cannot cross a while_loop: the gradient goes through the
    # output object handed between the submodules instead.
    grads = jax.jit(jax.grad(lambda v: model.apply(v, x).sum()))(variables)
    mapped = jax.tree_util.tree_map(lambda a: a * 2, gen_enc)
    assert type(mapped) is Output and mapped['pooled'] is mapped.pooled
    return variables, enc, gen_enc, y, grads, mapped


def test_ordered_dict_output_through_jit_and_while_loop_matches_flax():
    theirs = run_seq2seq(fstruct, fnn)
    ours = run_seq2seq(lstruct, nn)
    for a, b in zip(ours, theirs):
        a = jax.tree_util.tree_map(np.asarray, a)
        b = jax.tree_util.tree_map(np.asarray, b)
        # Compare as plain dicts: the classes differ by construction (one per side).
        to_plain = lambda t: dict(t) if isinstance(t, collections.OrderedDict) else t
        assert_identical(
            jax.tree_util.tree_map(to_plain, a, is_leaf=lambda t: isinstance(t, dict)),
            jax.tree_util.tree_map(to_plain, b, is_leaf=lambda t: isinstance(t, dict)),
        )


def derived_class(struct):
    @struct.dataclass
    class Stats:
        total: jax.Array
        count: int = struct.field(pytree_node=False, default=1)

        def __post_init__(self):
            # Derived state that is not a field: only a rebuild through the class
            # recomputes it for new leaves.
            object.__setattr__(self, 'mean', self.total / self.count)

    return Stats


def test_post_init_derived_state_static_fields_and_kw_only_as_in_flax():
    results = []
    for struct in (fstruct, lstruct):
        check_static_fields_kw_only_and_replace(struct)
        Stats = derived_class(struct)
        s = Stats(jnp.array([2.0, 4.0]), count=2)
        mapped = jax.tree_util.tree_map(lambda v: v * 3, s)
        jitted = jax.jit(lambda s: s.replace(total=s.total + 1))(s)
        leaves, treedef = jax.tree_util.tree_flatten(s)
        results.append(
            (
                [np.asarray(v) for v in (mapped.total, mapped.mean, jitted.total, jitted.mean)],
                len(leaves),
                treedef.num_leaves,
                mapped.count,
            )
        )
    (ours_arrays, *ours_rest), (theirs_arrays, *theirs_rest) = results[1], results[0]
    assert ours_rest == theirs_rest
    for a, b in zip(ours_arrays, theirs_arrays):
        np.testing.assert_array_equal(a, b)


def check_static_fields_kw_only_and_replace(struct):
    @struct.dataclass(kw_only=True)
    class Config:
        a: int = 1
        b: jax.Array
        tag: str = struct.field(pytree_node=False, default='t')

    c = Config(b=jnp.ones(2))
    paths = [p for p, _ in jax.tree_util.tree_flatten_with_path(c)[0]]
    assert paths == [(jax.tree_util.GetAttrKey('a'),), (jax.tree_util.GetAttrKey('b'),)]
    # The static field is part of the structure, not a leaf.
    assert jax.tree_util.tree_structure(c) != jax.tree_util.tree_structure(c.replace(tag='u'))
    assert jax.tree_util.tree_map(lambda v: v + 1, c).tag == 't'
    with pytest.raises(TypeError):
        Config(1, jnp.ones(2))
    with pytest.raises(TypeError):
        c.replace(nope=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.a = 3


def _errors_of(struct):
    seen = []

    @struct.dataclass
    class Positive:
        v: float

        def __post_init__(self):
            if not self.v > 0:
                raise ValueError('v must be positive')

    _, treedef = jax.tree_util.tree_flatten(Positive(1.0))
    try:
        jax.tree_util.tree_unflatten(treedef, [-1.0])
    except Exception as e:  # the oracle's error is what is compared
        seen.append((type(e), str(e)))
    try:
        jax.jit(lambda p: p)(Positive(1.0))
    except Exception as e:  # the oracle's error is what is compared
        seen.append((type(e), str(e).splitlines()[0]))
    try:

        @struct.dataclass
        class InitFalse:
            x: float
            y: float = dataclasses.field(init=False, default=0.0)

    except Exception as e:  # the oracle's error is what is compared
        seen.append((type(e), str(e)))
    return seen


def test_unflatten_runs_validation_and_rejects_init_false_as_flax_does():
    theirs = _errors_of(fstruct)
    assert len(theirs) == 3
    assert _errors_of(lstruct) == theirs


def _struct_marks(struct):
    """What code written for Flax reads of a struct class: the marker in the class's own
    ``__dict__`` (not inherited by a plain subclass), and decorating twice a no-op."""

    @struct.dataclass
    class State:
        total: float = 0.0

    class Plain(State):  # a subclass not decorated again
        pass

    class Node(struct.PyTreeNode):
        count: int = 0

    return (
        State.__dict__.get('_flax_dataclass', False),
        Plain.__dict__.get('_flax_dataclass', False),
        Node.__dict__.get('_flax_dataclass', False),
        struct.dataclass(State) is State,
        struct.dataclass(Node) is Node,
    )


def test_struct_classes_carry_flaxs_marker_and_redecorating_is_a_no_op():
    theirs = _struct_marks(fstruct)
    assert theirs == (True, False, True, True, True)
    assert _struct_marks(lstruct) == theirs


def test_a_struct_from_either_library_passes_the_other_decorator_unchanged():
    from flax import serialization as fser

    from linen.core import serialization as lser

    @fstruct.dataclass
    class Theirs:
        x: jax.Array
        tag: str = fstruct.field(pytree_node=False, default='t')

    @lstruct.dataclass
    class Ours:
        x: jax.Array
        tag: str = lstruct.field(pytree_node=False, default='t')

    # A migrating code base decorates a class with both: the second is a no-op (it used
    # to raise dataclasses' TypeError for redefining a frozen class's __setattr__).
    assert lstruct.dataclass(Theirs) is Theirs
    assert fstruct.dataclass(Ours) is Ours
    # linen's serialization names a Flax struct's pytree fields, as Flax's does.
    theirs = Theirs(np.arange(2.0))
    assert lser.to_state_dict(theirs).keys() == fser.to_state_dict(theirs).keys() == {'x'}
    restored = lser.from_state_dict(theirs, {'x': np.ones(2)})
    assert isinstance(restored, Theirs) and restored.tag == 't'
    np.testing.assert_array_equal(restored.x, np.ones(2))
    with pytest.raises(ValueError, match='Missing field x'):
        lser.from_state_dict(theirs, {})
