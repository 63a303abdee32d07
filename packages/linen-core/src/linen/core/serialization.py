"""State dicts and msgpack checkpoints, byte-compatible with ``flax.serialization``.

Two layers. ``to_state_dict``/``from_state_dict`` turn a tree of containers
(dict, FrozenDict, list, tuple, namedtuple, struct dataclasses and any type given
to ``register_serialization_state``) into nested dicts with string keys and back,
restoring into a *target* that supplies the structure. ``msgpack_serialize`` and
``msgpack_restore`` turn such a state dict into bytes and back.

The byte format is Flax's, so checkpoints move both ways:

- arrays (NumPy and JAX) are msgpack ext type 1 holding ``packb((shape, dtype
  name, raw bytes))``; NumPy scalars are ext type 3 with the same payload; Python
  ``complex`` is ext type 2 holding ``packb((real, imag))``;
- an array of more than ``MAX_CHUNK_SIZE`` bytes is written as the map
  ``{'__msgpack_chunked_array__': True, 'shape': {'0': d0, ...}, 'chunks':
  {'0': part0, ...}}`` of flat pieces of at most that many bytes (msgpack caps one
  object at 4 GiB).

Typed PRNG key arrays (``jax.random.key``), which Flax cannot serialize, are written
as the map ``{'__linen_prng_key__': True, 'impl': <name>, 'key_data': <uint32
array>}``: Flax reads that back as a plain dict, and this module as a key array.

Malformed bytes, and a state dict that does not fit the target (missing keys,
wrong list lengths), raise :class:`~linen.core.errors.InvalidCheckpointError`
naming the path in the tree. A leaf stored where the target has an array of another
shape (or a dict, or a string) comes back as it is stored, as from Flax's readers;
the flag ``linen_strict_restore`` (env ``LINEN_STRICT_RESTORE``) refuses it, naming
the path and both shapes, and :func:`check_restore_shapes` checks on request. The reader trusts nothing in the bytes: a declared
shape must be non-negative and match the payload's length before anything is
allocated, dtype names are looked up (never parsed, so no ``object`` or
structured dtype gets in), and any failure of the decoder is reported as
``InvalidCheckpointError``; so no input allocates more than its own size order.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import jax
import ml_dtypes  # noqa: F401  (registers bfloat16, float8_*, int4 ... in np.sctypeDict)
import numpy as np

if TYPE_CHECKING:
    import msgpack

from linen.core.config import config
from linen.core.errors import InvalidCheckpointError
from linen.core.frozen_dict import FrozenDict

__all__ = [
    'MAX_CHUNK_SIZE',
    'check_restore_shapes',
    'current_path',
    'from_bytes',
    'from_state_dict',
    'is_serializable',
    'msgpack_restore',
    'msgpack_serialize',
    'register_serialization_state',
    'to_bytes',
    'to_state_dict',
]

# Flax's value; read at call time so tests can lower it.
MAX_CHUNK_SIZE = 2**30

_EXT_NDARRAY = 1
_EXT_NATIVE_COMPLEX = 2
_EXT_NPSCALAR = 3

_CHUNKED_MARKER = '__msgpack_chunked_array__'


@functools.cache
def _msgpack() -> Any:
    # Imported on the first checkpoint written or read, not by `import linen.nn`
    # (struct, hence every Module, imports this module for its state-dict registry).
    import msgpack

    return msgpack


_KEY_MARKER = '__linen_prng_key__'

_ToState = Callable[[Any], Any]
_FromState = Callable[[Any, Any], Any]
_REGISTRY: dict[type, tuple[_ToState, _FromState]] = {}

# The names of the nodes being restored, outermost first, for error messages.
_PATH: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar(
    'linen_serialization_path', default=()
)


def current_path() -> str:
    """The path being restored by ``from_state_dict``, Flax-style (``./a/b``)."""
    return '/'.join(_PATH.get()) or '.'


@contextlib.contextmanager
def _enter(name: str):
    token = _PATH.set(_PATH.get() + (str(name),))
    try:
        yield
    finally:
        _PATH.reset(token)


def register_serialization_state(
    ty: type,
    ty_to_state_dict: _ToState,
    ty_from_state_dict: _FromState,
    override: bool = False,
) -> None:
    """Registers how instances of ``ty`` become a state dict and are restored from one.

    Args:
        ty: the type (exact; subclasses register separately).
        ty_to_state_dict: ``x -> state`` (call ``to_state_dict`` on the children).
        ty_from_state_dict: ``(target, state) -> restored`` (call
            ``from_state_dict(child_target, child_state, name=key)`` on the children so
            errors name the path).
        override: replace an existing registration instead of raising ValueError.
    """
    if ty in _REGISTRY and not override:
        raise ValueError(
            f'A serialization handler for "{ty.__name__}" is already registered; pass '
            'override=True to replace it.'
        )
    _REGISTRY[ty] = (ty_to_state_dict, ty_from_state_dict)


def is_serializable(target: Any) -> bool:
    """Whether ``target`` (an instance, or a class) has a registered state-dict handler.

    The exact type counts, as in the registry: dicts, lists, tuples, ``FrozenDict``,
    ``struct`` dataclasses and what :func:`register_serialization_state` added. A
    subclass counts only if it is registered itself; a namedtuple (serialized field
    by field, without a handler) and an array do not.

    >>> is_serializable({'a': 1}), is_serializable(tuple), is_serializable(1.0)
    (True, True, False)
    """
    return (target if isinstance(target, type) else type(target)) in _REGISTRY


def _is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), '_fields')


def to_state_dict(target: Any) -> Any:
    """Returns the state dict of ``target``: registered containers become dicts with str keys."""
    if _is_namedtuple(target):
        return {name: to_state_dict(getattr(target, name)) for name in target._fields}
    handler = _REGISTRY.get(type(target))
    if handler is None:
        return target
    return handler[0](target)


def from_state_dict(target: Any, state: Any, name: str = '.') -> Any:
    """Restores ``state`` into the structure of ``target``.

    Args:
        target: a tree giving the structure (and shapes) to restore into.
        state: a state dict, as made by ``to_state_dict`` or ``msgpack_restore``.
        name: the name of this node in the path used by error messages.

    Raises:
        InvalidCheckpointError: a key the target needs is missing, a list has the
            wrong length, or an array has the wrong shape.
    """
    with _enter(name):
        if _is_namedtuple(target):
            return _restore_namedtuple(target, state)
        handler = _REGISTRY.get(type(target))
        if handler is not None:
            return handler[1](target, state)
        return _restore_leaf(target, state)


def _shapes_by_path(tree: Any) -> dict[str, tuple]:
    def key_text(key: Any) -> str:
        return str(getattr(key, 'key', getattr(key, 'name', getattr(key, 'idx', key))))

    leaves = jax.tree_util.tree_leaves_with_path(tree, is_leaf=lambda x: hasattr(x, 'shape'))
    return {
        '/'.join(key_text(k) for k in path): tuple(leaf.shape)
        for path, leaf in leaves
        if hasattr(leaf, 'shape')
    }


def check_restore_shapes(target: Any, stored: Any) -> None:
    """Raises :class:`InvalidCheckpointError` naming each path whose shapes differ.

    Run it before restoring with a library that checks shapes without naming the
    variable (orbax says only "Requested shape (5,) is not compatible with the
    stored shape (3,)"), or before ``from_state_dict``/``from_bytes``, which as in Flax
    return a stored array of another shape as it is (unless ``linen_strict_restore``).

    Args:
        target: what will be restored into: arrays, ``jax.ShapeDtypeStruct`` s,
            boxed (``nn.Partitioned``) or not.
        stored: a tree with the checkpoint's shapes: a state dict, or orbax's
            ``checkpointer.metadata(path)`` (its ``item_metadata`` is used).

    >>> import numpy as np
    >>> check_restore_shapes({'w': np.zeros((4, 5))}, {'w': np.zeros((4, 3))})
    Traceback (most recent call last):
    ...
    InvalidCheckpointError: Checkpoint shape mismatch at w: ...
    """
    stored = getattr(stored, 'item_metadata', stored)
    have = _shapes_by_path(stored)
    want = _shapes_by_path(_state_tree(target))
    wrong = [(p, have[p], want[p]) for p in want if p in have and have[p] != want[p]]
    missing = [p for p in want if p not in have]
    if not wrong and not missing:
        return
    lines = [f'{p}: the checkpoint holds {h}, the target expects {w}' for p, h, w in wrong]
    lines += [f'{p}: not in the checkpoint (the target expects {want[p]})' for p in missing]
    shown = '; '.join(lines[:5]) + (f'; and {len(lines) - 5} more' if len(lines) > 5 else '')
    raise InvalidCheckpointError(
        f'Checkpoint shape mismatch at {shown}. Build the restore target from the '
        'same model configuration as the checkpoint (e.g. jax.eval_shape of its init), '
        'or convert the stored arrays before restoring.'
    )


def _state_tree(target: Any) -> Any:
    """``to_state_dict`` applied down a whole tree (boxes become ``{'value': ...}``)."""
    state = to_state_dict(target)
    if isinstance(state, dict):
        return {k: _state_tree(v) for k, v in state.items()}
    return state


def _check_mapping(state: Any, what: str) -> None:
    if not isinstance(state, dict):
        raise InvalidCheckpointError(
            f'Expected a dict to restore a {what} at path {current_path()}, got '
            f'{type(state).__name__}. The checkpoint does not match the target structure.'
        )


def _restore_leaf(target: Any, state: Any) -> Any:
    if not hasattr(target, 'shape'):
        return state
    strict = config.linen_strict_restore
    if strict and isinstance(state, dict):
        raise InvalidCheckpointError(
            f'Expected an array of shape {tuple(target.shape)} at path {current_path()}, '
            f'found a dict with keys {sorted(state, key=str)[:5]}. The checkpoint has a different '
            'structure than the target.'
        )
    if _is_key_array(target) and hasattr(state, 'shape') and not _is_key_array(state):
        # A raw uint32 key (e.g. a Flax checkpoint of jax.random.PRNGKey) restored into a
        # typed key: wrap it with the target's implementation.
        impl = jax.random.key_impl(target)
        try:
            state = jax.random.wrap_key_data(jax.numpy.asarray(state), impl=impl)
        except Exception as e:  # JAX's error types for bad key data vary by version
            raise InvalidCheckpointError(
                f'Cannot restore a PRNG key array at path {current_path()} from raw data '
                f'of shape {tuple(state.shape)} and dtype {state.dtype}: {e}'
            ) from e
    if not strict:
        # As Flax (google/flax#2436): the stored value is returned as it is; a shape
        # that does not fit the model fails when the variables are used (apply's
        # ScopeParamShapeError). check_restore_shapes, or linen_strict_restore, checks here.
        return state
    shape = getattr(state, 'shape', None)
    if shape is None and not isinstance(state, (bool, int, float, complex)):
        raise InvalidCheckpointError(
            f'Expected an array of shape {tuple(target.shape)} at path {current_path()}, '
            f'found a {type(state).__name__}. The checkpoint is corrupt or has a different '
            'structure than the target.'
        )
    if shape is not None and tuple(shape) != tuple(target.shape):
        raise InvalidCheckpointError(
            f'Shape mismatch at path {current_path()}: the target has shape '
            f'{tuple(target.shape)} but the checkpoint holds shape {tuple(shape)}. '
            'Restore into a target built with the same configuration as the checkpoint.'
        )
    return state


def _missing_keys_error(missing, kind: str = 'dict') -> InvalidCheckpointError:
    return InvalidCheckpointError(
        f'The target {kind} keys and state dict keys do not match, target {kind} contains '
        f'keys {set(missing)} which are not present in state dict at path {current_path()}. '
        'The checkpoint was written from a different structure: restore into a target '
        'that matches it.'
    )


def _dict_to_state(xs: dict) -> dict:
    return {str(k): to_state_dict(v) for k, v in xs.items()}


def _restore_dict(target: dict, state: Any) -> dict:
    _check_mapping(state, 'dict')
    missing = [str(k) for k in target if str(k) not in state]
    if missing:
        raise _missing_keys_error(missing)
    return {k: from_state_dict(v, state[str(k)], name=str(k)) for k, v in target.items()}


def _frozen_to_state(xs: FrozenDict) -> dict:
    return {str(k): to_state_dict(xs[k]) for k in xs}


def _restore_frozen(target: FrozenDict, state: Any) -> FrozenDict:
    return FrozenDict(_restore_dict({k: target[k] for k in target}, state))


def _sequence_to_state(xs) -> dict:
    return {str(i): to_state_dict(v) for i, v in enumerate(xs)}


def _restore_sequence(target, state):
    _check_mapping(state, type(target).__name__)
    if len(target) != len(state):
        raise InvalidCheckpointError(
            f'The size of the list and the state dict do not match, got {len(target)} and '
            f'{len(state)} at path {current_path()}. Restore into a target of the same length.'
        )
    missing = [str(i) for i in range(len(target)) if str(i) not in state]
    if missing:
        raise _missing_keys_error(missing, type(target).__name__)
    values = [from_state_dict(v, state[str(i)], name=str(i)) for i, v in enumerate(target)]
    return type(target)(values)


def _restore_namedtuple(target, state):
    _check_mapping(state, type(target).__name__)
    missing = [f for f in target._fields if f not in state]
    if missing:
        raise _missing_keys_error(missing, type(target).__name__)
    values = {f: from_state_dict(getattr(target, f), state[f], name=f) for f in target._fields}
    return type(target)(**values)


register_serialization_state(dict, _dict_to_state, _restore_dict)
register_serialization_state(FrozenDict, _frozen_to_state, _restore_frozen)
register_serialization_state(list, _sequence_to_state, _restore_sequence)
register_serialization_state(tuple, _sequence_to_state, _restore_sequence)


# ---------------------------------------------------------------------------- msgpack


def _is_key_array(x: Any) -> bool:
    dtype = getattr(x, 'dtype', None)
    return dtype is not None and jax.numpy.issubdtype(dtype, jax.dtypes.prng_key)


def _key_impl_name(key: Any) -> str:
    impl = jax.random.key_impl(key)
    # PRNGSpec's str is the registered name ('threefry2x32', 'rbg', ...).
    return str(impl)


def _chunk(arr: np.ndarray) -> Any:
    if arr.nbytes <= MAX_CHUNK_SIZE:
        return arr
    flat = arr.reshape(-1)
    per_chunk = max(1, MAX_CHUNK_SIZE // max(1, arr.dtype.itemsize))
    chunks = {
        str(i): flat[start : start + per_chunk]
        for i, start in enumerate(range(0, flat.size, per_chunk))
    }
    shape = {str(i): int(d) for i, d in enumerate(arr.shape)}
    return {_CHUNKED_MARKER: True, 'shape': shape, 'chunks': chunks}


def _prepare(x: Any, sort: bool = False) -> Any:
    """Makes a msgpack-ready copy: mappings become dicts, sequences lists, big arrays chunks.

    ``sort``: keys are written sorted, in JAX's pytree order, as Flax's
    ``msgpack_serialize`` writes them when it copies its input (``in_place=False``);
    keys that do not sort (ints beside strs, which Flax cannot write) keep their order.
    """
    if isinstance(x, (dict, FrozenDict)):
        keys: Any = x
        if sort:
            try:
                keys = sorted(x)
            except TypeError:
                pass
        return {k: _prepare(x[k], sort) for k in keys}
    if isinstance(x, (list, tuple)):
        return [_prepare(v, sort) for v in x]
    if _is_key_array(x):
        return {
            _KEY_MARKER: True,
            'impl': _key_impl_name(x),
            'key_data': _prepare(np.asarray(jax.random.key_data(x))),
        }
    if isinstance(x, jax.Array):
        return _chunk(np.asarray(x))
    if isinstance(x, np.ndarray):
        return _chunk(x)
    return x


def _packb(obj: Any, **kwargs: Any) -> bytes:
    packed = _msgpack().packb(obj, **kwargs)
    assert packed is not None  # packb returns None only when writing to a stream
    return packed


def _pack_array(arr: np.ndarray | np.generic) -> bytes:
    return _packb((arr.shape, arr.dtype.name, arr.tobytes()), use_bin_type=True)


def _ext_pack(x: Any) -> msgpack.ExtType:
    if isinstance(x, np.ndarray):
        return _msgpack().ExtType(_EXT_NDARRAY, _pack_array(x))
    if isinstance(x, np.generic):
        return _msgpack().ExtType(_EXT_NPSCALAR, _pack_array(x))
    if type(x) is complex:
        return _msgpack().ExtType(_EXT_NATIVE_COMPLEX, _packb((x.real, x.imag)))
    raise TypeError(
        f'Cannot serialize a value of type {type(x).__name__}: checkpoints hold arrays, '
        'NumPy scalars, Python numbers, str, bytes, None and containers of them.'
    )


def msgpack_serialize(pytree: Any, in_place: bool = False) -> bytes:
    """Serializes a state dict (nested dicts of arrays and scalars) to msgpack bytes.

    Args:
        pytree: the state dict; FrozenDicts, lists and tuples are accepted too.
        in_place: as in Flax, ``False`` writes dict keys sorted (Flax copies the input
            with a pytree map, which sorts them) and ``True`` in their own order
            (``to_bytes`` writes a state dict so); the input is never modified.
    """
    # strict_types: np.float64 subclasses float and must still go through the ext
    # path (as in Flax), not be written as a native double.
    return _packb(_prepare(pytree, sort=not in_place), default=_ext_pack, strict_types=True)


_SIZED_DTYPE = re.compile(r'(bytes|str|void)([0-9]{1,12})')
_TIME_DTYPE = re.compile(r'(datetime64|timedelta64)\[([0-9]{0,4}[a-zA-Z]{1,2})\]')
_SIZED_KIND = {'bytes': ('S', 8), 'str': ('U', 32), 'void': ('V', 8)}
# numpy allows at most 64 axes; a larger rank is corrupt input.
_MAX_RANK = 64


def _dtype_or_none(name: Any) -> np.dtype | None:
    # Looked up, never parsed: np.dtype(str) would also accept structured specs
    # ('i4,O' holds Python objects), subarrays ('(2,)f4') and deprecated aliases
    # (which warn). Writers store ``dtype.name``, which is one of these forms.
    if not isinstance(name, str) or len(name) > 40:
        return None
    scalar_type = np.sctypeDict.get(name)
    if scalar_type is not None:
        return np.dtype(scalar_type)
    sized = _SIZED_DTYPE.fullmatch(name)
    if sized is not None:
        code, bits_per_item = _SIZED_KIND[sized[1]]
        bits = int(sized[2])
        if bits % bits_per_item == 0:
            return np.dtype(f'{code}{bits // bits_per_item}')
        return None
    timed = _TIME_DTYPE.fullmatch(name)
    if timed is not None:
        try:
            return np.dtype(name)
        except TypeError:
            return None
    return None


def _dtype_from_name(name: Any) -> np.dtype:
    dtype = _dtype_or_none(name)
    if dtype is None:
        raise InvalidCheckpointError(
            f'Unknown dtype "{str(name)[:60]}" at path {current_path()}: this NumPy/ml_dtypes cannot '
            'represent it. Upgrade ml_dtypes, or the checkpoint is corrupt.'
        )
    if dtype.hasobject or dtype.itemsize == 0:
        raise InvalidCheckpointError(
            f'Refusing dtype "{name}" at path {current_path()}: checkpoints hold plain '
            'numeric, bool, bytes or str arrays, never Python objects or zero-size items. '
            'The checkpoint is corrupt or was crafted.'
        )
    return dtype


def _corrupt_record(problem: str) -> InvalidCheckpointError:
    return InvalidCheckpointError(
        f'Corrupt array record at path {current_path()}: {problem}. The checkpoint is '
        'truncated or corrupt.'
    )


def _decode_array(data: bytes, scalar: bool) -> Any:
    try:
        record = _msgpack().unpackb(data, raw=False)
    except Exception as e:
        raise _corrupt_record(f'{type(e).__name__}: {e}') from e
    if not isinstance(record, list) or len(record) != 3:
        raise _corrupt_record(f'expected (shape, dtype name, bytes), got {type(record).__name__}')
    shape, dtype_name, buffer = record
    if not isinstance(buffer, bytes):
        raise _corrupt_record(f'the data is {type(buffer).__name__}, not bytes')
    if (
        not isinstance(shape, list)
        or len(shape) > _MAX_RANK
        or not all(type(d) is int and d >= 0 for d in shape)
    ):
        raise _corrupt_record(f'invalid shape {shape!r:.100} (a list of non-negative ints)')
    shape = tuple(shape)
    if scalar and shape:
        raise _corrupt_record(f'a NumPy scalar with shape {shape}')
    dtype = _dtype_from_name(dtype_name)
    # Checked before any allocation: the payload must hold exactly the declared array.
    expected = math.prod(shape) * dtype.itemsize
    if len(buffer) != expected:
        raise InvalidCheckpointError(
            f'Corrupt array at path {current_path()}: shape {shape} of {dtype.name} needs '
            f'{expected} bytes but the record holds {len(buffer)}. The checkpoint is '
            'truncated or corrupt.'
        )
    arr = np.frombuffer(buffer, dtype=dtype).reshape(shape)
    return arr[()] if scalar else arr


def _decode_ext(ext: msgpack.ExtType) -> Any:
    if ext.code == _EXT_NDARRAY:
        return _decode_array(ext.data, scalar=False)
    if ext.code == _EXT_NPSCALAR:
        return _decode_array(ext.data, scalar=True)
    if ext.code == _EXT_NATIVE_COMPLEX:
        try:
            real, imag = _msgpack().unpackb(ext.data)
            if not all(type(v) in (int, float) for v in (real, imag)):
                raise TypeError(f'parts of types {type(real).__name__}, {type(imag).__name__}')
            return complex(real, imag)
        except Exception as e:
            raise InvalidCheckpointError(
                f'Corrupt complex number at path {current_path()}: {type(e).__name__}: {e}'
            ) from e
    raise InvalidCheckpointError(
        f'Unknown msgpack extension type {ext.code} at path {current_path()}: the bytes '
        'were not written by linen or Flax, or are corrupt.'
    )


def _unchunk(node: dict) -> np.ndarray:
    try:
        shape_node, chunks = node['shape'], node['chunks']
        if not isinstance(shape_node, dict) or not isinstance(chunks, dict) or not chunks:
            raise TypeError('"shape" and "chunks" must be non-empty maps')
        shape = tuple(shape_node[str(i)] for i in range(len(shape_node)))
        if len(shape) > _MAX_RANK or not all(type(d) is int and d >= 0 for d in shape):
            raise ValueError(f'invalid shape {shape!r:.100}')
        parts = [chunks[str(i)] for i in range(len(chunks))]
        if not all(isinstance(p, np.ndarray) and p.ndim == 1 for p in parts):
            raise TypeError('every chunk must be a flat array')
        if len({p.dtype for p in parts}) != 1:
            raise TypeError('the chunks have different dtypes')
        # The parts are already decoded from the input; only a matching total is joined.
        if sum(p.size for p in parts) != math.prod(shape):
            raise ValueError(f'the chunks do not hold {math.prod(shape)} elements of {shape}')
        return np.concatenate(parts).reshape(shape)
    except (KeyError, TypeError, ValueError) as e:
        raise InvalidCheckpointError(
            f'Corrupt chunked array at path {current_path()}: {type(e).__name__}: {e}. The '
            'checkpoint is truncated or corrupt.'
        ) from e


def _restore_key(node: dict) -> jax.Array:
    impl, key_data = node.get('impl'), node.get('key_data')
    if not isinstance(impl, str) or not isinstance(key_data, np.ndarray):
        raise InvalidCheckpointError(
            f'Corrupt PRNG key record at path {current_path()}: expected an "impl" name and '
            f'a "key_data" array, got {type(impl).__name__} and {type(key_data).__name__}.'
        )
    try:
        return jax.random.wrap_key_data(jax.numpy.asarray(key_data), impl=impl)
    except Exception as e:  # JAX's error types for a bad impl or shape vary by version
        raise InvalidCheckpointError(
            f'Corrupt PRNG key record at path {current_path()}: {type(e).__name__}: {e}'
        ) from e


# Real checkpoints nest a few levels per module; msgpack itself allows far deeper
# nesting, which would exhaust Python's recursion (and the path tuples grow with depth).
_MAX_DEPTH = 200


def _decode(x: Any, depth: int = 0) -> Any:
    if depth > _MAX_DEPTH:
        raise InvalidCheckpointError(
            f'The checkpoint nests containers more than {_MAX_DEPTH} deep at path '
            f'{current_path()[:200]}...; it is corrupt or crafted.'
        )
    if isinstance(x, _msgpack().ExtType):
        return _decode_ext(x)
    if isinstance(x, dict):
        out = {}
        for k, v in x.items():
            with _enter(k):
                out[k] = _decode(v, depth + 1)
        if out.get(_CHUNKED_MARKER) is True:
            return _unchunk(out)
        if out.get(_KEY_MARKER) is True:
            return _restore_key(out)
        return out
    if isinstance(x, list):
        out = []
        for i, v in enumerate(x):
            with _enter(str(i)):
                out.append(_decode(v, depth + 1))
        return out
    return x


def msgpack_restore(encoded_pytree: bytes) -> Any:
    """Restores a state dict from msgpack bytes written by ``msgpack_serialize`` or Flax.

    Raises:
        InvalidCheckpointError: the bytes are truncated, corrupt or not msgpack.
    """
    if not isinstance(encoded_pytree, (bytes, bytearray, memoryview)):
        raise TypeError(
            f'msgpack_restore expects bytes, got {type(encoded_pytree).__name__}; read the '
            "checkpoint file in binary mode ('rb')."
        )
    try:
        # Maps may have int keys (a state dict of a dict keyed by ints), as Flax reads them.
        raw = _msgpack().unpackb(encoded_pytree, raw=False, strict_map_key=False)
    except Exception as e:
        raise InvalidCheckpointError(
            f'Could not decode {len(encoded_pytree)} bytes of checkpoint: '
            f'{type(e).__name__}: {e}. The bytes are truncated or corrupt, or are not a '
            'msgpack checkpoint written by linen or Flax.'
        ) from e
    token = _PATH.set(('.',))
    try:
        return _decode(raw)
    finally:
        _PATH.reset(token)


def to_bytes(target: Any) -> bytes:
    """Serializes ``target`` (any tree ``to_state_dict`` knows) to msgpack bytes."""
    return msgpack_serialize(to_state_dict(target), in_place=True)


def from_bytes(target: Any, encoded_bytes: bytes) -> Any:
    """Restores msgpack bytes into the structure of ``target``.

    Raises:
        InvalidCheckpointError: corrupt bytes, or a checkpoint that does not fit ``target``.
    """
    return from_state_dict(target, msgpack_restore(encoded_bytes))
