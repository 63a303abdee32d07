"""pool / avg_pool / max_pool / min_pool against numpy window loops."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from linen.layers import avg_pool, max_pool, min_pool, pool
from linen.layers.errors import LayerArgumentError, LayerInputRankError, LayerPaddingError

X = jax.random.normal(jax.random.key(0), (2, 6, 7, 3))


def np_pool(x, reduce, fill, window, strides, pads):
    """Reduces windows of the two spatial axes of a (B, H, W, C) array."""
    x = np.pad(np.asarray(x, np.float64), [(0, 0), *pads, (0, 0)], constant_values=fill)
    out_h = (x.shape[1] - window[0]) // strides[0] + 1
    out_w = (x.shape[2] - window[1]) // strides[1] + 1
    y = np.zeros((x.shape[0], out_h, out_w, x.shape[3]))
    for i, j in itertools.product(range(out_h), range(out_w)):
        win = x[
            :,
            i * strides[0] : i * strides[0] + window[0],
            j * strides[1] : j * strides[1] + window[1],
        ]
        y[:, i, j] = reduce(win, axis=(1, 2))
    return y


@pytest.mark.parametrize(
    'window,strides,padding,pads',
    [
        ((2, 2), None, 'VALID', [(0, 0), (0, 0)]),
        ((3, 2), (2, 1), ((1, 1), (0, 1)), [(1, 1), (0, 1)]),
        # SAME: total pad (out - 1) * stride + window - size, the odd one on the right.
        ((3, 3), (2, 2), 'SAME', [(0, 1), (1, 1)]),
    ],
)
def test_max_and_min_pool(window, strides, padding, pads):
    s = strides or (1, 1)
    np.testing.assert_allclose(
        max_pool(X, window, strides, padding),
        np_pool(X, np.max, -np.inf, window, s, pads),
        rtol=1e-6,
    )
    np.testing.assert_allclose(
        min_pool(X, window, strides, padding),
        np_pool(X, np.min, np.inf, window, s, pads),
        rtol=1e-6,
    )


def test_avg_pool_counting_padding_or_not():
    window, pads = (3, 3), [(1, 1), (1, 1)]
    sums = np_pool(X, np.sum, 0.0, window, (1, 1), pads)
    counts = np_pool(np.ones((1, 6, 7, 1)), np.sum, 0.0, window, (1, 1), pads)
    np.testing.assert_allclose(avg_pool(X, window, padding='SAME'), sums / 9, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        avg_pool(X, window, padding='SAME', count_include_pad=False),
        sums / counts,
        rtol=1e-5,
        atol=1e-6,
    )


@pytest.mark.parametrize('fn', [max_pool, min_pool])
@pytest.mark.parametrize('padding', ['SAME', ((1, 0), (0, 1))])
def test_unbatched_and_many_batch_axes(fn, padding):
    batched = fn(X, (2, 2), (1, 2), padding)
    np.testing.assert_allclose(fn(X[1], (2, 2), (1, 2), padding), batched[1], rtol=1e-6)
    stacked = fn(jnp.stack([X, -X]), (2, 2), (1, 2), padding)
    np.testing.assert_allclose(stacked[0], batched, rtol=1e-6)


def test_avg_pool_unbatched_without_pad_counting():
    batched = avg_pool(X, (2, 3), padding='SAME', count_include_pad=False)
    single = avg_pool(X[0], (2, 3), padding='SAME', count_include_pad=False)
    assert single.shape == batched.shape[1:]
    np.testing.assert_allclose(single, batched[0], rtol=1e-6)


def test_pool_generic_reduction():
    x = jnp.arange(1.0, 7.0).reshape(1, 6, 1)
    y = pool(x, 1.0, lax.mul, (2,), (2,), 'VALID')
    np.testing.assert_allclose(y[0, :, 0], [2.0, 12.0, 30.0])


def test_pool_1d_window_on_bf16_keeps_dtype():
    x = X.astype(jnp.bfloat16)
    assert max_pool(x, (2, 2)).dtype == jnp.bfloat16
    assert avg_pool(x, (2, 2)).dtype == jnp.bfloat16


def test_errors():
    with pytest.raises(LayerInputRankError, match=r'pool expected an input of rank >= 3'):
        max_pool(jnp.ones((4, 4)), (2, 2))
    with pytest.raises(LayerPaddingError, match='pooling takes'):
        max_pool(X, (2, 2), padding='CIRCULAR')
    with pytest.raises(LayerPaddingError, match='expected 2 \\(low, high\\) pairs'):
        avg_pool(X, (2, 2), padding=((1, 1),))
    with pytest.raises(LayerArgumentError, match=r'strides=\(1,\) has 1 entries'):
        min_pool(X, (2, 2), strides=(1,))
