"""``nn.jit`` over Module classes and methods: the class cache and what keys a trace.

The surface (``_api.jit``) hands the target here; the scope-level lift is
``_jit.jit_over_scopes``. A jitted class is made once per (class, methods, options) and kept,
so ``nn.jit(Dense)(...)`` inside a compact method, run on every call, finds the
same compiled functions.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax

from linen.core import errors
from linen.module import Module
from linen.module.dispatch import (
    call_at_boundary,
    call_wrapped_method,
    ensure_setup,
    field_names,
    in_compact_method,
    wrappers_are_relative,
)
from linen.transforms import _args, _jit
from linen.transforms._module_lift import (
    _check_returns,
    _mark,
    check_methods,
    check_setup,
    inner_clone,
    reserve_callers_names,
)


def flax_argnums_to_call(argnums: int | Sequence[int]) -> tuple[int, ...]:
    """``nn.jit``'s Flax-counted indices (the module is 0) as indices of the call's
    arguments. Flax keeps only the positive ones: 0 (the module) and negative
    indices mark nothing there, and so here."""
    if isinstance(argnums, int):
        argnums = (argnums,)
    return tuple(i - 1 for i in argnums if i > 0)


def jit_class(target: type, methods: Sequence[str] | None, options: dict) -> type:
    """``Jit<Target>``, whose ``methods`` (default ``__call__``) are compiled; cached."""
    if not (isinstance(target, type) and issubclass(target, Module)):
        raise errors.TransformTargetError(target)
    check_methods(methods)
    options = {**options, 'module_key': _module_key}
    cache_key = (target, tuple(methods or ('__call__',)), _options_key(options))
    try:
        cached = _JIT_CLASSES.get(cache_key)
    except TypeError:  # unhashable options (e.g. a device object): no caching
        cache_key, cached = None, None
    if cached is not None:
        return cached
    attrs: dict[str, Any] = {'__module__': target.__module__}
    for method_name in methods or ('__call__',):
        orig = getattr(target, method_name)
        attrs[method_name] = _jit_method(
            orig,
            method_name,
            lambda clone, _, *a, orig=orig, **k: orig(clone, *a, **k),
            options,
            base=target,
        )
    jitted_cls = type(f'Jit{target.__name__}', (target,), attrs)
    if cache_key is not None:
        _JIT_CLASSES[cache_key] = jitted_cls
    return jitted_cls


def jit_method(fn: Callable, options: dict) -> Callable:
    """``@nn.jit`` on a method (or a function of a module): compiled per call site."""
    options = {**options, 'module_key': _module_key}
    is_compact = bool(getattr(fn, 'compact', False))
    name = getattr(fn, '__name__', 'method')

    def runner(clone, compact, *a, **k):
        # As in Flax, the function runs in compact mode when called from a compact method.
        return call_wrapped_method(clone, fn, name, is_compact or compact, a, k)

    return _jit_method(fn, name, runner, options)


# Strong references: a weak cache would drop the class between two applies (types sit in
# reference cycles, freed at gc time) and retrace at random. One entry per (class, options).
_JIT_CLASSES: dict[tuple, type] = {}


def _options_key(options: dict) -> tuple:
    return tuple(
        (k, tuple(v) if isinstance(v, list) else v)
        for k, v in sorted(options.items())
        if k != 'module_key'
    )


def _module_key(extra, labelled: bool):
    """The part of a call that decides its trace: the module's class and fields, whether
    it runs in compact mode, and the Modules and Variables lifted from the arguments.

    The instance name joins only while a method wrapper is active that may do
    something per instance inside the trace. Profiling labels do not: the
    instance's own label is pushed outside the compiled function (see
    ``_jit_method``) and the labels inside are relative to it, so N instances of
    a class compile once.
    """
    module, compact, objects, lifted_fields = extra
    # Lifted field modules count by their slot (their own key is in `objects`).
    fields = tuple(
        lifted_fields[f] if f in lifted_fields else _field_key(module.__dict__[f])
        for f in field_names(type(module))
    )
    name = module.name if labelled and not wrappers_are_relative() else None
    key = (type(module), name, _jit._hashable(fields), compact, _args.cache_key(objects))
    return key, extra


def _is_module(x: Any) -> bool:
    return isinstance(x, Module)


def _field_key(value: Any) -> Any:
    """A field's part of the cache key: a submodule the module adopted (bound, so not
    hashable) counts by its class, name and own fields, so equal modules built anew
    on every apply share one trace (as in Flax)."""
    if isinstance(value, Module):
        if value.scope is None:
            return value
        fields = tuple(_field_key(value.__dict__[f]) for f in field_names(type(value)))
        return ('Module', type(value), value.name, fields)
    if isinstance(value, (list, tuple, Mapping)) and value:
        leaves = jax.tree_util.tree_leaves(value, is_leaf=_is_module)
        if any(isinstance(x, Module) for x in leaves):
            return jax.tree_util.tree_map(_field_key, value, is_leaf=_is_module)
    return value


def _jit_method(
    orig: Callable, method_name: str, runner: Callable, options: dict, base: type | None = None
) -> Callable:
    """``orig`` compiled over the module's scopes; ``runner(clone, compact, *a, **k)``
    runs it inside on the :func:`inner_clone` (of ``base``, the class ``nn.jit`` was
    applied to, when given)."""

    def body(extra, inner_scope, *args, **kwargs):
        module, compact, objects, fields = extra
        updates = {}
        if objects:
            inner_scope, others = inner_scope[0], inner_scope[1:]
            args, kwargs = _args.restore(args, kwargs, objects, others)
            updates = _args.restore_fields(fields, objects, others)
        clone = inner_clone(module, inner_scope, updates, base)
        if compact and module.scope.reservations:
            # The names the compact method gave out so far stay taken (as in Flax).
            reserve_callers_names(clone, module.scope.reservations)
        y = runner(clone, compact, *args, **kwargs)
        return _check_returns(y, method_name)

    jitted = _jit.jit_over_scopes(body, **options)
    # What the wrappers see as the method (the dispatcher's inner function).
    method = getattr(orig, 'inner_fun', orig)
    unbound_jitted: list = []

    @functools.wraps(orig)
    def lifted(self, *args, **kwargs):
        scope = self.scope
        if scope is None:
            if getattr(orig, 'compact', False):
                raise errors.CallCompactUnboundModuleError(type(self).__name__, method_name)
            # As in Flax, a method of an unbound module (`@nn.jit` over
            # `init_with_output`) compiles as a function of the module (a static
            # argument: equal modules share the compiled function).
            if not unbound_jitted:
                unbound_jitted.append(_jit_unbound(orig, options))
            return unbound_jitted[0](self, *args, **kwargs)
        # Bound Modules and Variables among the arguments are lifted too (Flax's
        # multi-scope lifting); they leave the arguments as empty pytrees.
        check_setup(self)
        # As in Flax (whose jit cache key reads the module's attributes), the module
        # itself is set up before the boundary: setup runs here once per call, and
        # once more per trace on the clone inside.
        ensure_setup(self)
        args, kwargs, objects = _args.extract(args, kwargs)
        fields = _args.extract_fields(self, objects)
        scopes = (scope, *_args.scopes_of(objects)) if objects else scope
        extra = (self, in_compact_method(self), objects, fields)
        # The instance's label (what depends on it) goes outside the compiled function.
        return call_at_boundary(
            self, method_name, method, lambda *a, **k: jitted(extra, scopes, *a, **k), args, kwargs
        )

    return _mark(lifted)


def _jit_unbound(fn: Callable, options: dict) -> Callable:
    """``jax.jit`` of ``fn(module, *args)``, the module static; ``static_argnums`` and
    ``donate_argnums`` count the call's arguments (as on a bound module)."""

    def shift(argnums):
        argnums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
        return tuple(i + 1 if i >= 0 else i for i in argnums)

    placement = {k: options[k] for k in ('device', 'backend') if options[k] is not None}
    return jax.jit(
        fn,
        static_argnums=(0, *shift(options['static_argnums'])),
        static_argnames=options['static_argnames'],
        donate_argnums=shift(options['donate_argnums']),
        **placement,
    )
