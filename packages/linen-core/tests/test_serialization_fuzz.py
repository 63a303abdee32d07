"""Fuzzing the checkpoint reader: malformed bytes raise InvalidCheckpointError, nothing else.

Thousands of inputs derived from valid checkpoints (truncations, bit flips, byte
insertions and deletions) and crafted records (negative, overflowing or huge
shapes, object and structured dtypes, bad chunk and key records, deep nesting)
go through ``msgpack_restore`` and ``from_bytes``. Each must either restore or
raise :class:`InvalidCheckpointError`, and tracemalloc checks that no input
makes the reader allocate much more than the input's own size (a shape that
declares gigabytes on a few bytes of payload is refused before allocating).
"""

from __future__ import annotations

import random
import tracemalloc

import jax
import msgpack
import numpy as np
import pytest

from linen.core import serialization
from linen.core.config import config
from linen.core.errors import InvalidCheckpointError

SEED = 20261201
# Python objects made while decoding (dicts, path tuples, exceptions with their
# tracebacks, at most 200 levels deep) cost up to a few hundred KiB whatever the
# input; what a hostile shape would inflate is the payload-proportional part.
FIXED_OVERHEAD = 1024 * 1024
PER_INPUT_BYTE = 16


def _valid_checkpoints(monkeypatch) -> list[tuple[object, bytes]]:
    """(target, bytes) pairs of every record kind the writer makes."""
    trees = [
        {'params': {'kernel': np.arange(6, dtype=np.float32).reshape(2, 3), 'bias': np.ones(3)}},
        {'a': np.int8(7), 'b': 2.5, 'c': 1 + 2j, 'd': [np.arange(3, dtype=np.int32), 'txt']},
        {'bf': np.arange(4).astype(jax.numpy.bfloat16), 'flag': np.array([True, False])},
        {'key': jax.random.key(3)},
    ]
    out = [(tree, serialization.to_bytes(tree)) for tree in trees]
    # a chunked array: lower the chunk size so a small array is split
    monkeypatch.setattr(serialization, 'MAX_CHUNK_SIZE', 8)
    chunked = {'big': np.arange(10, dtype=np.float32)}
    out.append((chunked, serialization.to_bytes(chunked)))
    monkeypatch.undo()
    return out


def _record(shape, dtype, payload) -> msgpack.ExtType:
    return msgpack.ExtType(1, msgpack.packb([shape, dtype, payload], use_bin_type=True))


_SHAPES = [
    [-1],
    [-3, -2],
    [2**63],
    [2**64 - 1],
    [2**31, 2**31, 2**31],
    [10**9, 10**9],
    [1.5],
    ['3'],
    [True],
    [[2]],
    [None],
    5,
    'abc',
    {'0': 2},
    [1] * 65,
    [2, 0],
    [0],
    [],
    [4],
    [2**40],
]
_DTYPES = [
    'object',
    'O',
    'object_',
    'i4,O',
    '(2,)f4',
    'a',
    'a4',
    'V0',
    'str',
    'void',
    'bytes',
    '',
    'float99',
    'float32',
    'uint8',
    'bfloat16',
    'datetime64[ns]',
    'datetime64[zz]',
    'str96',
    'void13',
    'x' * 1000,
    7,
    None,
    b'float32',
]


def _crafted(rng: random.Random) -> bytes:
    kind = rng.randrange(6)
    if kind == 0:  # an array record with a hostile shape or dtype
        payload = bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 4, 8, 16])))
        rec = _record(rng.choice(_SHAPES), rng.choice(_DTYPES), payload)
        return msgpack.packb({'w': rec})
    if kind == 1:  # a NumPy scalar record, or a record that is not a triple
        fields = rng.choice([[[], 'float32', b'\0' * 4], [[2], 'float32', b'\0' * 8], [1, 2], 'x'])
        return msgpack.packb(
            {'s': msgpack.ExtType(rng.choice([1, 2, 3, 9]), msgpack.packb(fields))}
        )
    if kind == 2:  # a chunked-array map with inconsistent pieces
        shape = rng.choice([{'0': 10**12}, {'0': -4}, {'0': 4}, [4], {'1': 4}, 'x'])
        chunks = rng.choice(
            [
                {'0': _record([2], 'float32', b'\0' * 8)},
                {'0': _record([2], 'float32', b'\0' * 8), '1': _record([2], 'int8', b'\0\0')},
                {'0': 'text'},
                {},
                [1, 2],
            ]
        )
        return msgpack.packb(
            {'c': {'__msgpack_chunked_array__': True, 'shape': shape, 'chunks': chunks}}
        )
    if kind == 3:  # a PRNG key record with a bad impl or data
        impl = rng.choice(['threefry2x32', 'rbg', 'nope', 3, None])
        data = rng.choice(
            [_record([2], 'uint32', b'\0' * 8), _record([3], 'uint32', b'\0' * 12), 'x']
        )
        return msgpack.packb({'k': {'__linen_prng_key__': True, 'impl': impl, 'key_data': data}})
    if kind == 4:  # deep nesting, past Python's recursion limit
        depth = rng.choice([900, 3000, 100_000])
        return b'\x91' * depth + b'\xc0'
    # a raw msgpack header claiming a huge container or string on a short payload
    header = rng.choice(
        [
            b'\xdd\xff\xff\xff\xff',
            b'\xdf\xff\xff\xff\xff',
            b'\xdb\xff\xff\xff\xff',
            b'\xc6\xff\xff\xff\xff',
            b'\xc9\xff\xff\xff\xff\x01',
        ]
    )
    return header + bytes(rng.randrange(256) for _ in range(rng.randrange(8)))


def _mutated(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    kind = rng.randrange(4)
    if kind == 0:
        return bytes(b[: rng.randrange(len(b))])
    if kind == 1:
        for _ in range(rng.randrange(1, 5)):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        return bytes(b)
    if kind == 2:
        i = rng.randrange(len(b) + 1)
        return bytes(b[:i] + bytes([rng.randrange(256)]) + b[i:])
    i = rng.randrange(len(b))
    return bytes(b[:i] + b[i + 1 :])


def _restore_checked(target, data: bytes) -> None:
    """Restore ``data`` both ways: it restores, or raises InvalidCheckpointError."""
    for restore in (serialization.msgpack_restore, lambda d: serialization.from_bytes(target, d)):
        try:
            restore(data)
        except InvalidCheckpointError:
            pass


def _allocation_of_restore(data: bytes) -> int:
    """Peak bytes allocated while decoding ``data`` (tracemalloc must be tracing)."""
    tracemalloc.reset_peak()
    base, _ = tracemalloc.get_traced_memory()
    try:
        serialization.msgpack_restore(data)
    except InvalidCheckpointError:
        pass
    _, peak = tracemalloc.get_traced_memory()
    return peak - base


@pytest.fixture
def traced():
    tracemalloc.start()
    yield
    tracemalloc.stop()


def test_fuzzed_checkpoints_restore_or_raise_invalid_checkpoint(monkeypatch):
    rng = random.Random(SEED)
    valid = _valid_checkpoints(monkeypatch)
    for _ in range(3000):
        target, data = rng.choice(valid)
        _restore_checked(target, _mutated(rng, data))
    for _ in range(1500):
        _restore_checked(rng.choice(valid)[0], _crafted(rng))


def test_fuzzed_checkpoints_allocate_no_more_than_their_size_order(monkeypatch, traced):
    # Tracing every allocation is slow, so fewer cases, mostly the crafted records
    # whose declared shapes would be huge.
    rng = random.Random(SEED + 1)
    valid = _valid_checkpoints(monkeypatch)
    inputs = [_crafted(rng) for _ in range(300)]
    inputs += [_mutated(rng, rng.choice(valid)[1]) for _ in range(100)]
    for data in inputs:
        allocated = _allocation_of_restore(data)
        assert allocated <= FIXED_OVERHEAD + PER_INPUT_BYTE * len(data), (
            f'restoring {len(data)} bytes allocated {allocated} bytes: {data[:80]!r}'
        )


@pytest.mark.parametrize(
    ('record', 'pattern'),
    [
        (_record([-1], 'float32', b''), r'invalid shape \[-1\]'),
        (_record([-2, -2], 'float32', b'\0' * 16), r'invalid shape \[-2, -2\]'),
        (_record([2**64 - 1], 'float32', b'\0' * 4), r'needs \d+ bytes but the record holds 4'),
        (_record([10**9, 10**9], 'float64', b''), r'needs 8000000000000000000 bytes'),
        (_record([1], 'object', b'\0' * 8), r'Refusing dtype "object"'),
        (_record([1], 'i4,O', b'\0' * 12), r'Unknown dtype "i4,O"'),
        # a zero-size alias in NumPy < 2.5, gone after: refused either way
        (_record([1], 'a', b''), r'(Refusing|Unknown) dtype "a"'),
        (_record([1.0], 'float32', b'\0' * 4), r'invalid shape \[1.0\]'),
    ],
)
def test_crafted_records_are_refused_before_allocating(record, pattern, traced):
    data = msgpack.packb({'w': record})
    with pytest.raises(InvalidCheckpointError, match=pattern):
        serialization.msgpack_restore(data)
    assert _allocation_of_restore(data) <= FIXED_OVERHEAD


def test_deep_nesting_is_an_invalid_checkpoint():
    with pytest.raises(InvalidCheckpointError, match='more than 200 deep'):
        serialization.msgpack_restore(b'\x91' * 1000 + b'\xc0')


def test_a_leaf_of_the_wrong_kind_does_not_restore_into_an_array():
    data = serialization.to_bytes({'w': 'not an array'})
    # As Flax, by default the stored value comes back as it is; strict restore refuses it.
    assert serialization.from_bytes({'w': np.zeros(2)}, data) == {'w': 'not an array'}
    config.update('linen_strict_restore', True)
    try:
        with pytest.raises(InvalidCheckpointError, match=r'path \./w, found a str'):
            serialization.from_bytes({'w': np.zeros(2)}, data)
    finally:
        config.update('linen_strict_restore', False)
