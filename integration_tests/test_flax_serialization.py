"""Checkpoints move between flax.serialization and linen.core.serialization unchanged."""

import numpy as np
import pytest

flax_serialization = pytest.importorskip('flax.serialization')
flax_core = pytest.importorskip('flax.core')

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from integration_tests.oracle import assert_same_bits  # noqa: E402
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


def test_identical_bytes():
    assert serialization.to_bytes(_tree()) == flax_serialization.to_bytes(_tree())


def test_flax_checkpoint_loads_here():
    data = flax_serialization.to_bytes(_tree())
    assert_same_bits(serialization.from_bytes(_tree(), data), _tree())
    assert_same_bits(serialization.msgpack_restore(data), flax_serialization.msgpack_restore(data))


def test_our_checkpoint_loads_in_flax():
    data = serialization.to_bytes(_tree())
    assert_same_bits(flax_serialization.from_bytes(_tree(), data), _tree())


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
    assert_same_bits(serialization.msgpack_restore(theirs), tree)
    assert_same_bits(flax_serialization.msgpack_restore(ours), tree)


def test_flax_raw_prng_key_restores_into_typed_key_target():
    data = flax_serialization.to_bytes({'rng': jax.random.PRNGKey(3)})
    out = serialization.from_bytes({'rng': jax.random.key(0)}, data)
    assert jax.dtypes.issubdtype(out['rng'].dtype, jax.dtypes.prng_key)
    assert np.array_equal(jax.random.key_data(out['rng']), jax.random.PRNGKey(3))


# What a checkpoint holds where the target has an array of another shape, or no array:
# Flax's readers return it as stored (they check keys, not shapes; google/flax#2436),
# and a program may rely on it (a target built with placeholder shapes).
MISMATCHES = {
    'other_shape': ({'w': jnp.zeros((3, 4))}, {'w': np.arange(6, dtype=np.float32).reshape(2, 3)}),
    'scalar_placeholder': ({'w': jnp.zeros(())}, {'w': np.ones((2, 2), np.int8)}),
    'dict_for_array': ({'w': jnp.zeros(2)}, {'w': {'a': np.ones(2, np.float32), 'b': 1}}),
    'string_for_array': ({'w': jnp.zeros(2)}, {'w': 'not an array'}),
}


@pytest.mark.parametrize('case', list(MISMATCHES))
def test_a_mismatched_leaf_restores_as_stored_as_in_flax(case):
    target, stored = MISMATCHES[case]
    data = flax_serialization.to_bytes(stored)
    theirs = flax_serialization.from_bytes(target, data)
    assert_same_bits(serialization.from_bytes(target, data), theirs)
    state = flax_serialization.msgpack_restore(data)
    assert_same_bits(
        serialization.from_state_dict(target, state),
        flax_serialization.from_state_dict(target, state),
    )
    assert_same_bits(theirs, stored)  # the oracle's own reading: what was stored


@pytest.mark.parametrize('case', list(MISMATCHES))
def test_strict_restore_refuses_a_mismatched_leaf_naming_it(case):
    from linen.core.config import config
    from linen.core.errors import InvalidCheckpointError

    target, stored = MISMATCHES[case]
    data = serialization.to_bytes(stored)
    config.update('linen_strict_restore', True)
    try:
        with pytest.raises(InvalidCheckpointError, match=r'path \./w'):
            serialization.from_bytes(target, data)
    finally:
        config.update('linen_strict_restore', False)
