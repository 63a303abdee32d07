"""Modules under plain JAX transforms: jit, grad, vmap, eval_shape, scan of apply."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import linen.nn as nn


def normal_init(key, shape):
    return jax.random.normal(key, shape)


class MLP(nn.Module):
    hidden: int
    out: int

    @nn.compact
    def __call__(self, x):
        w1 = self.param('w1', normal_init, (x.shape[-1], self.hidden))
        w2 = self.param('w2', normal_init, (self.hidden, self.out))
        return jnp.tanh(x @ w1) @ w2


class BatchCount(nn.Module):
    @nn.compact
    def __call__(self, x):
        n = self.variable('stats', 'n', lambda: jnp.zeros((), jnp.int32))
        if self.is_mutable_collection('stats'):
            n.value += x.shape[0]
        return x.sum()


def reference(params, x):
    return jnp.tanh(x @ params['w1']) @ params['w2']


X = jnp.linspace(-1.0, 1.0, 12).reshape(4, 3)
# float32 results of differently ordered sums: a few ulp relative, plus an absolute
# floor for elements near zero (where one ulp is a large relative error).
F32 = dict(rtol=1e-5, atol=1e-6)


def test_jit_apply_and_init():
    model = MLP(5, 2)
    v = jax.jit(model.init)(jax.random.key(0), X)
    v_eager = model.init(jax.random.key(0), X)
    np.testing.assert_allclose(v['params']['w1'], v_eager['params']['w1'], rtol=1e-6)
    y = jax.jit(model.apply)(v, X)
    np.testing.assert_allclose(y, reference(v['params'], X), **F32)


def test_grad_matches_hand_derivation():
    model = MLP(5, 2)
    v = model.init(jax.random.key(0), X)
    g = jax.grad(lambda p: model.apply({'params': p}, X).sum())(v['params'])
    h = jnp.tanh(X @ v['params']['w1'])
    # d sum(h @ w2) / d w2 = h^T @ ones
    np.testing.assert_allclose(g['w2'], h.T @ jnp.ones((4, 2)), **F32)
    # d / d w1 = X^T @ ((ones @ w2^T) * (1 - h^2))
    dh = jnp.ones((4, 2)) @ v['params']['w2'].T
    np.testing.assert_allclose(g['w1'], X.T @ (dh * (1 - h**2)), **F32)


def test_vmap_over_inputs_and_over_params():
    model = MLP(5, 2)
    v = model.init(jax.random.key(0), X)
    per_row = jax.vmap(lambda x: model.apply(v, x))(X)
    np.testing.assert_allclose(per_row, reference(v['params'], X), **F32)
    keys = jax.random.split(jax.random.key(1), 3)
    ensemble = jax.vmap(lambda k: model.init(k, X))(keys)
    ys = jax.vmap(lambda v: model.apply(v, X))(ensemble)
    for i in range(3):
        p = jax.tree_util.tree_map(lambda a, i=i: a[i], ensemble['params'])
        np.testing.assert_allclose(ys[i], reference(p, X), **F32)


def test_jit_with_mutable_state():
    model = BatchCount()
    v = model.init(jax.random.key(0), X)
    step = jax.jit(lambda v, x: model.apply(v, x, mutable=['stats']))
    _, upd = step(v, X)
    _, upd = step(upd, X)
    assert int(upd['stats']['n']) == 12  # 4 at init, then 4 per step


def test_eval_shape_and_scan_of_apply():
    model = MLP(5, 2)
    shapes = jax.eval_shape(model.init, jax.random.key(0), X)
    assert shapes['params']['w1'].shape == (3, 5)
    v = model.init(jax.random.key(0), X)

    def body(carry, x):
        return carry + model.apply(v, x).sum(), None

    total, _ = jax.lax.scan(body, 0.0, X[:, None, :])
    np.testing.assert_allclose(total, reference(v['params'], X).sum(), **F32)
