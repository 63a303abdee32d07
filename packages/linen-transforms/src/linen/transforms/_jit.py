"""Lifted ``jit``.

The compiled function is cached on what decides the trace: the structure of
the scope (path, rng stream paths and counters, mutability, flags), the
module's fields (for module methods), the static arguments, and the method
wrappers active in this context (so toggling profiling labels retraces instead
of leaving stale labels). Variables and rng keys are traced arguments.

Rng streams keep their path-based derivation inside the compiled function, so
``nn.jit`` gives the same parameters for a key as the un-jitted module (Flax's
does not). The rng counters after the call are remembered per cache entry, so
a second call continues counting as the un-jitted code would.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import jax

from linen.core._filters import DenyList, in_filter
from linen.core._rng import RngStream
from linen.core._scope import Scope, _Root, _thaw
from linen.transforms import _pack
from linen.transforms._remat import merge_static, split_static


def _hashable(x: Any) -> Any:
    """A hashable stand-in for filters, flags and counters."""
    if isinstance(x, dict):
        return tuple(sorted(((_hkey(k), _hashable(v)) for k, v in x.items()), key=repr))
    if isinstance(x, (list, tuple)):
        return tuple(_hashable(v) for v in x)
    if isinstance(x, (set, frozenset)):
        return frozenset(x)
    if isinstance(x, DenyList):
        return ('DenyList', _hashable(x.deny))
    return x


def _hkey(k: Any) -> Any:
    return k if isinstance(k, str) else ('child', k[1]) if isinstance(k, tuple) else repr(k)


class _Static:
    """The static part of one lifted-jit call; equal keys share a compiled function."""

    __slots__ = ('key', 'payload', '_hash')

    def __init__(self, key: tuple, payload: dict):
        self.key = key
        self.payload = payload  # not compared: derived from key or irrelevant to the trace
        self._hash = hash(key)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Static) and self.key == other.key


def jit(
    fn: Callable,
    static_argnums: int | Sequence[int] = (),
    static_argnames: str | Sequence[str] = (),
    donate_argnums: int | Sequence[int] = (),
    device: Any = None,
    backend: str | None = None,
    module_key: Callable[[Any], tuple[Any, Any]] | None = None,
) -> Callable:
    """``jax.jit`` of ``fn(scope, *args)`` (or of a module method via ``module_key``).

    ``module_key(extra)`` (internal) maps the caller's extra object to
    ``(hashable key, object handed to fn)``.
    """
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)
    if isinstance(static_argnames, str):
        static_argnames = (static_argnames,)
    if isinstance(donate_argnums, int):
        donate_argnums = (donate_argnums,)
    counters_after: dict[_Static, dict] = {}

    def run(static: _Static, variables, keys, dynamic, dyn_kwargs):
        p = static.payload
        root = _Root(
            {c: (_thaw(v) if in_filter(p['mutable'], c) else v) for c, v in variables.items()},
            p['mutable'],
            offset=len(p['path']),
        )
        counters = copy.deepcopy(p['counters'])
        inner = Scope(
            root,
            p['name'],
            None,
            rngs={n: RngStream(k, p['rng_paths'][n]) for n, k in keys.items()},
            rng_counters=counters,
            flags=p['flags'],
        )
        inner.path = p['path']
        args = merge_static(dynamic, p['static_args'])
        y = fn(p['extra'], inner, *args, **dyn_kwargs, **p['static_kwargs'])
        counters_after[static] = counters
        return y, _pack.inner_mutated(inner, ())[0]

    # Donated positions count the caller's arguments; they live inside `dynamic`.
    compiled = jax.jit(
        run,
        static_argnums=(0,),
        donate_argnums=(3,) if donate_argnums else (),
        device=device,
        backend=backend,
    )

    def wrapper(extra, scope, *args, **kwargs):
        from linen.module._dispatch import active_wrappers

        variables = _pack.gather_variables(scope)
        keys, rng_paths = _pack.rng_keys(scope)
        dynamic, static_args = split_static(args, static_argnums)
        static_kwargs = {k: kwargs.pop(k) for k in static_argnames if k in kwargs}
        extra_key, extra_obj = module_key(extra) if module_key is not None else (None, extra)
        counters = scope.rng_counters
        key = (
            extra_key,
            scope.path,
            _hashable(rng_paths),
            _hashable(counters),
            _hashable(scope._root.mutable),
            _hashable(dict(scope.flags)),
            _hashable(static_args),
            _hashable(static_kwargs),
            active_wrappers(),
        )
        payload = {
            'extra': extra_obj,
            'path': scope.path,
            'name': scope.name,
            'rng_paths': rng_paths,
            'counters': counters,
            'mutable': scope._root.mutable,
            'flags': dict(scope.flags),
            'static_args': static_args,
            'static_kwargs': static_kwargs,
        }
        try:
            static = _Static(key, payload)
        except TypeError:
            # Unhashable module fields or static arguments: trace every call.
            static = _Static((id(payload),), payload)
        y, mutated = compiled(static, variables, keys, dynamic, kwargs)
        after = counters_after.get(static)
        if after is not None:
            counters.clear()
            counters.update(copy.deepcopy(after))
        _pack.write_back(scope, (mutated,))
        return y

    return wrapper
