"""The functional ``lift.jit`` with Flax's calling convention.

Flax's ``flax.core.lift.jit(fn)`` returns ``jitted(scope_tree, hash_key, *args)``:
the argument after the scope(s) is a hashable key that is part of the compile
cache key and is handed on, ``fn(scope_tree, hash_key, *args)`` (Flax's module
transforms pass a module's fingerprint there). ``static_argnums`` count the scope
as 0 and skip the hash key, so for ``jitted(scope, key, x, n)`` the ``n`` is 2.
Inside, each rng stream restarts at its key with the scope's path dropped
(``LazyRng.clear_suffix``), so the same ``jit`` compiles once for every path.

The compiled function is made once per ``lift.jit`` call and cached on what
decides a trace: the hash key, the scope tree's structure, each scope's
mutability, flags, rng stream names and rng counters (so the keys drawn follow
the counters, as without ``jit``). Variables and keys are traced arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import jax

from linen.core.lifting import RngStream, detached_scope
from linen.transforms import _pack
from linen.transforms._jit import _hashable


class _Key:
    """The static part of one call: compared by ``key``; ``payload`` rides along."""

    __slots__ = ('key', 'payload', '_hash')

    def __init__(self, key: tuple, payload: dict):
        self.key = key
        self.payload = payload
        self._hash = hash(key)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Key) and self.key == other.key


def _ints(x: int | Iterable[int]) -> tuple[int, ...]:
    return (x,) if isinstance(x, int) else tuple(x)


def jit(
    fn: Callable,
    variables: Any = True,
    rngs: Any = True,
    static_argnums: int | Iterable[int] = (),
    static_argnames: str | Iterable[str] = (),
    donate_argnums: int | Iterable[int] = (),
    device: Any = None,
    backend: str | None = None,
) -> Callable:
    """``jax.jit`` of ``fn(scope, hash_key, *args)``; call as ``jitted(scope, hash_key, *args)``.

    ``scope`` may be a pytree of scopes. ``hash_key`` must be hashable; calls with
    equal keys (and equal static arguments) share one compilation. As in Flax, ``fn``
    sees (and changes) only the collections ``variables`` admits and only the rng
    streams ``rngs`` admits.
    """
    # run(static, variables, keys, *args): argument i of the caller's count (the
    # scope is 0, the hash key is not counted) sits at position i + 2.
    static_pos = (0,) + tuple(i + 2 for i in _ints(static_argnums) if i > 0)
    donate_pos = tuple(i + 2 for i in _ints(donate_argnums) if i > 0)
    counters_after: dict[_Key, list] = {}

    def run(static: _Key, variables, keys, *args, **kwargs):
        p = static.payload
        counters = _pack.copy_counters(p['counters'])
        inner = [
            detached_scope(
                name=name,
                path=path,
                variables=v,
                mutable=mutable,
                rngs={n: RngStream(k) for n, k in key_dict.items()},
                rng_counters=c,
                flags=flags,
            )
            for name, path, v, mutable, key_dict, c, flags in zip(
                p['names'], p['paths'], variables, p['mutable'], keys, counters, p['flags']
            )
        ]
        y = fn(jax.tree_util.tree_unflatten(p['treedef'], inner), p['hash_key'], *args, **kwargs)
        counters_after[static] = counters
        return y, [_pack.inner_mutated(s, ())[0] for s in inner]

    compiled = jax.jit(
        run,
        static_argnums=static_pos,
        static_argnames=static_argnames,
        donate_argnums=donate_pos,
        device=device,
        backend=backend,
    )

    def wrapper(scope_tree, hash_key, *args, **kwargs):
        state = _pack.ScopeTree(scope_tree)
        scopes = state.scopes
        visible, keys, mutable = state.admitted(variables, rngs)
        keys = state.keys if keys is None else keys
        payload = {
            'hash_key': hash_key,
            'treedef': state.treedef,
            'names': [s.name for s in scopes],
            'paths': [s.path for s in scopes],
            'mutable': [s.mutable if mutable is None else mutable for s in scopes],
            'flags': [dict(s.flags) for s in scopes],
            'counters': [s.rng_counters for s in scopes],
        }
        key = (
            hash_key,
            state.treedef,
            tuple(len(s.path) for s in scopes),
            tuple(_hashable(m) for m in payload['mutable']),
            tuple(_hashable(dict(s.flags)) for s in scopes),
            tuple(tuple(sorted(k)) for k in keys),
            tuple(_hashable(s.rng_counters) for s in scopes),
        )
        static = _Key(key, payload)
        y, mutated = compiled(static, visible, keys, *args, **kwargs)
        after = counters_after.get(static)
        if after is not None:
            for scope, counts in zip(scopes, after):
                scope.rng_counters.clear()
                scope.rng_counters.update(_pack.copy_counters(counts))
        state.write_back([(m,) for m in mutated])
        return y

    return wrapper
