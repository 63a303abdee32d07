"""Transforms nested in each other, as class wrappers and as method decorators."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import linen.nn as nn
from linen.core import errors


def normal_init(key, shape):
    return jax.random.normal(key, shape) * 0.5


class Cell(nn.Module):
    @nn.compact
    def __call__(self, c, x):
        w = self.param('w', normal_init, (c.shape[-1], c.shape[-1]))
        c = jnp.tanh(c @ w + x)
        return c, c


def loop(w, c, xs):
    ys = []
    for t in range(xs.shape[0]):
        c = jnp.tanh(c @ (w if w.ndim == 2 else w[t]) + xs[t])
        ys.append(c)
    return c, jnp.stack(ys)


XS = jax.random.normal(jax.random.key(1), (4, 2, 3))
C0 = jnp.zeros((2, 3))


def assert_tree_close(a, b, rtol=1e-5):
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(x, y, rtol=rtol, atol=1e-6)


def test_scan_of_remat_class_wrappers():
    model = nn.scan(nn.remat(Cell), variable_broadcast='params', split_rngs={'params': False})()
    variables = model.init(jax.random.key(0), C0, XS)
    w = variables['params']['w']
    assert w.shape == (3, 3)
    assert_tree_close(model.apply(variables, C0, XS), loop(w, C0, XS))
    g = jax.grad(lambda v: jnp.sum(model.apply(v, C0, XS)[1]))(variables)
    g_ref = jax.grad(lambda w: jnp.sum(loop(w, C0, XS)[1]))(w)
    np.testing.assert_allclose(g['params']['w'], g_ref, rtol=1e-4, atol=1e-6)


def test_scan_of_remat_method_decorators():
    class Looped(nn.Module):
        @functools.partial(nn.scan, variable_axes={'params': 0}, split_rngs={'params': True})
        @nn.remat
        @nn.compact
        def __call__(self, c, x):
            return Cell(name='cell')(c, x)

    variables = Looped().init(jax.random.key(0), C0, XS)
    w = variables['params']['cell']['w']
    assert w.shape == (4, 3, 3)
    assert_tree_close(Looped().apply(variables, C0, XS), loop(w, C0, XS))


def test_vmap_of_scan():
    # an ensemble of 3 recurrent cells, each with its own shared-over-time params
    Scanned = nn.scan(Cell, variable_broadcast='params', split_rngs={'params': False})
    model = nn.vmap(
        Scanned,
        variable_axes={'params': 0},
        split_rngs={'params': True},
        in_axes=(None, 0),
        out_axes=0,
    )()
    xs = jax.random.normal(jax.random.key(2), (3, 4, 2, 3))  # (ensemble, time, batch, feat)
    variables = model.init(jax.random.key(0), C0, xs)
    w = variables['params']['w']
    assert w.shape == (3, 3, 3)
    assert not bool(jnp.array_equal(w[0], w[1]))
    c, ys = model.apply(variables, C0, xs)
    for e in range(3):
        c_ref, ys_ref = loop(w[e], C0, xs[e])
        np.testing.assert_allclose(c[e], c_ref, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(ys[e], ys_ref, rtol=1e-5, atol=1e-6)


def test_jit_inside_scan():
    class Looped(nn.Module):
        jit: bool = True

        @nn.compact
        def __call__(self, c, xs):
            scanned = nn.scan(
                nn.jit(Cell) if self.jit else Cell,
                variable_broadcast='params',
                split_rngs={'params': False},
            )
            return scanned(name='cell')(c, xs)

    variables = Looped().init(jax.random.key(0), C0, XS)
    w = variables['params']['cell']['w']
    plain_vars = Looped(jit=False).init(jax.random.key(0), C0, XS)
    # jit does not change the key derivation, even inside a scan
    np.testing.assert_array_equal(w, plain_vars['params']['cell']['w'])
    assert_tree_close(Looped().apply(variables, C0, XS), loop(w, C0, XS))


def test_remat_of_vmap():
    class Dense(nn.Module):
        @nn.compact
        def __call__(self, x):
            w = self.param('w', normal_init, (x.shape[-1], 2))
            return jnp.sin(x @ w)

    model = nn.remat(nn.vmap(Dense, variable_axes={'params': 0}, split_rngs={'params': True}))()
    x = jax.random.normal(jax.random.key(1), (3, 4))
    variables = model.init(jax.random.key(0), x)
    w = variables['params']['w']
    assert w.shape == (3, 4, 2)

    def ref(w):
        return jnp.stack([jnp.sin(x[i] @ w[i]) for i in range(3)])

    np.testing.assert_allclose(model.apply(variables, x), ref(w), rtol=1e-5)
    g = jax.grad(lambda v: jnp.sum(model.apply(v, x) ** 2))(variables)
    g_ref = jax.grad(lambda w: jnp.sum(ref(w) ** 2))(w)
    np.testing.assert_allclose(g['params']['w'], g_ref, rtol=1e-4, atol=1e-6)


def test_vmap_of_vmap_two_level_heads_and_batch():
    class Head(nn.Module):
        @nn.compact
        def __call__(self, x):
            w = self.param('w', normal_init, (x.shape[-1], 2))
            return x @ w

    heads = nn.vmap(
        Head,
        in_axes=None,
        out_axes=0,
        axis_size=3,
        variable_axes={'params': 0},
        split_rngs={'params': True},
    )
    batched = nn.vmap(
        heads, in_axes=0, out_axes=0, variable_axes={'params': None}, split_rngs={'params': False}
    )
    x = jax.random.normal(jax.random.key(1), (5, 4))
    variables = batched().init(jax.random.key(0), x)
    w = variables['params']['w']
    assert w.shape == (3, 4, 2)  # per head, shared over the batch
    y = batched().apply(variables, x)
    assert y.shape == (5, 3, 2)
    np.testing.assert_allclose(y, jnp.einsum('bi,hio->bho', x, w), rtol=1e-5)


@pytest.mark.parametrize('transform', ['jit', 'remat', 'vmap'])
def test_a_method_lifted_from_a_compact_method_sees_the_names_given_so_far(transform):
    T = {
        'jit': nn.jit,
        'remat': nn.remat,
        'vmap': lambda f: nn.vmap(f, variable_axes={'params': None}, split_rngs={'params': False}),
    }[transform]

    class Auto(nn.Module):
        @T
        def helper(self, x):
            return nn.Dense(2)(x)

        @nn.compact
        def __call__(self, x):
            return nn.Dense(2)(x) + self.helper(x)

    x = jnp.ones((3, 2))
    variables = Auto().init(jax.random.key(0), x)
    assert sorted(variables['params']) == ['Dense_0', 'Dense_1']  # not one shared Dense_0

    class Clash(nn.Module):
        @T
        def helper(self, x, m):
            nn.Dense(2, name='a')
            return m(x)

        @nn.compact
        def __call__(self, x):
            return self.helper(x, nn.Dense(2, name='a'))

    with pytest.raises(errors.NameInUseError, match='"a"'):
        Clash().init(jax.random.key(0), x)
