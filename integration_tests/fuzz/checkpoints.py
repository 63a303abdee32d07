"""The checkpoint fuzzer: random and mutated msgpack bytes through linen's reader.

Inputs, drawn from a seed:

- valid checkpoints of varied trees (float, half, bfloat16, int, bool, complex
  arrays, NumPy and Python scalars, strings, lists, empty containers, PRNG keys,
  arrays split into chunks), written by linen *or by Flax*;
- byte mutations of them: truncation, bit flips, insertions, deletions, splices
  of two checkpoints, repeated slices;
- structural mutations: the checkpoint decoded with plain msgpack, one node
  replaced (an array record with a wrong shape, dtype, payload or a huge declared
  size; a map turned into a list; garbage ext records; deep nesting), re-encoded;
- state dicts mutated directly (missing, extra and renamed keys, wrong shapes,
  wrong leaf types) through ``from_state_dict``.

Each input goes through ``msgpack_restore``, ``from_bytes(target, ...)`` and
``from_state_dict(target, ...)``. The rule: the right tree or
``InvalidCheckpointError``; never another exception, never more than
``SLOW_S`` seconds of CPU, and (measured on every ``TRACE_EVERY``-th input) never memory
beyond ``FIXED_OVERHEAD + PER_INPUT_BYTE * len(input)``. An unmutated checkpoint
must restore to its tree bit for bit, and where Flax's reader accepts an input
that linen's accepts too, both must give the same tree.
"""

from __future__ import annotations

import contextlib
import gc
import random
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import msgpack
import numpy as np

from integration_tests.fuzz.compare import canonical, compare_values

SLOW_S = 2.0
TRACE_EVERY = 25
FIXED_OVERHEAD = 1024 * 1024
PER_INPUT_BYTE = 16


def _trees(rng: random.Random) -> dict:
    """One random tree of what checkpoints hold."""

    def array():
        dtype = rng.choice(['float32', 'float16', 'bfloat16', 'int8', 'int32', 'uint8', 'bool',
                            'complex64', 'float64', 'int64'])  # fmt: skip
        shape = tuple(rng.randint(0, 3) for _ in range(rng.randint(0, 3)))
        values = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape) - 1.5
        return np.asarray(values).astype(jnp.dtype(dtype))

    def leaf():
        kind = rng.randrange(8)
        if kind < 4:
            return array()
        if kind == 4:
            return rng.choice([np.float32(1.5), np.int8(-3), np.bool_(True)])
        if kind == 5:
            return rng.choice([2.5, 7, True, 1 + 2j, 'text', None])
        if kind == 6:
            return jax.random.key(rng.randrange(100))
        return jnp.asarray(array())

    def node(depth):
        if depth > 2 or rng.random() < 0.35:
            return leaf()
        kind = rng.randrange(5)
        if kind == 3:  # linen's own containers: FrozenDict, tuple, a boxed leaf
            from linen.core import FrozenDict
            from linen.nn import Partitioned

            boxed = jnp.asarray(array())
            return rng.choice([
                FrozenDict({'a': node(depth + 1), 'b': array()}),
                (node(depth + 1), array()),
                {'w': Partitioned(boxed, names=(None,) * boxed.ndim)},
            ])  # fmt: skip
        if kind == 0:
            return {f'k{i}': node(depth + 1) for i in range(rng.randint(0, 3))}
        if kind == 1:
            return [node(depth + 1) for _ in range(rng.randint(0, 3))]
        return {'params': {'Dense_0': {'kernel': array(), 'bias': array()}}}

    return {'root': node(0)}


@contextlib.contextmanager
def _chunk_size(serialization, size: int | None):
    if size is None:
        yield
        return
    old = serialization.MAX_CHUNK_SIZE
    serialization.MAX_CHUNK_SIZE = size
    try:
        yield
    finally:
        serialization.MAX_CHUNK_SIZE = old


def _flax_writable(tree) -> bool:
    """Plain dicts, lists and arrays: what Flax's reader restores the same way."""
    if isinstance(tree, dict) and type(tree) is dict:
        return all(_flax_writable(v) for v in tree.values())
    if isinstance(tree, list):
        return all(_flax_writable(v) for v in tree)
    if isinstance(tree, tuple) or type(tree).__name__ in ('FrozenDict', 'Partitioned'):
        return False
    return not (hasattr(tree, 'dtype') and jax.dtypes.issubdtype(tree.dtype, jax.dtypes.prng_key))


def _record(shape, dtype, payload) -> msgpack.ExtType:
    return msgpack.ExtType(1, msgpack.packb([shape, dtype, payload], use_bin_type=True))


_HOSTILE_SHAPES = ([-1], [2**63], [2**64 - 1], [10**9, 10**9], [1.5], ['3'], [None], 5, [1] * 70,
                   [0], [], [4], [2**40], [2**31, 2**31, 2**31])  # fmt: skip
_HOSTILE_DTYPES = ('object', 'O', 'i4,O', '(2,)f4', 'V0', 'str', 'float99', 'float32', 'uint8',
                   'bfloat16', 'datetime64[ns]', 'x' * 500, 7, None, 'S0', 'U', '<f4', '>i8',
                   'float8_e4m3fn', 'int4', 'complex128')  # fmt: skip


def _garbage(rng: random.Random, depth: int = 0):
    kind = rng.randrange(9)
    if kind == 0:
        payload = bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 4, 8, 16])))
        return _record(rng.choice(_HOSTILE_SHAPES), rng.choice(_HOSTILE_DTYPES), payload)
    if kind == 1:
        code = rng.choice([1, 2, 3, 4, 9, 127])
        body = rng.choice([b'', b'\x00', msgpack.packb([1, 2]), msgpack.packb('x'),
                           msgpack.packb([[2], 'float32', b'\0' * 8])])  # fmt: skip
        return msgpack.ExtType(code, body)
    if kind == 2:
        return {'__msgpack_chunked_array__': True,
                'shape': rng.choice([{'0': 10**12}, {'0': -4}, {'0': 4}, [4], 'x', {}]),
                'chunks': rng.choice([{'0': _record([2], 'float32', b'\0' * 8)}, {}, [1], 'x'])}  # fmt: skip
    if kind == 3:
        return {'__linen_prng_key__': True, 'impl': rng.choice(['threefry2x32', 'rbg', 'x', 3]),
                'key_data': rng.choice([_record([2], 'uint32', b'\0' * 8), 'x', None])}  # fmt: skip
    if kind == 4 and depth < 3:
        return [_garbage(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if kind == 5 and depth < 3:
        return {rng.choice(['a', '0', '', 'k0', 1, b'b']): _garbage(rng, depth + 1)}
    if kind == 6:
        return rng.choice([None, True, -1, 2**64 - 1, 1.5, 'text', b'bytes', float('nan')])
    if kind == 7:
        deep: object = 0
        for _ in range(rng.choice([50, 199, 201, 1000])):
            deep = [deep]
        return deep
    return {}


def _replace_random_node(rng: random.Random, tree, new):
    """``tree`` with one node (chosen uniformly along one random path) replaced by ``new``."""
    if not isinstance(tree, (dict, list)) or not tree or rng.random() < 0.25:
        return new
    if isinstance(tree, dict):
        key = rng.choice(list(tree))
        return {**tree, key: _replace_random_node(rng, tree[key], new)}
    i = rng.randrange(len(tree))
    return tree[:i] + [_replace_random_node(rng, tree[i], new)] + tree[i + 1 :]


def _mutate_bytes(rng: random.Random, data: bytes, other: bytes) -> bytes:
    b = bytearray(data)
    kind = rng.randrange(6)
    if kind == 0:
        return bytes(b[: rng.randrange(len(b))])
    if kind == 1:
        for _ in range(rng.randint(1, 6)):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        return bytes(b)
    if kind == 2:
        i = rng.randrange(len(b) + 1)
        return bytes(b[:i] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 4))) + b[i:])
    if kind == 3:
        i = rng.randrange(len(b))
        return bytes(b[:i] + b[i + rng.randint(1, 4) :])
    if kind == 4:
        return bytes(b[: rng.randrange(len(b) + 1)] + other[rng.randrange(len(other) + 1) :])
    i = rng.randrange(len(b))
    j = min(len(b), i + rng.randint(1, 16))
    return bytes(b[:i] + b[i:j] * rng.randint(2, 50) + b[j:])


@dataclass
class Failure:
    kind: str  # 'exception' | 'slow' | 'memory' | 'wrong-tree' | 'flax-differs'
    where: str
    detail: str
    data: bytes | None = None


@dataclass
class Report:
    seed: str
    inputs: int = 0
    seconds: float = 0.0
    outcomes: Counter = field(default_factory=Counter)
    failures: list[Failure] = field(default_factory=list)

    def status(self) -> str:
        return f'{dict(self.outcomes)} failures {len(self.failures)}'

    def summary(self) -> str:
        lines = [f'checkpoint fuzzing, seed {self.seed}: {self.inputs} inputs in {self.seconds:.0f} s; '
                 f'outcomes {dict(self.outcomes)}; {len(self.failures)} failures']  # fmt: skip
        by_kind = Counter(f'{f.kind} in {f.where}' for f in self.failures)
        lines += [f'  {n:6d}  {k}' for k, n in by_kind.most_common()]
        for f in self.failures[:10]:
            lines.append(
                f'  e.g. {f.kind} in {f.where}: {f.detail[:300]} input {(f.data or b"")[:60]!r}'
            )
        return '\n'.join(lines)


class _Checker:
    def __init__(self, report: Report):
        from linen.core import serialization
        from linen.core.errors import InvalidCheckpointError

        self.report, self.ser, self.invalid = report, serialization, InvalidCheckpointError
        import flax.serialization

        self.flax = flax.serialization

    def _call(self, where: str, fn: Callable, data: bytes | None, trace: bool):
        if trace:
            tracemalloc.start()
        # This thread's CPU time: not wall time, so a busy machine does not look like a
        # hang, and not the process's, which counts the XLA threads a test run before
        # this one left working.
        start = time.thread_time()
        result, ok = None, False
        try:
            result, ok = fn(), True
        except self.invalid:
            self.report.outcomes[f'{where}: InvalidCheckpointError'] += 1
        except Exception as exc:
            self.report.failures.append(
                Failure('exception', where, f'{type(exc).__name__}: {exc}', data)
            )
        finally:
            elapsed = time.thread_time() - start
            if trace:
                _, peak = tracemalloc.get_traced_memory()
                tracemalloc.stop()
                size = len(data) if data is not None else 0
                if peak > FIXED_OVERHEAD + PER_INPUT_BYTE * size:
                    self.report.failures.append(
                        Failure('memory', where, f'{peak} bytes for {size}', data)
                    )
        if elapsed > SLOW_S and not trace:  # tracemalloc slows every allocation
            self.report.failures.append(Failure('slow', where, f'{elapsed:.1f} s', data))
        if ok:
            self.report.outcomes[f'{where}: restored'] += 1
        return ok, result

    def _flax_agrees(self, target, data: bytes, linen_tree) -> None:
        if len(data) > 4096:  # Flax's reader trusts declared sizes; keep its inputs small
            return
        try:
            flax_tree = self.flax.from_bytes(target, data)
        except Exception:  # Flax may refuse what linen reads (or crash on it): not compared
            return
        diffs = compare_values('from_bytes', canonical(flax_tree), canonical(linen_tree))
        diffs = [d for d in diffs if d.kind != 'container-type']
        if diffs:
            self.report.failures.append(Failure('flax-differs', 'from_bytes', str(diffs[0]), data))

    def check_bytes(self, target, data: bytes, expected=None, trace: bool = False) -> None:
        self.report.inputs += 1
        ok, state = self._call(
            'msgpack_restore', lambda: self.ser.msgpack_restore(data), data, trace
        )
        ok_tree, tree = self._call(
            'from_bytes', lambda: self.ser.from_bytes(target, data), data, trace
        )
        if ok:
            self._call(
                'from_state_dict', lambda: self.ser.from_state_dict(target, state), data, False
            )
        if expected is not None:
            if not ok_tree:
                self.report.failures.append(
                    Failure('wrong-tree', 'from_bytes', 'a valid checkpoint was refused', data)
                )
            else:
                diffs = compare_values('from_bytes', canonical(expected), canonical(tree))
                if diffs:
                    self.report.failures.append(
                        Failure('wrong-tree', 'from_bytes', str(diffs[0]), data)
                    )
        # Flax reads linen's PRNG key records as plain dicts (documented in serialization.py).
        if ok_tree and _flax_writable(target) and b'__linen_prng_key__' not in data:
            self._flax_agrees(target, data, tree)

    def check_state(self, target, state) -> None:
        self.report.inputs += 1
        self._call('from_state_dict', lambda: self.ser.from_state_dict(target, state), None, False)


def _mutate_state(rng: random.Random, state):
    if not isinstance(state, dict) or not state:
        return _garbage(rng)
    key = rng.choice(list(state))
    kind = rng.randrange(5)
    if kind == 0:
        return {k: v for k, v in state.items() if k != key}
    if kind == 1:
        return {**state, f'extra{rng.randrange(9)}': _garbage(rng)}
    if kind == 2:
        return {**state, key: _mutate_state(rng, state[key])}
    if kind == 3:
        return {**state, key: np.zeros((rng.randint(0, 3), 7))}
    return {**state, key: _garbage(rng)}


def run(
    seed: str | int, inputs: int, on_input: Callable[[int, Report], None] | None = None
) -> Report:
    """Fuzz ``inputs`` checkpoints; every failure is in ``report.failures``.

    The heap that exists before the run is frozen for its length (``gc.freeze``): in a
    test worker that holds a whole suite's objects, a full collection the reader's own
    allocations happen to trigger would otherwise scan all of them and count as the
    reader's time.
    """
    gc.collect()
    gc.freeze()
    try:
        return _run(seed, inputs, on_input)
    finally:
        gc.unfreeze()


def _run(seed: str | int, inputs: int, on_input: Callable[[int, Report], None] | None) -> Report:
    report = Report(str(seed))
    checker = _Checker(report)
    rng = random.Random(f'checkpoints:{seed}')
    start = time.monotonic()
    corpus: list[tuple[object, bytes]] = []
    i = 0
    while report.inputs < inputs:
        i += 1
        trace = i % TRACE_EVERY == 0
        if len(corpus) < 40 or rng.random() < 0.03:
            tree = _trees(rng)
            chunk = rng.choice([None, None, 4, 8, 64])
            writer = 'flax' if rng.random() < 0.3 and _flax_writable(tree) else 'linen'
            with _chunk_size(checker.ser, chunk), _chunk_size(checker.flax, chunk):
                data = (checker.flax if writer == 'flax' else checker.ser).to_bytes(tree)
            corpus.append((tree, data))
            corpus = corpus[-200:]
            checker.check_bytes(tree, data, expected=tree, trace=trace)
            continue
        target, data = rng.choice(corpus)
        kind = rng.randrange(10)
        if kind < 5:
            mutated = _mutate_bytes(rng, data, rng.choice(corpus)[1])
        elif kind < 8:
            try:
                decoded = msgpack.unpackb(data, raw=False, strict_map_key=False)
                mutated = msgpack.packb(
                    _replace_random_node(rng, decoded, _garbage(rng)), use_bin_type=True
                )
            except Exception:  # garbage msgpack cannot pack (e.g. depth): use raw bytes
                mutated = _mutate_bytes(rng, data, data)
        elif kind == 8:
            mutated = rng.choice([b'', b'\xc1', b'\x91' * rng.choice([201, 5000]) + b'\xc0',
                                  rng.choice([b'\xdd', b'\xdf', b'\xdb', b'\xc6', b'\xc9'])
                                  + b'\xff\xff\xff\xff' + bytes(rng.randrange(256) for _ in range(8))])  # fmt: skip
        else:
            try:
                state = checker.ser.to_state_dict(target)
                checker.check_state(target, _mutate_state(rng, state))
            except Exception as exc:
                report.failures.append(Failure('exception', 'to_state_dict', repr(exc)))
            continue
        checker.check_bytes(target, mutated, trace=trace)
        if on_input is not None and report.inputs % 100 == 0:
            report.seconds = time.monotonic() - start
            on_input(report.inputs, report)
    report.seconds = time.monotonic() - start
    return report


__all__ = ['Failure', 'Report', 'run']
