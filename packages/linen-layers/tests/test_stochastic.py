"""Dropout: masks from the documented PRNG rule, rate edge cases, broadcast dims, errors."""

from __future__ import annotations

import hashlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from linen.core.errors import LinenError
from linen.layers import Dropout
from linen.layers.errors import DropoutBroadcastDimsError, LayerInputRankError

ROOT = jax.random.key(3)
X = jax.random.normal(jax.random.key(1), (4, 6)) + 3.0  # no exact zeros


def first_dropout_key(root):
    """The key of the first make_rng('dropout') in the root scope (the rule in docs/design.md)."""
    digest = hashlib.sha1((1).to_bytes(1, 'big')).digest()
    return jax.random.fold_in(root, int.from_bytes(digest[:4], 'big'))


def test_mask_and_scaling_follow_the_prng_rule():
    y = Dropout(0.3).apply({}, X, deterministic=False, rngs={'dropout': ROOT})
    keep = jax.random.bernoulli(first_dropout_key(ROOT), 0.7, X.shape)
    expected = np.where(np.asarray(keep), np.asarray(X) / 0.7, 0.0)
    np.testing.assert_allclose(y, expected, rtol=1e-6)


def test_explicit_rng_argument_is_used_as_is():
    key = jax.random.key(11)
    y = Dropout(0.5).apply({}, X, deterministic=False, rng=key)
    keep = jax.random.bernoulli(key, 0.5, X.shape)
    np.testing.assert_allclose(y, np.where(np.asarray(keep), np.asarray(X) * 2, 0.0), rtol=1e-6)


def test_custom_rng_collection():
    y = Dropout(0.5, rng_collection='noise', deterministic=False).apply({}, X, rngs={'noise': ROOT})
    keep = jax.random.bernoulli(first_dropout_key(ROOT), 0.5, X.shape)
    np.testing.assert_array_equal(np.asarray(y) != 0, np.asarray(keep))


def test_deterministic_and_rate_zero_return_inputs_without_rng():
    assert Dropout(0.5).apply({}, X, deterministic=True) is X
    assert Dropout(0.0, deterministic=False).apply({}, X) is X


def test_rate_one_gives_zeros_without_rng():
    y = Dropout(1.0, deterministic=False).apply({}, X)
    np.testing.assert_array_equal(y, np.zeros(X.shape))


def test_broadcast_dims_share_the_mask():
    y = Dropout(0.5, broadcast_dims=(0,), deterministic=False).apply({}, X, rngs={'dropout': ROOT})
    dropped = np.asarray(y) == 0
    assert (dropped == dropped[:1]).all()
    keep = jax.random.bernoulli(first_dropout_key(ROOT), 0.5, (1, 6))
    np.testing.assert_array_equal(~dropped[0], np.asarray(keep)[0])


def test_dtype_is_kept():
    x = X.astype(jnp.bfloat16)
    assert Dropout(0.5).apply({}, x, deterministic=False, rng=ROOT).dtype == jnp.bfloat16


def test_deterministic_in_both_places_is_an_error():
    # merge_param raises a LinenError (also a ValueError, as Flax's) with Flax's text.
    with pytest.raises(
        LinenError, match='"deterministic" was passed to the constructor and at call time'
    ):
        Dropout(0.5, deterministic=True).apply({}, X, deterministic=True)


def test_errors():
    with pytest.raises(LayerInputRankError, match=r'broadcast_dims=\(2,\)'):
        Dropout(0.5, broadcast_dims=(2,)).apply({}, X, deterministic=False, rng=ROOT)
    # Flax indexes the input's shape with the dim: an IndexError there.
    with pytest.raises(IndexError):
        Dropout(0.5, broadcast_dims=(-3,)).apply({}, X, deterministic=False, rng=ROOT)
    assert issubclass(DropoutBroadcastDimsError, LayerInputRankError)


def test_any_rate_runs_as_in_flax():
    # Flax checks no rate: keep_prob = 1 - rate, and a rate outside [0, 1] runs there.
    assert jnp.array_equal(Dropout(1.5).apply({}, X, deterministic=False, rng=ROOT), 0 * X)
    assert Dropout(-0.5).apply({}, X, deterministic=True) is X
