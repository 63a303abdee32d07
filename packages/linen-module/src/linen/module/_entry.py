"""The entry points that run a Module against variables.

``apply``, ``init``, ``init_with_output``, ``lazy_init`` and ``module_paths`` are
methods of :class:`~linen.module.Module` (its class body binds these functions) and
the functional forms of ``_functional.py`` share their helpers. Each entry point
binds a root scope (or has ``linen.core`` make one), clones the module onto it and
calls the method; an exception leaves with linen's own frames taken out of its
traceback, so it ends at the user's calls, as Flax's does.

``Module`` is set by :mod:`linen.module._module` once the class exists (it imports
this module; these functions run only after both are loaded).
"""

from __future__ import annotations

import functools
import inspect
import types
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from linen.core import DenyList, Scope, errors, union_filters
from linen.core import bind as core_bind
from linen.core import init as core_init
from linen.core import lazy_init as core_lazy_init
from linen.core.lifting import Filter
from linen.core.tracebacks import hide_linen_frames
from linen.module import _capture
from linen.module._paths import module_paths as _collect_paths


class _NotLoaded:
    """Stands for ``Module`` until ``linen.module._module`` defines it."""


Module: type = _NotLoaded

# class -> the function `apply` runs by default (its own or an inherited __call__)
_CALL_METHODS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def apply(
    self,
    variables: Mapping,
    *args,
    rngs: Any = None,
    method: Any = None,
    mutable: Filter = False,
    capture_intermediates: bool | Callable = False,
    **kwargs,
):
    """Run ``method`` (default ``__call__``) with ``variables``.

    Returns the output, or ``(output, mutated_variables)`` when ``mutable`` is not False.
    """
    try:
        if not isinstance(self, Module):  # `MyModule.apply(variables, ...)` on the class
            raise errors.InvalidInstanceModuleError()
        # The hot path of eager use: no wrapper functions built per call.
        fn = resolve_method(self, method)
        if capture_intermediates:
            mutable = union_filters(mutable, 'intermediates') if mutable is not True else True
        root = bind_root(self, variables, rngs, mutable)
        try:
            module = self.clone(parent=root, _deep_clone=True)
            if capture_intermediates:
                with _capture.capturing(capture_intermediates):
                    y = fn(module, *args, **kwargs)
            else:
                y = fn(module, *args, **kwargs)
            if mutable is not False:
                # (the root is invalidated below: its own dicts can be handed out)
                return y, root.mutable_variables(copy=False)
            return y
        finally:
            root.invalidate()
    except Exception as e:  # (free when nothing raises)
        # The traceback ends at the user's calls, as Flax's; a bare raise adds no
        # entry for this frame.
        hide_linen_frames(e)
        raise


def init_with_output(
    self,
    rngs: Any,
    *args,
    method: Any = None,
    mutable: Filter = DenyList('intermediates'),
    capture_intermediates: bool | Callable = False,
    **kwargs,
):
    """``(output, variables)`` of running ``method`` with fresh variables."""
    try:
        if not isinstance(self, Module):  # `MyModule.init(key, ...)` on the class
            raise errors.InvalidInstanceModuleError()
        if capture_intermediates:
            mutable = union_filters(mutable, 'intermediates') if mutable is not True else True
        fn = scope_fn(self, method, capture_intermediates)
        return _initialize(self, core_init, fn, rngs, mutable, args, kwargs)
    except Exception as e:
        hide_linen_frames(e)
        raise


def init(
    self,
    rngs: Any,
    *args,
    method: Any = None,
    mutable: Filter = DenyList('intermediates'),
    capture_intermediates: bool | Callable = False,
    **kwargs,
) -> dict:
    """Fresh variables for this module: ``{collection: {...}}``."""
    try:
        if not isinstance(self, Module):
            raise errors.InvalidInstanceModuleError()
        return self.init_with_output(
            rngs,
            *args,
            method=method,
            mutable=mutable,
            capture_intermediates=capture_intermediates,
            **kwargs,
        )[1]
    except Exception as e:
        hide_linen_frames(e)
        raise


def lazy_init(
    self,
    rngs: Any,
    *args,
    method: Any = None,
    mutable: Filter = DenyList('intermediates'),
    **kwargs,
):
    """Variables' shapes and dtypes only (inputs may be ``jax.ShapeDtypeStruct``)."""
    try:
        if not isinstance(self, Module):
            raise errors.InvalidInstanceModuleError()
        fn = scope_fn(self, method, False)
        return _initialize(self, core_lazy_init, fn, rngs, mutable, args, kwargs)
    except Exception as e:
        hide_linen_frames(e)
        raise


def module_paths(
    self,
    rngs: Any,
    *args,
    show_repeated: bool = False,
    mutable: Filter = DenyList('intermediates'),
    **kwargs,
) -> dict[str, Any]:
    """``{path: unbound copy}`` of the Modules that run in ``init(rngs, *args)``.

    Runs under ``jax.eval_shape`` (no FLOPs, no memory); the root's path is
    ``''``. ``show_repeated`` is accepted for Flax's signature: a path maps to
    one Module either way.

    >>> import jax, jax.numpy as jnp, linen.nn as nn
    >>> class Foo(nn.Module):
    ...     @nn.compact
    ...     def __call__(self, x):
    ...         return nn.Dense(2)(nn.Dense(4)(x))
    >>> paths = Foo().module_paths(jax.random.key(0), jnp.ones((1, 3)))
    >>> {p: type(m).__name__ for p, m in sorted(paths.items())}
    {'': 'Foo', 'Dense_0': 'Dense', 'Dense_1': 'Dense'}
    """
    del show_repeated
    return _collect_paths(self, rngs, *args, mutable=mutable, **kwargs)


# ------------------------------------------------------------------ helpers


def resolve_method(module: Any, method: Any) -> Callable:
    """The function ``apply(method=...)`` calls with the bound module first."""
    if method is None:
        call = _CALL_METHODS.get(type(module))
        if call is None:
            for klass in type(module).__mro__:
                if '__call__' in klass.__dict__:
                    call = _CALL_METHODS[type(module)] = klass.__dict__['__call__']
                    break
            else:
                raise errors.ApplyModuleMissingCallError(type(module).__name__)
        return call
    if isinstance(method, str):
        attr = getattr(type(module), method, None)
        if isinstance(attr, types.FunctionType):
            return attr
        # Flax looks the name up on the instance: a missing name raises its
        # AttributeError, a submodule field runs that submodule.
        value = getattr(module, method)
        if isinstance(value, Module):
            return functools.partial(_call_attribute, method)
        if not callable(value):
            raise errors.ApplyModuleMethodNotCallableError(
                type(module).__name__, method, type(value)
            )
        method = value
    if inspect.ismethod(method) and isinstance(method.__self__, Module):
        return method.__func__
    if callable(method) and _takes_the_module(method):
        return method
    raise errors.ApplyModuleInvalidMethodError(method, type(module).__name__)


def bind_root(module: Any, variables: Mapping, rngs: Any, mutable: Filter) -> Scope:
    """A root scope over ``variables``; an rng error names ``module``'s class."""
    try:
        return core_bind(variables, rngs=rngs, mutable=mutable)
    except errors.InvalidRngError as e:
        raise _for_module(e, module, rngs) from None


def scope_fn(module: Any, method: Any, capture_intermediates: Any) -> Callable:
    """``scope_fn(scope, *args)``: ``method`` run on a clone of ``module`` bound to ``scope``."""
    fn = resolve_method(module, method)

    def run(scope: Scope, *args, **kwargs):
        bound = module.clone(parent=scope, _deep_clone=True)
        if capture_intermediates:
            with _capture.capturing(capture_intermediates):
                return fn(bound, *args, **kwargs)
        return fn(bound, *args, **kwargs)

    return run


def _initialize(module: Any, initializer, fn, rngs, mutable, args, kwargs):
    """``initializer`` (core ``init`` or ``lazy_init``) run on ``fn``; an rng error
    names the module's class."""
    try:
        return initializer(fn, mutable=mutable, flags={'initializing': True})(rngs, *args, **kwargs)
    except errors.InvalidRngError as e:
        raise _for_module(e, module, rngs) from None


def _for_module(error: errors.InvalidRngError, module: Any, rngs: Any) -> Exception:
    """``error`` as a Module method reports it: naming the class when ``rngs`` is no key."""
    if error.hint and error.rngs is rngs:
        return error.for_module(type(module).__name__)
    return error


def _call_attribute(name: str, module: Any, *args: Any, **kwargs: Any) -> Any:
    """``apply(method='sub')`` for a submodule ``sub``: call it on the bound module."""
    return getattr(module, name)(*args, **kwargs)


def _takes_the_module(fn: Callable) -> bool:
    """Whether ``fn`` can take the module as its first argument (Flax rejects ``lambda: x``)."""
    code = getattr(fn, '__code__', None)
    if code is None:
        return True  # a partial, a callable object: let the call decide
    return code.co_argcount > 0 or bool(code.co_flags & inspect.CO_VARARGS)
