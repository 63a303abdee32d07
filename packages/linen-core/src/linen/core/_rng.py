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

from linen.core.errors import InvalidRngError

__all__ = ['RngStream', 'fold_in_path', 'path_hash', 'is_valid_rng', 'check_rngs']


def _item_bytes(item: str | int) -> bytes:
    if isinstance(item, str):
        return item.encode('utf-8')
    if isinstance(item, int):
        return item.to_bytes((item.bit_length() + 7) // 8, byteorder='big')
    raise TypeError(f'rng path items are str or int, got {item!r}')


def path_hash(items: tuple[str | int, ...]) -> int:
    """The unsigned 32-bit integer folded into the key for ``items``."""
    digest = hashlib.sha1(b''.join(map(_item_bytes, items))).digest()
    return int.from_bytes(digest[:4], byteorder='big')


def fold_in_path(key: Any, items: tuple[str | int, ...]) -> Any:
    """Fold a path into ``key`` by the rule above."""
    if not items:
        return key
    return jax.random.fold_in(key, np.uint32(path_hash(items)))


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

    def __repr__(self) -> str:
        return f'RngStream(path={self.path})'


def is_valid_rng(rng: Any) -> bool:
    """A typed key array (``jax.random.key``) or a raw uint32 key (``PRNGKey``)."""
    dtype = getattr(rng, 'dtype', None)
    if dtype is None:
        return False
    if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        return True
    shape = getattr(rng, 'shape', ())
    return dtype == np.uint32 and len(shape) >= 1 and shape[-1] in (2, 4)


def check_rngs(rngs: Any) -> dict[str, Any]:
    """Normalise ``rngs`` (a key or a mapping of stream name -> key) to a dict."""
    if rngs is None:
        return {}
    if hasattr(rngs, 'items'):
        out = {}
        for name, rng in rngs.items():
            if not is_valid_rng(rng):
                raise InvalidRngError(_bad_rng_message(rng, f'rngs[{name!r}]'))
            out[name] = rng
        return out
    if is_valid_rng(rngs):
        return {'params': rngs}
    raise InvalidRngError(_bad_rng_message(rngs, 'rngs'))


def _bad_rng_message(rng: Any, where: str) -> str:
    return (
        f'{where} should be a PRNG key made with jax.random.key(seed) or '
        f'jax.random.PRNGKey(seed), or a dict of stream name -> key; got '
        f'{type(rng).__name__} {getattr(rng, "dtype", "")}{getattr(rng, "shape", "")}.'
    )
