import collections

import jax
import jax.numpy as jnp
import ml_dtypes
import msgpack
import numpy as np
import pytest

from linen.core import serialization
from linen.core.config import config
from linen.core.errors import InvalidCheckpointError
from linen.core.frozen_dict import FrozenDict

_STANDARD = [
    'bool', 'int8', 'int16', 'int32', 'int64', 'uint8', 'uint16', 'uint32', 'uint64',
    'float16', 'float32', 'float64', 'complex64', 'complex128',
]  # fmt: skip
_ML = [
    'bfloat16', 'float8_e4m3fn', 'float8_e5m2', 'float8_e4m3fnuz', 'float8_e5m2fnuz',
    'float8_e4m3b11fnuz', 'float8_e3m4', 'float8_e4m3', 'float8_e8m0fnu', 'float4_e2m1fn',
    'int4', 'uint4', 'int2', 'uint2',
]  # fmt: skip
DTYPES = _STANDARD + [n for n in _ML if hasattr(ml_dtypes, n)]


def _dtype(name):
    return np.dtype(getattr(ml_dtypes, name)) if name in _ML else np.dtype(name)


def _sample(name, shape=(2, 3)):
    dtype = _dtype(name)
    rng = np.random.default_rng(0)
    if dtype.kind == 'c':
        return (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.kind in 'iu' or name in ('int4', 'uint4', 'int2', 'uint2'):
        return rng.integers(0, 2, size=shape).astype(dtype)
    return rng.normal(size=shape).astype(dtype)


def _same(a, b):
    return np.asarray(a).dtype == np.asarray(b).dtype and (
        np.asarray(a).shape == np.asarray(b).shape
        and np.asarray(a).tobytes() == np.asarray(b).tobytes()
    )


@pytest.mark.parametrize('name', DTYPES)
def test_numpy_array_round_trip_is_exact(name):
    arr = _sample(name)
    tree = {'a': arr, 'scalar': arr.reshape(-1)[0]}
    out = serialization.msgpack_restore(serialization.msgpack_serialize(tree))
    assert _same(out['a'], arr)
    assert isinstance(out['scalar'], np.generic)
    assert _same(out['scalar'], arr.reshape(-1)[0])


@pytest.mark.parametrize(
    'name', [n for n in DTYPES if n not in ('int64', 'uint64', 'float64', 'complex128')]
)
def test_jax_array_round_trip_is_exact(name):
    arr = jnp.asarray(_sample(name))
    target = {'w': jnp.zeros_like(arr)}
    out = serialization.from_bytes(target, serialization.to_bytes({'w': arr}))
    assert _same(out['w'], np.asarray(arr))


def test_special_float_values_survive():
    arr = np.array([np.nan, np.inf, -np.inf, -0.0], np.float32)
    out = serialization.msgpack_restore(serialization.msgpack_serialize({'a': arr}))
    assert out['a'].tobytes() == arr.tobytes()


@pytest.mark.parametrize('make', [jax.random.key, jax.random.PRNGKey])
def test_prng_keys_round_trip(make):
    tree = {'one': make(3), 'many': jax.random.split(make(1), 4)}
    out = serialization.from_bytes(tree, serialization.to_bytes(tree))
    for k in tree:
        if jnp.issubdtype(tree[k].dtype, jax.dtypes.prng_key):
            assert jnp.issubdtype(out[k].dtype, jax.dtypes.prng_key)
            assert jax.random.key_impl(out[k]) == jax.random.key_impl(tree[k])
            assert _same(jax.random.key_data(out[k]), jax.random.key_data(tree[k]))
        else:
            assert _same(out[k], tree[k])
    # A restored typed key draws the same numbers.
    assert _same(jax.random.normal(out['one'], (3,)), jax.random.normal(tree['one'], (3,)))


def test_typed_key_uses_documented_record():
    key = jax.random.key(7)
    raw = serialization.msgpack_restore(serialization.msgpack_serialize({'k': key}))
    assert jnp.issubdtype(raw['k'].dtype, jax.dtypes.prng_key)
    unpacked = msgpack.unpackb(serialization.to_bytes({'k': key}))['k']
    assert unpacked['__linen_prng_key__'] is True and unpacked['impl'] == 'threefry2x32'


def test_raw_uint32_key_restores_into_typed_target():
    data = jax.random.key_data(jax.random.key(5))
    out = serialization.from_bytes({'k': jax.random.key(0)}, serialization.to_bytes({'k': data}))
    assert jnp.issubdtype(out['k'].dtype, jax.dtypes.prng_key)
    assert _same(jax.random.key_data(out['k']), data)


def _ext_array(arr, code=1):
    payload = msgpack.packb([list(arr.shape), arr.dtype.name, arr.tobytes()], use_bin_type=True)
    return msgpack.ExtType(code, payload)


def test_bytes_match_independently_built_msgpack():
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([1, 2], dtype=ml_dtypes.bfloat16)
    tree = {
        'params': {'w': w, 'b': jnp.asarray(b)},
        'step': np.int32(4),
        'c': 1 + 2j,
        'n': None,
        'items': [1, 2.5, 'x'],
        'flag': True,
    }
    expected = msgpack.packb(
        {
            'params': {'w': _ext_array(w), 'b': _ext_array(b)},
            'step': _ext_array(np.asarray(np.int32(4)), code=3),
            'c': msgpack.ExtType(2, msgpack.packb([1.0, 2.0])),
            'n': None,
            'items': {'0': 1, '1': 2.5, '2': 'x'},
            'flag': True,
        },
        use_bin_type=True,
    )
    assert serialization.to_bytes(tree) == expected


def test_float64_scalar_uses_ext_not_native_double():
    expected = msgpack.packb({'a': _ext_array(np.asarray(np.float64(1.5)), code=3)})
    assert serialization.msgpack_serialize({'a': np.float64(1.5)}) == expected


def test_large_arrays_are_chunked(monkeypatch):
    monkeypatch.setattr(serialization, 'MAX_CHUNK_SIZE', 8)
    arr = np.arange(5, dtype=np.float32)
    small = np.arange(2, dtype=np.float32)
    expected = msgpack.packb(
        {
            'a': {
                '__msgpack_chunked_array__': True,
                'shape': {'0': 5},
                'chunks': {
                    '0': _ext_array(arr[:2]),
                    '1': _ext_array(arr[2:4]),
                    '2': _ext_array(arr[4:]),
                },
            },
            'b': _ext_array(small),
        }
    )
    data = serialization.msgpack_serialize({'a': arr, 'b': small})
    assert data == expected
    out = serialization.msgpack_restore(data)
    assert _same(out['a'], arr) and _same(out['b'], small)
    grid = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert _same(serialization.msgpack_restore(serialization.msgpack_serialize(grid)), grid)


def test_containers_round_trip():
    NT = collections.namedtuple('NT', 'x y')
    target = {
        'f': FrozenDict({'b': jnp.zeros(2), 'a': 0}),
        'l': [jnp.zeros(1), (1, 2)],
        'nt': NT(0, 0),
        'none': None,
        1: 'int key',
    }
    src = {
        'f': FrozenDict({'b': jnp.ones(2), 'a': 5}),
        'l': [jnp.full(1, 3.0), (7, 8)],
        'nt': NT(1, 2),
        'none': None,
        1: 'restored',
    }
    out = serialization.from_bytes(target, serialization.to_bytes(src))
    assert isinstance(out['f'], FrozenDict) and out['f']['a'] == 5
    assert out['f']['b'].tolist() == [1.0, 1.0]
    assert out['l'][0].tolist() == [3.0] and out['l'][1] == (7, 8)
    assert out['nt'] == NT(1, 2) and out['none'] is None and out[1] == 'restored'
    assert serialization.to_state_dict([1, [2]]) == {'0': 1, '1': {'0': 2}}
    assert serialization.to_state_dict(None) is None


def test_frozen_dict_state_dict_keeps_insertion_order():
    data = serialization.to_bytes(FrozenDict({'b': 1, 'a': 2}))
    assert data == msgpack.packb({'b': 1, 'a': 2})


def test_missing_key_names_path():
    target = {'a': {'q': 1, 'b': 2}}
    with pytest.raises(InvalidCheckpointError, match=r"keys \{'b'\} .* at path \./a"):
        serialization.from_state_dict(target, {'a': {'q': 3}})


@pytest.fixture
def strict_restore():
    config.update('linen_strict_restore', True)
    yield
    config.update('linen_strict_restore', False)


def test_shape_mismatch_is_returned_as_stored_like_flax():
    # google/flax#2436: Flax's from_bytes does not check shapes.
    target = {'layer': {'kernel': jnp.zeros((3, 4))}}
    data = serialization.to_bytes({'layer': {'kernel': np.zeros((4, 3), np.float32)}})
    assert serialization.from_bytes(target, data)['layer']['kernel'].shape == (4, 3)
    assert serialization.from_state_dict({'w': jnp.zeros(2)}, {'w': {'x': 1}}) == {'w': {'x': 1}}


def test_shape_mismatch_names_path(strict_restore):
    target = {'layer': {'kernel': jnp.zeros((3, 4))}}
    data = serialization.to_bytes({'layer': {'kernel': np.zeros((4, 3), np.float32)}})
    with pytest.raises(InvalidCheckpointError, match=r'path \./layer/kernel.*\(3, 4\).*\(4, 3\)'):
        serialization.from_bytes(target, data)


def test_list_length_mismatch_and_structure_mismatch(strict_restore):
    with pytest.raises(InvalidCheckpointError, match='size of the list .* got 2 and 1'):
        serialization.from_state_dict([1, 2], {'0': 1})
    with pytest.raises(
        InvalidCheckpointError, match=r'Expected an array of shape \(2,\) at path \./w'
    ):
        serialization.from_state_dict({'w': jnp.zeros(2)}, {'w': {'x': 1}})
    with pytest.raises(InvalidCheckpointError, match='Expected a dict to restore a dict'):
        serialization.from_state_dict({'a': 1}, [1])


def test_extra_keys_are_ignored_like_flax():
    assert serialization.from_state_dict({'a': 1}, {'a': 2, 'z': 3}) == {'a': 2}


@pytest.mark.parametrize('cut', [1, 5, 20, -1])
def test_truncated_bytes_raise(cut):
    data = serialization.to_bytes({'w': np.arange(10, dtype=np.float32), 'b': np.ones(3)})
    with pytest.raises(InvalidCheckpointError, match='truncated or corrupt'):
        serialization.msgpack_restore(data[:cut])


def test_corrupt_bytes_raise():
    with pytest.raises(InvalidCheckpointError, match='Could not decode 2 bytes'):
        serialization.msgpack_restore(b'\xc1\x00')
    with pytest.raises(InvalidCheckpointError, match='Could not decode'):
        serialization.msgpack_restore(serialization.to_bytes({'a': 1}) + b'\x00')


def test_corrupt_array_record_names_path():
    bad = msgpack.packb(
        {'p': {'w': msgpack.ExtType(1, msgpack.packb([[3], 'float32', b'\x00' * 8]))}}
    )
    with pytest.raises(InvalidCheckpointError, match=r'path \./p/w: shape \(3,\).*12 bytes.*8'):
        serialization.msgpack_restore(bad)
    unknown_dtype = msgpack.packb({'w': msgpack.ExtType(1, msgpack.packb([[1], 'float99', b'x']))})
    with pytest.raises(InvalidCheckpointError, match=r'Unknown dtype "float99" at path \./w'):
        serialization.msgpack_restore(unknown_dtype)
    unknown_ext = msgpack.packb({'w': msgpack.ExtType(42, b'')})
    with pytest.raises(InvalidCheckpointError, match=r'extension type 42 at path \./w'):
        serialization.msgpack_restore(unknown_ext)
    not_a_record = msgpack.packb({'w': msgpack.ExtType(1, b'\x01')})
    with pytest.raises(InvalidCheckpointError, match=r'Corrupt array record at path \./w'):
        serialization.msgpack_restore(not_a_record)
    bad_chunks = msgpack.packb({'w': {'__msgpack_chunked_array__': True, 'shape': {'0': 3}}})
    with pytest.raises(InvalidCheckpointError, match=r'Corrupt chunked array at path \./w'):
        serialization.msgpack_restore(bad_chunks)


def test_non_bytes_input_is_a_type_error():
    with pytest.raises(TypeError, match='binary mode'):
        serialization.msgpack_restore('not bytes')


def test_register_serialization_state_custom_type():
    class Box:
        def __init__(self, v):
            self.v = v

    serialization.register_serialization_state(
        Box,
        lambda b: {'v': serialization.to_state_dict(b.v)},
        lambda b, s: Box(serialization.from_state_dict(b.v, s['v'], name='v')),
    )
    out = serialization.from_bytes(Box(jnp.zeros(2)), serialization.to_bytes(Box(jnp.ones(2))))
    assert out.v.tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match='already registered'):
        serialization.register_serialization_state(Box, lambda b: b, lambda b, s: s)
    config.update('linen_strict_restore', True)
    try:
        with pytest.raises(InvalidCheckpointError, match=r'path \./v'):
            serialization.from_state_dict(Box(jnp.zeros(2)), {'v': np.zeros(3)})
    finally:
        config.update('linen_strict_restore', False)


def _boxed_params(features):
    from linen.core import meta

    return {
        'params': {
            'Dense_0': {
                'kernel': meta.Partitioned(np.zeros((4, features), np.float32), ('embed', 'mlp')),
                'bias': np.zeros((features,), np.float32),
            }
        }
    }


def test_from_bytes_onto_a_boxed_target_of_another_shape_names_path_and_shapes(strict_restore):
    stored = serialization.to_bytes(_boxed_params(3))
    with pytest.raises(
        InvalidCheckpointError,
        match=r'params/Dense_0/kernel/value: the target has shape \(4, 5\) but the checkpoint '
        r'holds shape \(4, 3\)\. Restore into a target built',
    ):
        serialization.from_bytes(_boxed_params(5), stored)


def test_check_restore_shapes_names_every_mismatched_path():
    target = jax.eval_shape(lambda: _boxed_params(5))
    stored = serialization.to_state_dict(_boxed_params(3))
    with pytest.raises(InvalidCheckpointError) as info:
        serialization.check_restore_shapes(target, stored)
    message = str(info.value)
    assert (
        'params/Dense_0/kernel/value: the checkpoint holds (4, 3), the target expects (4, 5)'
        in message
    )
    assert 'params/Dense_0/bias: the checkpoint holds (3,), the target expects (5,)' in message
    assert 'same model configuration' in message  # how to fix it
    serialization.check_restore_shapes(jax.eval_shape(lambda: _boxed_params(3)), stored)


def test_check_restore_shapes_names_a_path_missing_from_the_checkpoint():
    stored = {'params': {'Dense_0': {'bias': np.zeros(3)}}}
    with pytest.raises(InvalidCheckpointError, match=r'kernel/value: not in the checkpoint'):
        serialization.check_restore_shapes(_boxed_params(3), stored)


def test_check_restore_shapes_docstring_runs():
    import doctest

    finder = doctest.DocTestFinder()
    (test,) = finder.find(serialization.check_restore_shapes, 'check_restore_shapes')
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.IGNORE_EXCEPTION_DETAIL)
    runner.run(test)
    assert runner.failures == 0 and runner.tries == 2
