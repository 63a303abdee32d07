"""Flax as oracle for lifted transforms of Modules whose dataclass fields hold submodules.

A submodule given to a transformed Module as a field (``nn.vmap(Block)(sub=layer)``,
or ``C(a, b)`` at top level) is adopted by it; its variables must then live under the
transformed scope, mapped or scanned like the module's own (as in Flax).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import linen.nn as linen_nn
from integration_tests.oracle import assert_same_bits

pytestmark = pytest.mark.flax
flax_nn = pytest.importorskip('flax.linen')

BOTH = [pytest.param(flax_nn, id='flax'), pytest.param(linen_nn, id='linen')]


def shapes(tree):
    return jax.tree_util.tree_map(jnp.shape, jax.tree_util.tree_map(jnp.asarray, dict(tree)))


def setup_field_program(nn):
    class Block(nn.Module):
        sub: nn.Module

        def __call__(self, x):
            return self.sub(x)

    Vmapped = nn.vmap(
        Block, variable_axes={'params': 0}, split_rngs={'params': True}, in_axes=0, out_axes=0
    )

    class Parent(nn.Module):
        def setup(self):
            self.blocks = Vmapped(sub=nn.Dense(3))

        def __call__(self, x):
            return self.blocks(x)

    return Parent()


def compact_field_program(nn):
    class Block(nn.Module):
        sub: nn.Module

        def __call__(self, x):
            return self.sub(x)

    Vmapped = nn.vmap(Block, variable_axes={'params': 0}, split_rngs={'params': True})

    class Parent(nn.Module):
        @nn.compact
        def __call__(self, x):
            return Vmapped(sub=nn.Dense(3))(x)

    return Parent()


def toplevel_program(nn, as_class):
    class A(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(3)(x)

    class B(nn.Module):
        inner: nn.Module

        @nn.compact
        def __call__(self, x):
            return self.inner(x)

    class C(nn.Module):
        a: nn.Module
        b: nn.Module

        @nn.compact
        def __call__(self, x):
            return self.b(x) + self.a(x)

    vmap = functools.partial(nn.vmap, variable_axes={'params': 0}, split_rngs={'params': True})
    if as_class:
        return vmap(C)(A(), B(A()))

    class Top(C):
        @vmap
        @nn.compact
        def __call__(self, x):
            return self.b(x) + self.a(x)

    return Top(A(), B(A()))


PROGRAMS = {
    'setup_field': setup_field_program,
    'compact_field': compact_field_program,
    'toplevel_class': functools.partial(toplevel_program, as_class=True),
    'toplevel_method': functools.partial(toplevel_program, as_class=False),
}


@pytest.mark.parametrize('program', list(PROGRAMS))
def test_field_submodules_under_vmap_match_flax(program):
    x = jnp.linspace(-1.0, 1.0, 12, dtype=jnp.float32).reshape(4, 3)
    out = {}
    for nn in (flax_nn, linen_nn):
        model = PROGRAMS[program](nn)
        variables = model.init(jax.random.key(0), x)
        y = model.apply(variables, x)
        out[nn] = (variables, y)
    (fv, fy), (lv, ly) = out[flax_nn], out[linen_nn]
    assert shapes(lv) == shapes(fv)
    assert_same_bits(dict(lv), dict(fv))
    np.testing.assert_array_equal(np.asarray(ly), np.asarray(fy))


@pytest.mark.parametrize('nn', BOTH)
def test_field_submodule_params_are_mapped(nn):
    """Independent check: the field's Dense params carry the vmapped axis."""
    x = jnp.ones((4, 3), jnp.float32)
    variables = setup_field_program(nn).init(jax.random.key(0), x)
    assert shapes(variables['params'])['blocks']['sub'] == {'kernel': (4, 3, 3), 'bias': (4, 3)}


def jit_setup_field_program(nn, jit=True):
    class Block(nn.Module):
        sub: nn.Module

        def __call__(self, x):
            return self.sub(x)

    Jitted = nn.jit(Block) if jit else Block

    class Parent(nn.Module):
        def setup(self):
            self.block = Jitted(sub=nn.Dense(3))

        def __call__(self, x):
            return self.block(x)

    return Parent()


def test_field_submodule_made_in_parent_setup_under_jit_as_flax():
    """The field's Dense lives under the jitted module (Flax's tree); its values are
    those of the un-jitted program (nn.jit keeps the parameters a key gives, D1)."""
    x = jnp.ones((2, 3), jnp.float32)
    fv = jit_setup_field_program(flax_nn).init(jax.random.key(0), x)
    lv = jit_setup_field_program(linen_nn).init(jax.random.key(0), x)
    plain = jit_setup_field_program(linen_nn, jit=False).init(jax.random.key(0), x)
    assert (
        shapes(lv) == shapes(fv) == {'params': {'block': {'sub': {'kernel': (3, 3), 'bias': (3,)}}}}
    )
    assert_same_bits(dict(lv), dict(plain))
    y = jit_setup_field_program(linen_nn).apply(lv, x)
    p = lv['params']['block']['sub']
    np.testing.assert_allclose(y, x @ p['kernel'] + p['bias'][None], rtol=1e-6)


def mapped_field_program(nn):
    class Block(nn.Module):
        sub: nn.Module

        def __call__(self, x):
            return self.sub(x)

    class Parent(nn.Module):
        @nn.compact
        def __call__(self, x):
            mapped = nn.map_variables(
                Block,
                'params',
                trans_in_fn=lambda vs: jax.tree_util.tree_map(lambda a: a * 0.5, vs),
                trans_out_fn=lambda vs: vs,
                init=self.is_initializing(),
            )
            return mapped(sub=nn.Dense(3))(x)

    return Parent()


def test_field_submodule_made_in_a_compact_parent_goes_through_map_variables_as_flax():
    """The field's Dense (a child of the parent) is lifted into the mapped scope, so
    ``trans_in_fn`` sees its variables (Flax's multi-scope lifting)."""
    x = jnp.linspace(-1.0, 1.0, 6, dtype=jnp.float32).reshape(2, 3)
    out = []
    for nn in (flax_nn, linen_nn):
        model = mapped_field_program(nn)
        variables = model.init(jax.random.key(0), x)
        out.append((dict(variables), model.apply(variables, x)))
    (fv, fy), (lv, ly) = out
    assert_same_bits(lv, fv)
    np.testing.assert_array_equal(np.asarray(ly), np.asarray(fy))
    p = lv['params']['Dense_0']
    np.testing.assert_allclose(ly, x @ (0.5 * p['kernel']) + 0.5 * p['bias'][None], rtol=1e-6)


def dict_field_modules(nn):
    """A Module whose field is a dict of submodules (frozen into a FrozenDict on
    assignment, in Flax and linen alike), each counting its calls."""

    class Counted(nn.Module):
        @nn.compact
        def __call__(self, x):
            calls = self.variable('counter', 'calls', jnp.zeros, ())
            calls.value += 1
            return nn.Dense(x.shape[-1])(x)

    class Pair(nn.Module):
        layers: dict

        @nn.compact
        def __call__(self, x):
            return jnp.tanh(self.layers['second'](self.layers['first'](x)))

    class Step(nn.Module):
        layers: dict

        @nn.compact
        def __call__(self, carry, x):
            h = self.layers['first'](carry + x)
            return jnp.tanh(self.layers['second'](h)), h

    return Counted, Pair, Step


def _pair_reference(params, x):
    """``Pair`` in plain jax.numpy, from its parameters."""

    def dense(p, v):
        return v @ p['kernel'] + p['bias'].reshape((1,) * (v.ndim - 1) + p['bias'].shape)

    h = dense(params['layers_first']['Dense_0'], x)
    return jnp.tanh(dense(params['layers_second']['Dense_0'], h))


def test_dict_field_submodules_under_scan_carry_their_variables_as_flax():
    """Scanned with their counters carried: each step's writes reach the loop's carry
    (before, the pre-loop step's writes were left in the caller's dicts: a leaked tracer)."""
    xs = jnp.linspace(-1.0, 1.0, 12, dtype=jnp.float32).reshape(4, 3)
    carry0 = jnp.full((3,), 0.25, jnp.float32)
    out = {}
    for nn in (flax_nn, linen_nn):
        Counted, _, Step = dict_field_modules(nn)
        layers = {'first': Counted(), 'second': Counted()}
        variables = Step(layers).init(jax.random.key(0), carry0, xs[0])
        scanned = nn.scan(
            Step,
            variable_carry='counter',
            variable_broadcast='params',
            split_rngs={'params': False},
        )(layers)
        (carry, hs), state = scanned.apply(variables, carry0, xs, mutable='counter')
        out[nn] = (dict(variables), carry, hs, dict(state))
    (fv, fc, fh, fs), (lv, lc, lh, ls) = out[flax_nn], out[linen_nn]
    assert_same_bits(lv, fv)
    assert_same_bits((lc, lh, ls), (fc, fh, fs))
    # Independent: one call at init, then one per step.
    assert float(ls['counter']['layers_first']['calls']) == 1 + len(xs)
    assert float(ls['counter']['layers_second']['calls']) == 1 + len(xs)
    c = carry0
    for x in xs:
        c = _pair_reference(lv['params'], c + x)
    np.testing.assert_allclose(lc, c, rtol=1e-6)


def test_dict_field_submodules_under_vmap_are_mapped_as_flax():
    x = jnp.linspace(-1.0, 1.0, 12, dtype=jnp.float32).reshape(4, 3)
    out = {}
    for nn in (flax_nn, linen_nn):
        Counted, Pair, _ = dict_field_modules(nn)
        mapped = nn.vmap(
            Pair,
            variable_axes={'params': 0, 'counter': 0},
            split_rngs={'params': True},
        )({'first': Counted(), 'second': Counted()})
        variables = mapped.init(jax.random.key(0), x)
        y, state = mapped.apply(variables, x, mutable='counter')
        out[nn] = (dict(variables), y, dict(state))
    (fv, fy, fs), (lv, ly, ls) = out[flax_nn], out[linen_nn]
    assert shapes(lv['params'])['layers_first'] == {
        'Dense_0': {'kernel': (4, 3, 3), 'bias': (4, 3)}
    }
    assert_same_bits((lv, ly, ls), (fv, fy, fs))
    np.testing.assert_array_equal(np.asarray(ls['counter']['layers_second']['calls']), [2.0] * 4)
    each = [
        _pair_reference(jax.tree_util.tree_map(lambda a, i=i: a[i], lv['params']), x[i])
        for i in range(4)
    ]
    np.testing.assert_allclose(ly, jnp.stack(each), rtol=1e-6)


def test_dict_field_submodules_under_remat_differentiate_as_flax():
    x = jnp.linspace(-1.0, 1.0, 6, dtype=jnp.float32).reshape(2, 3)
    out = {}
    for nn in (flax_nn, linen_nn):
        Counted, Pair, _ = dict_field_modules(nn)
        model = nn.remat(Pair)({'first': Counted(), 'second': Counted()})
        variables = model.init(jax.random.key(0), x)

        def loss(params, model=model, variables=variables):
            y, state = model.apply({**variables, 'params': params}, x, mutable='counter')
            return jnp.sum(y * y), state

        (value, state), grads = jax.value_and_grad(loss, has_aux=True)(variables['params'])
        out[nn] = (dict(variables), value, dict(state), grads)
    assert_same_bits(out[linen_nn], out[flax_nn])
    lv, _, ls, grads = out[linen_nn]
    assert float(ls['counter']['layers_first']['calls']) == 2.0
    expected = jax.grad(lambda p: jnp.sum(_pair_reference(p, x) ** 2))(dict(lv['params']))
    for got, want in zip(jax.tree_util.tree_leaves(grads), jax.tree_util.tree_leaves(expected)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_dict_field_submodules_under_jit_live_under_the_jitted_module():
    """Built in a parent's ``setup`` (a jitted block of a model): Flax's variable tree,
    and the values of the un-jitted program (nn.jit keeps the parameters a key gives, D1).
    Before, the field's submodules wrote the caller's variables from inside the trace."""
    x = jnp.linspace(-1.0, 1.0, 6, dtype=jnp.float32).reshape(2, 3)
    trees = {}
    for nn, jit in ((flax_nn, True), (linen_nn, True), (linen_nn, False)):
        Counted, Pair, _ = dict_field_modules(nn)
        cls = nn.jit(Pair) if jit else Pair

        class Parent(nn.Module):
            def setup(self, cls=cls, Counted=Counted):
                self.pair = cls({'first': Counted(), 'second': Counted()})

            def __call__(self, x):
                return self.pair(x)

        variables = Parent().init(jax.random.key(0), x)
        y, state = Parent().apply(variables, x, mutable='counter')
        trees[nn, jit] = (dict(variables), y, dict(state))
    assert shapes(trees[linen_nn, True][0]) == shapes(trees[flax_nn, True][0])
    (lv, ly, ls), (pv, py, ps) = trees[linen_nn, True], trees[linen_nn, False]
    assert_same_bits((lv, ls), (pv, ps))
    # A compiled program may round differently from op-by-op execution.
    np.testing.assert_allclose(ly, py, rtol=1e-6)
    assert float(ls['counter']['pair']['layers_second']['calls']) == 2.0
    np.testing.assert_allclose(ly, _pair_reference(lv['params']['pair'], x), rtol=1e-6)
