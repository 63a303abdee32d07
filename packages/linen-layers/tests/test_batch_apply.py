"""BatchApply: merging and splitting leading axes."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from linen.layers import BatchApply, Dense
from linen.layers.errors import LayerInputRankError


def test_merges_leading_axes_and_splits_outputs():
    seen = []

    def f(x, y, scale):
        seen.append((x.shape, y.shape, scale))
        return {'sum': x.sum(-1), 'both': (x * scale, y)}

    x = jnp.arange(24.0).reshape(2, 3, 4)
    y = jnp.ones((2, 3))
    out = BatchApply(f)(x, y=y, scale=2.0)
    assert seen == [((6, 4), (6,), 2.0)]
    np.testing.assert_allclose(out['sum'], np.asarray(x).sum(-1))
    np.testing.assert_allclose(out['both'][0], 2 * np.asarray(x))
    assert out['both'][1].shape == (2, 3)


def test_num_dims_three_with_a_layer():
    x = jax.random.normal(jax.random.key(0), (2, 3, 4, 5))
    layer = Dense(2)
    variables = layer.init(jax.random.key(1), x[0, 0])
    out = BatchApply(lambda a: layer.apply(variables, a), num_dims=3)(x)
    np.testing.assert_allclose(out, layer.apply(variables, x), rtol=1e-6, atol=1e-6)


def test_low_rank_arguments_pass_through():
    out = BatchApply(lambda x, bias: x + bias[None])(jnp.zeros((2, 3, 4)), jnp.arange(4.0))
    np.testing.assert_allclose(out[1, 2], np.arange(4.0))


def test_errors():
    with pytest.raises(LayerInputRankError, match=r'>= 2 \(num_dims\)'):
        BatchApply(lambda x: x)(jnp.ones(3))


def test_each_argument_is_merged_on_its_own_and_the_first_splits_the_outputs():
    # As in Flax, leading shapes are not compared: (2, 3) and (3, 2) both merge to 6.
    a = jnp.arange(6.0).reshape(2, 3, 1)
    b = 10.0 * jnp.arange(6.0).reshape(3, 2, 1)
    out = BatchApply(lambda a, b: a + b)(a, b)
    expected = (np.arange(6.0) + 10.0 * np.arange(6.0)).reshape(2, 3, 1)
    np.testing.assert_array_equal(out, expected)
