"""JAX's initializers, staged once per shape while a program is traced.

Traced with a key that is a value of a staging trace (jit, make_jaxpr: a traced
``init``), an initializer such as ``lecun_normal`` runs its dozens of ``jax.random``
and ``jnp`` operations through JAX's Python on every parameter, as in a hand-written
model. Jitted with inlining at trace time, it is traced once per (shape, dtype) and
its cached equations are inserted into the caller's program: the equations of the
direct call, with the caller's profiling labels, so the same compiled program and the
same numbers. Only JAX's own initializers (``jax.nn.initializers``, which
``linen.nn.initializers`` re-exports) are staged: they are pure functions of the key
and their static arguments. Any other callable, keyword arguments, an argument
that is not plain data (``_cacheable.py``; ``constant(array)``, say) run directly;
so does every eager or non-staging call (vmap, grad). Only staged forms are kept, so
the cache never holds a user's callable (a bound method would keep its Module and
the trace of its scope alive).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.interpreters.partial_eval as pe

from linen.core._cacheable import cacheable

__all__ = ['call_initializer']

# JAX 0.12 names trace-time inlining `Inline.JAX_EARLY`; older JAX meant it by `inline=True`.
INLINE_WHILE_TRACING = getattr(getattr(jax, 'Inline', None), 'JAX_EARLY', True)
# The tracer of a trace that stages operations into a program (jit, make_jaxpr).
STAGING_TRACER: Any = getattr(pe, 'DynamicJaxprTracer', None)
# Where JAX defines its initializers, read off two of them (the factories' closures and
# the plain ones are defined in the same module, which ``jax.nn.initializers`` re-exports).
_PURE_MODULES = frozenset(
    {jax.nn.initializers.zeros.__module__, jax.nn.initializers.normal().__module__}
)


def staged(fn: Callable, static_argnums: tuple[int, ...] = ()) -> Callable:
    """``fn`` jitted and inlined into the program that traces it."""
    return jax.jit(fn, static_argnums=static_argnums, inline=INLINE_WHILE_TRACING)


# JAX's initializer -> its staged form. Bounded: a model that makes a fresh
# initializer closure on every call must not grow it forever.
_STAGED: dict[Any, Callable] = {}
_STAGED_LIMIT = 512


def _staged_form(init_fn: Callable, n_args: int) -> Callable | None:
    key = (init_fn, n_args)
    try:
        return _STAGED[key]
    except KeyError:
        pass
    if getattr(init_fn, '__module__', None) not in _PURE_MODULES or not cacheable(init_fn):
        return None
    staged_fn = staged(init_fn, tuple(range(1, n_args + 1)))
    if len(_STAGED) >= _STAGED_LIMIT:
        _STAGED.clear()
    _STAGED[key] = staged_fn
    return staged_fn


def call_initializer(init_fn: Callable, key: Any, init_args: tuple, init_kwargs: dict) -> Any:
    """``init_fn(key, *init_args, **init_kwargs)``, staged where that is exact (above)."""
    if STAGING_TRACER is not None and type(key) is STAGING_TRACER and not init_kwargs:
        try:
            staged_fn = _staged_form(init_fn, len(init_args))
        except TypeError:  # an unhashable initializer: the direct call below
            staged_fn = None
        # The arguments are static: JAX's cache keeps them.
        if staged_fn is not None and cacheable(init_args):
            return staged_fn(key, *init_args)
    return init_fn(key, *init_args, **init_kwargs)
