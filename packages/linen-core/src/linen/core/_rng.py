"""PRNG streams with Flax's derivation rule.

A stream is a root key plus the tuple of names below the scope where the key was
given. The n-th ``make_rng`` in a scope (n from 1, per scope and stream) folds
``path + (n,)`` into the root key once: SHA-1 over the concatenated items
(strings as UTF-8, ints as big-endian bytes of minimal length, no separator),
the first four digest bytes read big-endian as an unsigned 32-bit integer, then
``jax.random.fold_in``. An empty tuple leaves the key unchanged.
"""

from __future__ import annotations

import hashlib
from typing import Any

import jax
import numpy as np

from linen.core._lazy_init import EAGER_LAZY_INIT, concrete_call
from linen.core._staged_init import STAGING_TRACER, staged
from linen.core.errors import InvalidRngError

_FIX_SEPARATOR: list[bool] = [False]


def _set_fix_separator(name: str, value: Any) -> None:
    # Read on every hash; a list cell costs less than a config attribute lookup.
    if name == 'linen_fix_rng_separator':
        _FIX_SEPARATOR[0] = bool(value)


__all__ = ['LazyRng', 'RngStream', 'fold_in_path', 'path_hash', 'is_valid_rng', 'check_rngs']


def _item_bytes(item: str | int) -> bytes:
    if isinstance(item, str):
        return item.encode('utf-8')
    if isinstance(item, int):
        return item.to_bytes((item.bit_length() + 7) // 8, byteorder='big')
    raise TypeError(f'rng path items are str or int, got {item!r}')


# (separator flag, items) -> hash: every init hashes each parameter's path, and
# a traced init (jit, eval_shape, lazy_init) hashes the same paths again.
_HASHES: dict[tuple, int] = {}
_HASHES_LIMIT = 65536


def path_hash(items: tuple[str | int, ...]) -> int:
    """The unsigned 32-bit integer folded into the key for ``items``."""
    key = (_FIX_SEPARATOR[0], items)
    try:
        cached = _HASHES.get(key)
    except TypeError:  # an unhashable item: _item_bytes raises the typed error below
        cached = None
    if cached is not None:
        return cached
    value = _path_hash(items)
    if len(_HASHES) >= _HASHES_LIMIT:
        _HASHES.clear()
    _HASHES[key] = value
    return value


def _path_hash(items: tuple[str | int, ...]) -> int:
    if _FIX_SEPARATOR[0]:
        # flax_fix_rng_separator: a NUL before each item, so ('ab', 'c') and
        # ('a', 'bc') no longer hash alike (Flax's opt-in fix; off by default).
        data = b''.join(b'\x00' + _item_bytes(item) for item in items)
    else:
        data = b''.join(map(_item_bytes, items))
    digest = hashlib.sha1(data).digest()
    return int.from_bytes(digest[:4], byteorder='big')


def _fold_in(key: Any, data: Any, impl: str) -> Any:
    """``jax.random.fold_in(key, data)``; ``impl`` (static) only keys the caches below."""
    del impl
    return jax.random.fold_in(key, data)


# `jax.random.fold_in` called eagerly runs ~400 Python calls (key checks, the data's
# conversion, the primitive's impl); compiled, it is one call on JAX's C++ fast path.
# Same threefry arithmetic, so the same bits.
#
# A raw uint32 key is read with the default PRNG implementation of the moment it is
# traced, and jit keys its cache on shapes: rbg's and unsafe_rbg's raw keys are both
# uint32[4]. The default implementation's name, passed as a static argument, keeps one
# trace per implementation, so a key after a switch is never folded by the other one.
_fold_in_compiled = jax.jit(_fold_in, static_argnums=2)

# Traced by a staging trace (jit, make_jaxpr), the plain call redoes those checks and
# the conversion for every parameter. Jitted and inlined while tracing, it is traced
# once per key type and its equations (`random_fold_in` of the key and the hash as a
# literal, with `random_wrap`/`random_unwrap` around it for a raw uint32 key) are
# copied into the caller's program: the equations the plain call emits. Other tracers
# (vmap, grad) keep the plain call.
_fold_in_inlined = staged(_fold_in, static_argnums=(2,))


def fold_in_path(key: Any, items: tuple[str | int, ...]) -> Any:
    """Fold a path into ``key`` by the rule above."""
    if not items:
        return key
    data = np.uint32(path_hash(items))
    if isinstance(key, jax.core.Tracer):
        if STAGING_TRACER is not None and type(key) is STAGING_TRACER:
            return _fold_in_inlined(key, data, jax.config.jax_default_prng_impl)
        return jax.random.fold_in(key, data)
    if EAGER_LAZY_INIT.get():  # an eager lazy_init: the root key is concrete, fold off the trace
        return concrete_call(_fold_in_compiled, key, data, jax.config.jax_default_prng_impl)
    return _fold_in_compiled(key, data, jax.config.jax_default_prng_impl)


class RngStream:
    """A root key and the path below it; derived keys are computed on demand."""

    __slots__ = ('key', 'path')

    def __init__(self, key: Any, path: tuple[str | int, ...] = ()):
        self.key = key
        self.path = path

    def child(self, name: str) -> RngStream:
        return RngStream(self.key, self.path + (name,))

    def derive(self, count: int) -> Any:
        return fold_in_path(self.key, self.path + (count,))

    def with_key(self, key: Any) -> RngStream:
        """The same path over another root key (a split of this one, say)."""
        return RngStream(key, self.path)

    # -- Flax's LazyRng spelling ---------------------------------------------------

    @property
    def rng(self) -> Any:
        """The root key (Flax's ``LazyRng.rng``)."""
        return self.key

    @property
    def suffix(self) -> tuple[str | int, ...]:
        """The names folded in on use (Flax's ``LazyRng.suffix``)."""
        return self.path

    @classmethod
    def create(cls, rng: Any, *suffix: str | int) -> RngStream:
        """A stream over ``rng`` (a key or a stream) with ``suffix`` appended."""
        if isinstance(rng, RngStream):
            return RngStream(rng.key, rng.path + suffix)
        return RngStream(rng, suffix)

    def as_jax_rng(self) -> Any:
        """The key this stream stands for: the suffix folded into the root key."""
        return fold_in_path(self.key, self.path)

    def clear_suffix(self) -> RngStream:
        """The root key alone, its pending suffix dropped (as Flax's ``LazyRng``)."""
        return RngStream(self.key, ())

    def __repr__(self) -> str:
        return f'RngStream(path={self.path})'


# Flax calls a key plus a pending path a LazyRng; it is the same thing.
LazyRng = RngStream


def is_valid_rng(rng: Any) -> bool:
    """One PRNG key: a scalar typed key (``jax.random.key``) or raw uint32 key data
    of shape ``(2,)`` or ``(4,)`` (``jax.random.PRNGKey``); a batch of keys is not one."""
    dtype = getattr(rng, 'dtype', None)
    if dtype is None:
        return False
    shape = getattr(rng, 'shape', None)
    if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        return shape == ()
    return dtype == np.uint32 and shape in ((2,), (4,))


def check_rngs(rngs: Any, kind: str = 'init') -> dict[str, Any]:
    """Normalise ``rngs`` (a key or a mapping of stream name -> key) to a dict.

    ``kind`` (``'init'`` or ``'apply'``) chooses the opening sentence of the
    error, Flax's for the same call.
    """
    if rngs is None:
        return {}
    if hasattr(rngs, 'items'):
        out = {}
        for name, rng in rngs.items():
            if not is_valid_rng(rng):
                raise InvalidRngError(_bad_rng_message(rng, f'rngs[{name!r}]', kind))
            out[name] = rng
        return out
    if is_valid_rng(rngs):
        return {'params': rngs}
    raise InvalidRngError(
        _bad_rng_message(rngs, 'rngs', kind), rngs=rngs, hint=_how_to_fix_rng(rngs, 'rngs')
    )


def _bad_rng_message(rng: Any, where: str, kind: str = 'init') -> str:
    # Flax's text first, so Flax-era `match=` patterns keep working.
    if kind == 'apply':
        flax_text = 'The ``rngs`` argument passed to an apply function should be'
    else:
        flax_text = 'First argument passed to an init function should be'
    return (
        f'{flax_text} a ``jax.PRNGKey`` or a dictionary mapping strings to ``jax.PRNGKey``. '
        + _how_to_fix_rng(rng, where)
    )


def _how_to_fix_rng(rng: Any, where: str) -> str:
    return (
        f'{where} should be a PRNG key made with jax.random.key(seed) or '
        f'jax.random.PRNGKey(seed) (one key, not a batch), or a dict of stream name -> key; '
        f'got {_describe(rng)}.'
    )


def _describe(value: Any) -> str:
    dtype = getattr(value, 'dtype', None)
    if dtype is None:
        return type(value).__name__
    return f'{type(value).__name__} {dtype}{getattr(value, "shape", "")}'


def _follow_config() -> None:
    from linen.core.config import config

    _FIX_SEPARATOR[0] = bool(config.linen_fix_rng_separator)
    config.on_change(_set_fix_separator)


_follow_config()
