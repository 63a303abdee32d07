"""Root scopes: ``bind``, ``apply``, ``init`` and ``lazy_init``.

``bind`` checks the variables it is given and makes a root
:class:`~linen.core.scope.Scope` over them (mutable collections copied, never mutated
in place). ``apply``, ``init`` and ``lazy_init`` turn a function of a scope into a
function of variables: they run it on such a root and hand back what it returned and,
where asked, the collections it changed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import jax

from linen.core._filters import Filter, in_filter
from linen.core._lazy_init import NEEDS_VALUES, any_abstract, partial_init, zeros_for_abstract
from linen.core._rng import RngStream, check_rngs
from linen.core._scope import Scope, _check_variables, _Root, _thaw
from linen.core.config import config

__all__ = ['bind', 'apply', 'init', 'lazy_init']


def bind(
    variables: Mapping[str, Any],
    rngs: Any = None,
    mutable: Filter = False,
    flags: Mapping[str, Any] | None = None,
) -> Scope:
    """A root scope over ``variables``; mutable collections are copied, never mutated in place."""
    _check_variables(variables)
    if rngs is None:
        streams = {}
    else:
        streams = {k: RngStream(v) for k, v in check_rngs(rngs, 'apply').items()}
    if mutable is False:  # (apply's default: nothing is copied)
        own = dict(variables)
    else:
        own = {col: (_thaw(v) if in_filter(mutable, col) else v) for col, v in variables.items()}
    flags = dict(flags or {})
    # Read the global flag once per binding, not per parameter: config.update
    # then takes effect on the next init/apply. Only a switched-off check is written
    # down: by default `scope.flags` holds what Flax's does.
    if 'shape_check' not in flags and not config.linen_shape_check:
        flags['shape_check'] = False
    return Scope(_Root(own, mutable), rngs=streams, flags=flags)


def apply(fn: Callable, mutable: Filter = False, flags: Mapping[str, Any] | None = None):
    """Functionalise ``fn(scope, *args)``: ``apply(fn)(variables, *args, rngs=None)``.

    Returns ``y``, or ``(y, mutated_variables)`` when ``mutable`` is not False.
    """

    @functools.wraps(fn)
    def wrapper(variables, *args, rngs=None, **kwargs):
        root = bind(variables, rngs=rngs, mutable=mutable, flags=flags)
        try:
            y = fn(root, *args, **kwargs)
            if mutable is not False:
                return y, root.mutable_variables(copy=False)
            return y
        finally:
            root.invalidate()

    return wrapper


def init(fn: Callable, mutable: Filter = True, flags: Mapping[str, Any] | None = None):
    """Functionalise ``fn(scope, *args)``: ``init(fn)(rngs, *args)`` returns ``(y, variables)``."""

    @functools.wraps(fn)
    def wrapper(rngs, *args, **kwargs):
        rngs = check_rngs(rngs)
        return apply(fn, mutable=mutable, flags=flags)({}, *args, rngs=rngs, **kwargs)

    return wrapper


def lazy_init(fn: Callable, mutable: Filter = True, flags: Mapping[str, Any] | None = None):
    """Like :func:`init`, but runs only the work the variables depend on.

    ``lazy_init(fn)(rngs, *args)`` returns the same (concrete) variables as
    ``init(fn)(rngs, *args)[1]``, with zeros in place of the arguments given as
    ``jax.ShapeDtypeStruct`` (Flax's rule since 0.12.9). Where no variable depends on
    their value, the forward computation on them is never run. Where one does, or
    Python code reads one (``if x.sum() > 0``), ``fn`` runs again as ``init`` on the
    zeros, so its Python side effects happen twice; with the flag
    ``linen_strict_lazy_init`` it raises :class:`~linen.core.errors.LazyInitError`
    (or JAX's error for the read) instead, as Flax 0.12.8 did. Under
    ``jax.disable_jit`` it always runs as ``init`` on the zeros, as Flax's does.
    Its scopes carry the flag ``lazy_init`` (``scope.flags['lazy_init'] is True``):
    the initializers run op by op, and a transform that would compile part of the
    function (trace reuse) leaves it alone, as it would round differently.
    """
    flags = {**(flags or {}), 'lazy_init': True}

    def wrapper(rngs, *args, **kwargs):
        def variables(rngs, *args, **kwargs):
            return init(fn, mutable=mutable, flags=flags)(rngs, *args, **kwargs)[1]

        # Under jax.disable_jit everything runs op by op anyway: straight to the zeros
        # (Flax's definition), where an nn.cond on a concrete predicate runs one branch.
        if config.linen_strict_lazy_init or not jax.config.jax_disable_jit:
            try:
                return partial_init(variables, rngs, *args, **kwargs)
            except NEEDS_VALUES:
                # (without an abstract argument, a second run would meet the same error)
                if config.linen_strict_lazy_init or not any_abstract((rngs, args, kwargs)):
                    raise
        # (outside the handler: an error of the second run is not chained to the first)
        (rngs, *args), kwargs = zeros_for_abstract(((rngs, *args), kwargs))
        return variables(rngs, *args, **kwargs)

    return wrapper
