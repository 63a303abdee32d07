"""The scope internals that sibling distributions may rely on (the lifting contract).

This module is linen-core's public contract with its sibling distributions:
linen-module (which binds Modules to scopes) and linen-transforms (which moves a
scope's variables and rng streams across a JAX transform boundary and rebuilds a
scope on the other side). A third-party package that lifts its own transform uses
the same names.

Stability: the implementation behind these names (``_scope.py``, ``_rng.py``,
``_filters.py``) may change in any release. The names listed in ``__all__`` keep
their signature and meaning for a whole minor series of linen-core (``0.1.x``);
changing or removing one needs a new minor version and a CHANGELOG entry, because
siblings declare ``linen-core>=0.1,<0.2``. Nothing outside this module, the
``linen.core`` package namespace, ``linen.core.plugin_bus`` and the other
underscore-free modules is part of that promise.

>>> from linen.core import apply
>>> from linen.core.lifting import binding_variables, scope_collection
>>> def model(scope):
...     return scope_collection(scope.push('dense'), 'params'), binding_variables(scope)
>>> apply(model)({'params': {'dense': {'w': 1.0}}})
({'w': 1.0}, {'params': {'dense': {'w': 1.0}}})
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import Any

import jax
import jax.interpreters.partial_eval as pe

from linen.core._cacheable import cacheable as cacheable
from linen.core._filters import Filter as Filter
from linen.core._filters import in_filter
from linen.core._rng import RngStream as RngStream
from linen.core._rng import path_hash as path_hash
from linen.core._scope import Scope, _Root, _thaw

__all__ = [
    'Filter',
    'RngStream',
    'binding_variables',
    'cacheable',
    'derivatives',
    'detached_scope',
    'outer_derivative',
    'in_nested_derivative',
    'nested_derivative',
    'path_hash',
    'scope_collection',
    'thaw',
    'writable_scope_collection',
]


# The tracer of a trace that stages operations into a program (jit, make_jaxpr).
_STAGING_TRACER = getattr(pe, 'DynamicJaxprTracer', None)


def derivatives(x: Any) -> int:
    """How many differentiations value ``x`` carries: the ``jvp``/``grad`` tracers in its
    chain, looked through ``vmap``'s, down to a staging trace or a concrete value."""
    count = 0
    while isinstance(x, jax.core.Tracer) and type(x) is not _STAGING_TRACER:
        inner = getattr(x, 'primal', None)
        if inner is None:
            inner = getattr(x, 'val', None)
            if inner is None:
                break
        else:
            count += 1
        x = inner
    return count


def outer_derivative(x: Any) -> Any:
    """The outermost differentiation value ``x`` carries, as an identity to compare
    with ``is`` (the trace of its outermost ``jvp``/``grad`` tracer, looked through
    ``vmap``'s), or None when it carries none. Two values carrying one derivative each
    come from the same differentiation exactly when these are the same object (a
    gradient penalty's input and the parameters differentiated around it do not)."""
    while isinstance(x, jax.core.Tracer) and type(x) is not _STAGING_TRACER:
        if getattr(x, 'primal', None) is not None:
            # JAX keeps a tracer's trace on `_trace`; a JAX without it answers with
            # the tracer itself, so values never compare the same (runs stay exact).
            return getattr(x, '_trace', x)
        x = getattr(x, 'val', None)
    return None


_NESTED_DERIVATIVE: ContextVar[bool] = ContextVar('linen_nested_derivative', default=False)


@contextlib.contextmanager
def nested_derivative() -> Iterator[None]:
    """Marks the code run inside as a derivative's function under another derivative.

    A lifted ``vjp``/``jvp`` whose inputs already carry a derivative (a gradient of a
    gradient) runs its function under this; layers then emit their operations one by
    one rather than as cached staged calls, whose derivatives of derivatives JAX may
    sum in another order (see linen-layers' ``_staged.py``).
    """
    token = _NESTED_DERIVATIVE.set(True)
    try:
        yield
    finally:
        _NESTED_DERIVATIVE.reset(token)


def in_nested_derivative() -> bool:
    """Whether the code runs under :func:`nested_derivative`."""
    return _NESTED_DERIVATIVE.get()


def thaw(tree: Any) -> Any:
    """A plain-dict deep copy of nested mappings (``FrozenDict`` included); leaves are shared.

    >>> from linen.core import freeze
    >>> thaw(freeze({'a': {'b': 1}}))
    {'a': {'b': 1}}
    """
    return _thaw(tree)


def binding_variables(scope: Scope) -> dict[str, Any]:
    """Every collection of the binding ``scope`` belongs to, keyed by collection name.

    This is the binding's own dict (not a copy), shared by all of its scopes; its
    values are the whole collections, rooted at the binding, not at ``scope``.
    Treat it as read-only: write through :func:`writable_scope_collection`.
    """
    return scope._root.variables


def scope_collection(scope: Scope, collection: str) -> Any:
    """The subtree of ``collection`` at ``scope``'s path, or ``None`` when there is none."""
    return scope._collection(collection)


def writable_scope_collection(scope: Scope, collection: str) -> dict[str, Any]:
    """The plain dict of ``collection`` at ``scope``'s path, made (and thawed) on the way.

    Updating it in place updates the binding. The caller checks mutability first
    (``scope.is_mutable_collection(collection)``).
    """
    return scope._mutable_collection(collection)


def detached_scope(
    *,
    name: str | None,
    path: tuple[str, ...],
    variables: Mapping[str, Any],
    mutable: Filter,
    rngs: dict[str, Any],
    rng_counters: dict[Any, Any],
    flags: Mapping[str, Any],
) -> Scope:
    """A root scope that stands for the scope at ``path`` inside a transform.

    ``variables`` hold the subtrees below ``path`` (as gathered with
    :func:`scope_collection`); the new scope reports ``path`` as its own, so rng
    derivation and error messages are those of the outer scope. Mutable
    collections are thawed into fresh dicts; immutable ones are shared.

    Args:
      name: the outer scope's name.
      path: the outer scope's path.
      variables: ``{collection: subtree below path}``.
      mutable: the filter of collections the inner scope may change.
      rngs: ``{stream: RngStream-like}``; anything with ``child``, ``with_key`` and
        ``derive`` works.
      rng_counters: the outer scope's counters (shared, so numbering continues).
      flags: the outer scope's flags.

    Returns:
      The inner root scope.
    """
    own = {col: (_thaw(v) if in_filter(mutable, col) else v) for col, v in variables.items()}
    root = _Root(own, mutable, offset=len(path))
    root.lifted = True
    inner = Scope(root, name=name, rngs=rngs, rng_counters=rng_counters, flags=flags)
    inner.path = path
    return inner
