"""Trace reuse against Flax: a model of repeated blocks traced with reuse on gives Flax's
variables (same key), outputs, intermediates, batch statistics and gradients, bit for bit.

The model source is shared: one factory, called with ``flax.linen`` and ``linen.nn``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip('flax')
pytestmark = pytest.mark.flax

import flax.linen as flax_nn  # noqa: E402

import linen.nn as linen_nn  # noqa: E402
from linen.transforms import linen_reuse_traces  # noqa: E402

RUNS: list[str] = []


def model(nn, blocks: int = 12):
    class Block(nn.Module):
        width: int
        heads: int

        @nn.compact
        def __call__(self, x, train: bool):
            RUNS.append(type(self).__module__)
            h = nn.LayerNorm()(x)
            h = nn.MultiHeadDotProductAttention(num_heads=self.heads)(h, deterministic=not train)
            x = x + nn.Dropout(0.1)(h, deterministic=not train)
            h = nn.BatchNorm(use_running_average=not train)(x)
            h = nn.gelu(nn.Dense(2 * self.width)(h))
            self.sow('intermediates', 'mlp', h)
            return x + nn.Dense(self.width)(h)

    class Encoder(nn.Module):
        @nn.compact
        def __call__(self, x, train: bool = False):
            for _ in range(blocks):
                x = Block(16, 2)(x, train)
            return nn.LayerNorm()(x)

    return Encoder()


X = jax.random.normal(jax.random.key(3), (2, 5, 16))


def _equal(a, b):
    flat_a, tree_a = jax.tree_util.tree_flatten(jax.tree_util.tree_map(np.asarray, a))
    flat_b, tree_b = jax.tree_util.tree_flatten(jax.tree_util.tree_map(np.asarray, b))
    assert tree_a == tree_b
    for u, v in zip(flat_a, flat_b):
        np.testing.assert_array_equal(u, v)


@pytest.fixture(autouse=True)
def _runs():
    RUNS.clear()
    yield
    RUNS.clear()


def _train_step(m):
    def loss(variables, x):
        y, state = m.apply(
            variables,
            x,
            True,
            rngs={'dropout': jax.random.key(5)},
            mutable=['batch_stats', 'intermediates'],
        )
        return jnp.mean(y * y), state

    return jax.jit(jax.value_and_grad(loss, has_aux=True))


def test_reused_blocks_give_flax_variables_outputs_and_gradients():
    flax_model, linen_model = model(flax_nn, 6), model(linen_nn, 6)
    key = jax.random.key(0)
    ref_vars = jax.jit(lambda k, x: flax_model.init(k, x))(key, X)
    with linen_reuse_traces():
        got_vars = jax.jit(lambda k, x: linen_model.init(k, x))(key, X)
    _equal(got_vars, ref_vars)

    ref_y = jax.jit(lambda v, x: flax_model.apply(v, x))(ref_vars, X)
    flax_step = _train_step(flax_model)(ref_vars, X)
    ordinary_step = _train_step(linen_model)(got_vars, X)
    RUNS.clear()
    with linen_reuse_traces():
        got_y = jax.jit(lambda v, x: linen_model.apply(v, x))(got_vars, X)
        assert len(RUNS) == 1  # six blocks, one trace of the block's Python
        got_step = _train_step(linen_model)(got_vars, X)
    np.testing.assert_array_equal(got_y, ref_y)
    # loss, batch statistics, intermediates (sow) and gradients: those of ordinary
    # tracing bit for bit, and Flax's (whose backward pass of this block rounds a few
    # gradient entries one float32 step apart from linen's, with or without reuse)
    _equal(got_step, ordinary_step)
    _equal(got_step[0], flax_step[0])
    for a, b in zip(
        jax.tree_util.tree_leaves(got_step[1]), jax.tree_util.tree_leaves(flax_step[1])
    ):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-12)
