"""Flax as oracle for lifted methods: per-method transform arguments
(``methods={'name': {...}}``) and the names a transformed method may give its
submodules when called from a compact method."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import linen.nn as linen_nn
from integration_tests.oracle import assert_same_bits

pytestmark = pytest.mark.flax
flax_nn = pytest.importorskip('flax.linen')


def per_method_scan(nn):
    class Pair(nn.Module):
        def setup(self):
            self.first = nn.Dense(2)
            self.second = nn.Dense(2)

        def up(self, x):
            return self.first(x), x

        def down(self, c, x):
            return self.second(c) + x, None

    class Model(nn.Module):
        @nn.compact
        def __call__(self, x):
            scanned = nn.scan(
                Pair,
                methods={
                    'up': dict(
                        variable_axes={'params': 0},
                        split_rngs={'params': True},
                        in_axes=nn.broadcast,
                        length=3,
                    ),
                    'down': dict(variable_axes={'params': 0}, split_rngs={'params': True}),
                },
            )()
            c, xs = scanned.up(x)
            y, _ = scanned.down(c, xs)
            return y

    return Model()


def per_method_vmap(nn):
    class Two(nn.Module):
        def setup(self):
            self.dense = nn.Dense(3)

        def mapped(self, x):
            return self.dense(x)

        def shared(self, x):
            return self.dense(x)

    class Model(nn.Module):
        @nn.compact
        def __call__(self, x):
            two = nn.vmap(
                Two,
                methods={
                    'mapped': dict(variable_axes={'params': 0}, split_rngs={'params': True}),
                    'shared': dict(
                        variable_axes={'params': 0},
                        split_rngs={'params': False},
                        in_axes=1,
                        out_axes=1,
                    ),
                },
            )(name='two')
            return two.mapped(x) + two.shared(x.T).T

    return Model()


@pytest.mark.parametrize('program', [per_method_scan, per_method_vmap])
def test_per_method_transform_arguments_match_flax(program):
    x = jnp.linspace(-1.0, 1.0, 8, dtype=jnp.float32).reshape(4, 2)
    if program is per_method_vmap:
        x = jnp.linspace(-1.0, 1.0, 16, dtype=jnp.float32).reshape(4, 4)
    results = []
    for nn in (flax_nn, linen_nn):
        model = program(nn)
        variables = model.init(jax.random.key(0), x)
        results.append((dict(variables), model.apply(variables, x)))
    (fv, fy), (lv, ly) = results
    assert_same_bits(lv, fv)
    np.testing.assert_array_equal(np.asarray(ly), np.asarray(fy))


def transforms(nn):
    return {
        'jit': nn.jit,
        'remat': nn.remat,
        # shared parameters: the module has others, made outside, not mapped
        'vmap': lambda f: nn.vmap(f, variable_axes={'params': None}, split_rngs={'params': False}),
    }


def clash_program(nn, T):
    class Model(nn.Module):
        @T
        def helper(self, x, m):
            nn.Dense(2, name='a')
            return m(x)

        @nn.compact
        def __call__(self, x):
            return self.helper(x, nn.Dense(2, name='a'))

    return Model()


def autoname_program(nn, T):
    class Model(nn.Module):
        @T
        def helper(self, x):
            return nn.Dense(2)(x)

        @T
        @nn.compact
        def named(self, x):
            return nn.Dense(2, name='q')(x)

        @nn.compact
        def __call__(self, x):
            y = nn.Dense(2)(x) + self.helper(x) + self.named(x)
            return y + nn.Dense(2, name='q')(x)

    return Model()


@pytest.mark.parametrize('transform', ['jit', 'remat', 'vmap'])
def test_names_the_caller_gave_stay_taken_inside_as_flax(transform):
    """A transformed helper called from a compact method may not reuse a name the
    compact method gave out: Flax raises NameInUseError."""
    raised = []
    for nn in (flax_nn, linen_nn):
        with pytest.raises(Exception) as info:
            clash_program(nn, transforms(nn)[transform]).init(jax.random.key(0), jnp.ones((3, 2)))
        raised.append(type(info.value).__name__)
    assert raised == ['NameInUseError', 'NameInUseError']


@pytest.mark.parametrize('transform', ['jit', 'remat', 'vmap'])
def test_automatic_names_inside_skip_the_callers_as_flax(transform):
    """``Dense_0`` made before the call: the helper's Dense is ``Dense_1`` (its own
    parameters), and a name made inside is free again outside."""
    x = jnp.linspace(0.0, 1.0, 6, dtype=jnp.float32).reshape(3, 2)
    results = []
    for nn in (flax_nn, linen_nn):
        model = autoname_program(nn, transforms(nn)[transform])
        variables = model.init(jax.random.key(0), x)
        results.append((dict(variables), model.apply(variables, x)))
    (fv, fy), (lv, ly) = results
    if transform != 'jit':  # nn.jit's keys differ from Flax's (D1): compare structure
        assert_same_bits(lv, fv)
        np.testing.assert_array_equal(np.asarray(ly), np.asarray(fy))
    assert jax.tree_util.tree_map(jnp.shape, lv) == jax.tree_util.tree_map(jnp.shape, fv)
    assert sorted(lv['params']) == ['Dense_0', 'Dense_1', 'q']


TRANSFORM_MAKERS = {
    'checkpoint': lambda nn: nn.checkpoint,
    'jit': lambda nn: nn.jit,
    'vmap': lambda nn: (
        lambda t: nn.vmap(t, variable_axes={'params': 0}, split_rngs={'params': True})
    ),
    'scan': lambda nn: (
        lambda t: nn.scan(t, variable_axes={'params': 0}, split_rngs={'params': True})
    ),
    'map_variables': lambda nn: nn.map_variables,
    'fold_rngs': lambda nn: nn.fold_rngs,
    'remat_scan': lambda nn: lambda t: nn.remat_scan(t, lengths=(2,)),
}


@pytest.mark.parametrize('transform', list(TRANSFORM_MAKERS))
def test_a_module_instance_as_target_raises_transform_target_error_as_flax(transform):
    texts = []
    for nn in (flax_nn, linen_nn):
        T = TRANSFORM_MAKERS[transform](nn)
        with pytest.raises(Exception) as info:
            T(nn.Dense(2))
        texts.append((type(info.value).__name__, str(info.value).split('.')[0]))
    assert texts[1] == texts[0]
    assert texts[0][0] == 'TransformTargetError'


def jitted_init_program(nn):
    class Model(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(2)(x)

        @nn.jit
        def init_with_output(self, rngs, *args, **kwargs):
            return super().init_with_output(rngs, *args, **kwargs)

    return Model()


def test_jit_over_a_method_of_an_unbound_module_as_flax():
    """``@nn.jit`` on ``init_with_output``: compiled as a function of the module."""
    x = jnp.linspace(-1.0, 1.0, 6, dtype=jnp.float32).reshape(2, 3)
    fy, fv = jitted_init_program(flax_nn).init_with_output(jax.random.key(0), x)
    ly, lv = jitted_init_program(linen_nn).init_with_output(jax.random.key(0), x)
    assert_same_bits(dict(lv), dict(fv))
    np.testing.assert_array_equal(np.asarray(ly), np.asarray(fy))


def traced_parent_program(nn, counter, jit_class):
    class Leaf(nn.Module):
        key: int

        def __call__(self, x):
            return x * self.key

    class Parent(nn.Module):
        leaves: list

        @nn.compact
        def __call__(self, x):
            counter.append(1)  # once per trace
            for leaf in self.leaves:
                x = leaf(x)
            return x

    if jit_class:
        return Leaf, nn.jit(Parent)
    Parent.__call__ = nn.jit(Parent.__call__)
    return Leaf, Parent


@pytest.mark.parametrize('jit_class', [True, False], ids=['class', 'method'])
def test_jit_with_submodule_fields_traces_once_per_configuration_as_flax(jit_class):
    """Submodules in a jitted module's fields, built anew on each apply: equal ones
    reuse the trace (Flax keys on the fields; they are bound, so not hashable)."""
    x = jnp.array(1.5)
    counts, outs = [], []
    for nn in (flax_nn, linen_nn):
        counter: list = []
        Leaf, Parent = traced_parent_program(nn, counter, jit_class)
        ys = [Parent([Leaf(k), Leaf(k + 1)]).apply({}, x) for k in (2, 2, 3, 3)]
        counts.append(len(counter))
        outs.append([float(y) for y in ys])
    assert counts[1] == counts[0] == 2
    assert outs[1] == outs[0] == [9.0, 9.0, 18.0, 18.0]


def _classes_inside(nn):
    seen = []

    class Cell(nn.Module):
        @nn.compact
        def __call__(self, x):
            seen.append(type(self).__name__)
            return nn.Dense(3)(x)

    transforms = {
        'jit': nn.jit(Cell),
        'remat': nn.remat(Cell),
        'vmap': nn.vmap(Cell, variable_axes={'params': 0}, split_rngs={'params': True}),
    }
    out = {}
    for kind, lifted in transforms.items():

        class Top(nn.Module):
            @nn.compact
            def __call__(self, x, lifted=lifted):
                return lifted(name='inner')(x)

        seen.clear()
        variables = Top().init(jax.random.key(0), jnp.ones((2, 3)))
        Top().apply(variables, jnp.ones((2, 3)))
        out[kind] = (type(lifted(name='x')).__name__, sorted(set(seen)))
    return out


def test_a_lifted_class_runs_its_method_on_an_instance_of_the_class_it_lifts():
    # `nn.jit(Cell)` is the subclass `JitCell`; inside the transform the method runs on
    # a `Cell`, as under the other lifted class transforms (code reading
    # `type(self).__name__` there, to name or log, sees the class it wrote).
    expected = {
        'jit': ('JitCell', ['Cell']),
        'remat': ('CheckpointCell', ['Cell']),
        'vmap': ('VmapCell', ['Cell']),
    }
    assert _classes_inside(flax_nn) == expected
    assert _classes_inside(linen_nn) == expected
