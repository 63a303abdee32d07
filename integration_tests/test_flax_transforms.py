"""Flax as oracle for the lifted transforms: the same model code, run with ``linen.nn``
and with ``flax.linen``, gives the same variables (same key) and the same outputs."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import linen.nn as linen_nn

pytestmark = pytest.mark.flax
flax = pytest.importorskip('flax')
flax_nn = pytest.importorskip('flax.linen')


def models(nn):
    class Cell(nn.Module):
        @nn.compact
        def __call__(self, c, x):
            c = jnp.tanh(nn.Dense(c.shape[-1])(c) + x)
            return c, c

    class VmapDense(nn.Module):
        @nn.compact
        def __call__(self, x):
            V = nn.vmap(nn.Dense, variable_axes={'params': 0}, split_rngs={'params': True})
            return V(3)(x)

    class ScanStacked(nn.Module):
        @nn.compact
        def __call__(self, c, xs):
            S = nn.scan(Cell, variable_axes={'params': 0}, split_rngs={'params': True})
            return S()(c, xs)

    class ScanShared(nn.Module):
        @nn.compact
        def __call__(self, c, xs):
            S = nn.scan(
                nn.remat(Cell),
                variable_broadcast='params',
                split_rngs={'params': False},
                in_axes=1,
                out_axes=-1,
            )
            return S()(c, xs)

    class Block(nn.Module):
        @nn.compact
        def __call__(self, x):
            return jnp.tanh(nn.Dense(x.shape[-1])(x))

    class RematScan(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.remat_scan(Block, lengths=(2, 3))()(x)

    class Cond(nn.Module):
        @nn.compact
        def __call__(self, x, pred):
            def t(mdl, x):
                return nn.Dense(2, name='dense')(x)

            def f(mdl, x):
                return -nn.Dense(2, name='dense')(x)

            return nn.cond(pred, t, f, self, x)

    class Switch(nn.Module):
        @nn.compact
        def __call__(self, x, index):
            def branch(scale):
                return lambda mdl, x: scale * nn.Dense(2, name='dense')(x)

            return nn.switch(index, [branch(1.0), branch(-1.0), branch(0.5)], self, x)

    class Vjp(nn.Module):
        @nn.compact
        def __call__(self, x):
            y, bwd = nn.vjp(lambda mdl, x: mdl(x), nn.Dense(2), x)
            return y, bwd(jnp.ones_like(y))

    class Jvp(nn.Module):
        @nn.compact
        def __call__(self, x):
            dense = nn.Dense(2)
            y, t = nn.jvp(
                lambda mdl, x: mdl(x), dense, (x,), (jnp.ones_like(x),), variable_tangents={}
            )
            return y, t

    class Masked(nn.Module):
        @nn.compact
        def __call__(self, x):
            def mask(v):
                return jax.tree_util.tree_map(jnp.triu, v) if not self.is_initializing() else v

            D = nn.map_variables(nn.Dense, 'params', mask, init=self.is_initializing())
            return D(3, use_bias=False)(x)

    return dict(
        VmapDense=VmapDense,
        ScanStacked=ScanStacked,
        ScanShared=ScanShared,
        RematScan=RematScan,
        Cond=Cond,
        Switch=Switch,
        Vjp=Vjp,
        Jvp=Jvp,
        Masked=Masked,
    )


X = jax.random.normal(jax.random.key(1), (4, 3))
XS = jax.random.normal(jax.random.key(2), (5, 4, 3))

CASES = {
    'VmapDense': (X,),
    'ScanStacked': (jnp.zeros((4, 3)), XS),
    'ScanShared': (jnp.zeros((5, 3)), XS),
    'RematScan': (X,),
    'Cond-true': (X, True),
    'Cond-false': (X, False),
    'Switch': (X, 1),
    'Vjp': (X,),
    'Jvp': (X,),
    'Masked': (X,),
}


def run(nn, case):
    name = case.split('-')[0]
    model = models(nn)[name]()
    args = CASES[case]
    variables = model.init(jax.random.key(0), *args)
    variables = flax.core.unfreeze(variables) if hasattr(variables, 'unfreeze') else variables
    y = model.apply(variables, *args)
    return jax.tree_util.tree_map(np.asarray, dict(variables)), y


@pytest.mark.parametrize('case', list(CASES))
def test_same_variables_and_outputs_as_flax(case):
    ours_vars, ours_y = run(linen_nn, case)
    flax_vars, flax_y = run(flax_nn, case)
    assert jax.tree_util.tree_structure(ours_vars) == jax.tree_util.tree_structure(flax_vars)
    for a, b in zip(jax.tree_util.tree_leaves(ours_vars), jax.tree_util.tree_leaves(flax_vars)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    ours_leaves = jax.tree_util.tree_leaves(ours_y)
    flax_leaves = jax.tree_util.tree_leaves(flax_y)
    assert len(ours_leaves) == len(flax_leaves)
    for a, b in zip(ours_leaves, flax_leaves):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_jit_params_differ_from_flax_but_equal_our_unjitted():
    """Flax's nn.jit changes the parameters a key gives (its documented gotcha); ours not."""

    def make(nn, jit):
        class M(nn.Module):
            @nn.compact
            def __call__(self, x):
                return (nn.jit(nn.Dense) if jit else nn.Dense)(2, name='d')(x)

        return M()

    ours = make(linen_nn, True).init(jax.random.key(0), X)
    ours_plain = make(linen_nn, False).init(jax.random.key(0), X)
    flax_plain = make(flax_nn, False).init(jax.random.key(0), X)
    np.testing.assert_array_equal(
        ours['params']['d']['kernel'], ours_plain['params']['d']['kernel']
    )
    np.testing.assert_allclose(
        ours_plain['params']['d']['kernel'], flax_plain['params']['d']['kernel'], rtol=1e-6
    )


def _assert_same(a, b):
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-6, atol=1e-7)


def _gated(nn):
    class Gated(nn.Module):
        @nn.compact
        def __call__(self, x, train):
            y = nn.Dense(4)(x)
            return nn.relu(y) if train else y  # Python control flow: train must be static

    return Gated


@pytest.mark.parametrize('train', [True, False])
def test_remat_static_argnums_count_self_as_flax(train):
    x = jnp.linspace(-1.0, 1.0, 6).reshape(2, 3)
    out = []
    for nn in (flax_nn, linen_nn):
        model = nn.remat(_gated(nn), static_argnums=(2,))()
        variables = model.init(jax.random.key(0), x, train)
        out.append((variables, model.apply(variables, x, train)))
    _assert_same(out[0], out[1])
    flax_vars = out[0][0]
    linen_call = linen_nn.remat(_gated(linen_nn), static_call_argnums=(1,))()
    _assert_same(linen_call.apply(flax_vars, x, train), out[0][1])


def _lifted(nn, transform, cls):
    if transform == 'vmap':
        return nn.vmap(cls, variable_axes={'params': 0}, split_rngs={'params': True})
    if transform == 'jit':
        return nn.jit(cls)
    return nn.remat(cls)


def _leaky_outer(nn, transform, returns):
    class Leaky(nn.Module):
        @nn.compact
        def __call__(self, x):
            dense = nn.Dense(2)
            y = dense(x)
            if returns == 'module':
                return y, dense
            return y, self.variable('params', 'count', jnp.zeros, ())

    class Outer(nn.Module):
        @nn.compact
        def __call__(self, x):
            return _lifted(nn, transform, Leaky)()(x)

    return Outer()


@pytest.mark.parametrize('transform', ['jit', 'vmap', 'remat'])
@pytest.mark.parametrize('returns', ['module', 'variable'])
def test_transformed_method_returning_a_module_or_variable_raises_as_flax(transform, returns):
    from linen.core import errors as linen_errors

    texts = []
    for nn, errors_module in ((flax_nn, flax.errors), (linen_nn, linen_errors)):
        with pytest.raises(errors_module.TransformedMethodReturnValueError) as info:
            _leaky_outer(nn, transform, returns).init(jax.random.key(0), jnp.ones((2, 3)))
        texts.append(str(info.value))
    flax_text = texts[0].split(' (https://')[0]
    assert texts[1].startswith(flax_text)


def _branching(nn, kind):
    class Branches(nn.Module):
        def setup(self):
            self.a = nn.Dense(2)
            self.b = nn.Dense(2)

        def left(self, x):
            return self.a(x)

        def right(self, x):
            return self.b(x)

        def __call__(self, x, which):
            if self.is_initializing():
                self.a(x)
                self.b(x)
            if kind == 'cond-lambda':
                return nn.cond(which, lambda m, x: m.a(x), lambda m, x: m.b(x), self, x)
            if kind == 'cond-method':
                return nn.cond(which, type(self).left, type(self).right, self, x)
            return nn.switch(which, [type(self).left, lambda m, x: m.b(x)], self, x)

    return Branches()


@pytest.mark.parametrize(
    ('kind', 'which'),
    [('cond-lambda', True), ('cond-lambda', False), ('cond-method', False), ('switch', 1)],
)
def test_cond_and_switch_with_module_methods_as_branches(kind, which):
    x = jnp.linspace(-1.0, 1.0, 6).reshape(2, 3)
    out = []
    for nn in (flax_nn, linen_nn):
        model = _branching(nn, kind)
        variables = model.init(jax.random.key(0), x, which)
        out.append((variables, model.apply(variables, x, which)))
    _assert_same(out[0], out[1])


def test_transformed_class_names_match_flax_for_local_classes():
    def classes(nn):
        class Block(nn.Module):
            @nn.compact
            def __call__(self, x):
                return x

        return [
            nn.vmap(Block, variable_axes={}),
            nn.scan(Block),
            nn.remat(Block),
            nn.jit(Block),
            nn.map_variables(Block),
        ]

    ours = [(c.__name__, c.__qualname__) for c in classes(linen_nn)]
    theirs = [(c.__name__, c.__qualname__) for c in classes(flax_nn)]
    assert ours == theirs
