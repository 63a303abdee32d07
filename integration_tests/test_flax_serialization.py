"""Checkpoints move between flax.serialization and linen.core.serialization unchanged."""

import numpy as np
import pytest

flax_serialization = pytest.importorskip('flax.serialization')
flax_core = pytest.importorskip('flax.core')

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from linen.core import serialization  # noqa: E402
from linen.core.frozen_dict import FrozenDict  # noqa: E402

pytestmark = pytest.mark.flax


def _tree():
    rng = np.random.default_rng(0)
    return {
        'params': {
            'Dense_0': {
                'kernel': jnp.asarray(rng.normal(size=(3, 4)), jnp.float32),
                'bias': jnp.asarray(rng.normal(size=(4,)), jnp.bfloat16),
            },
            'quant': {'q': jnp.asarray(rng.integers(-5, 5, size=(2, 2)), jnp.int8)},
            'spectral': np.asarray(rng.normal(size=3) + 1j * rng.normal(size=3), np.complex64),
        },
        'step': np.int32(7),
        'scale': 0.5,
        'phase': 1 + 2j,
        'history': [1, 2, 3],
        'nothing': None,
    }


def _assert_same_leaves(a, b):
    la, ta = jax.tree_util.tree_flatten(a)
    lb, tb = jax.tree_util.tree_flatten(b)
    assert ta == tb
    for x, y in zip(la, lb):
        assert np.asarray(x).dtype == np.asarray(y).dtype
        assert np.asarray(x).tobytes() == np.asarray(y).tobytes()


def test_identical_bytes():
    assert serialization.to_bytes(_tree()) == flax_serialization.to_bytes(_tree())


def test_flax_checkpoint_loads_here():
    data = flax_serialization.to_bytes(_tree())
    _assert_same_leaves(serialization.from_bytes(_tree(), data), _tree())
    _assert_same_leaves(
        serialization.msgpack_restore(data), flax_serialization.msgpack_restore(data)
    )


def test_our_checkpoint_loads_in_flax():
    data = serialization.to_bytes(_tree())
    _assert_same_leaves(flax_serialization.from_bytes(_tree(), data), _tree())


def test_frozen_dicts_give_identical_bytes():
    ours = FrozenDict({'b': jnp.ones(2), 'a': {'c': 1}})
    theirs = flax_core.FrozenDict({'b': jnp.ones(2), 'a': {'c': 1}})
    assert serialization.to_bytes(ours) == flax_serialization.to_bytes(theirs)


def test_chunked_arrays_are_compatible(monkeypatch):
    monkeypatch.setattr(flax_serialization, 'MAX_CHUNK_SIZE', 16)
    monkeypatch.setattr(serialization, 'MAX_CHUNK_SIZE', 16)
    tree = {'w': np.arange(30, dtype=np.float32).reshape(5, 6), 'b': np.ones(2, np.float32)}
    ours, theirs = serialization.to_bytes(tree), flax_serialization.to_bytes(tree)
    assert ours == theirs
    _assert_same_leaves(serialization.msgpack_restore(theirs), tree)
    _assert_same_leaves(flax_serialization.msgpack_restore(ours), tree)


def test_flax_raw_prng_key_restores_into_typed_key_target():
    data = flax_serialization.to_bytes({'rng': jax.random.PRNGKey(3)})
    out = serialization.from_bytes({'rng': jax.random.key(0)}, data)
    assert jax.dtypes.issubdtype(out['rng'].dtype, jax.dtypes.prng_key)
    assert np.array_equal(jax.random.key_data(out['rng']), jax.random.PRNGKey(3))
