"""The default profiling-name rule (Flax's ``_derive_profiling_name``).

``module.name`` if set, else the class name; plus ``.method`` unless the method
is ``__call__``. ``functools.partial`` is seen through to the function's name.
It is the ``trylast`` implementation of linen-module's ``linen_profiling_name``
hook (:func:`linen_profiling_name`, which the plugin module re-exports), so a
user's plugin that returns a string wins and one that returns ``None`` falls
through to it.
"""

from __future__ import annotations

import functools
from typing import Any

from linen.core.hookspecs import hookimpl

__all__ = [
    'cached_profiling_name',
    'default_profiling_name',
    'derive_profiling_name',
    'linen_profiling_name',
    'method_function_name',
    'method_key',
    'only_default_rule',
]


def method_function_name(method: Any, method_name: str | None = None) -> str:
    """The name of ``method``'s function, seeing through ``functools.partial``.

    >>> import functools
    >>> def encode(self, x, scale): ...
    >>> method_function_name(functools.partial(functools.partial(encode, scale=2)))
    'encode'
    """
    function = method
    while isinstance(function, functools.partial):
        function = function.func
    function = getattr(function, '__func__', function)  # bound methods
    name = getattr(function, '__name__', None)
    return name or method_name or '__call__'


def default_profiling_name(module: Any, method_name: str | None, method: Any) -> str:
    """``'Dense_0'``, ``'proj'`` or ``'Encoder.encode'`` for a module and method.

    >>> class Encoder:
    ...     name = None
    ...     def encode(self, x): ...
    >>> default_profiling_name(Encoder(), 'encode', Encoder.encode)
    'Encoder.encode'
    """
    function_name = (
        method_function_name(method, method_name)
        if method is not None
        else (method_name or '__call__')
    )
    suffix = '' if function_name == '__call__' else f'.{function_name}'
    module_name = getattr(module, 'name', None) or type(module).__name__
    return f'{module_name}{suffix}'


@hookimpl(trylast=True)
def linen_profiling_name(module, method_name, method):
    """The default rule: instance name or class name, plus ``.method`` unless ``__call__``."""
    return default_profiling_name(module, method_name, method)


# (type, instance name, method name, method key) -> label, for the default rule
# only: it reads nothing else of the instance, so the key determines the label. A
# user's rule may read anything (``module.path``, a field), so while one is
# installed nothing is cached.
_cache: dict[tuple, str] = {}


def method_key(method: Any) -> Any:
    """What the default label reads of ``method``, as a cache key.

    A function or bound method is keyed by its code object and name, never by the
    object itself: a method made per call (the closure a lifted transform of a
    function runs, a ``method=lambda ...`` given to every ``apply``) would otherwise
    add an entry per call and keep its closure (arrays, or tracers past their
    trace) alive. The code also tells ``@named_call``'s wrapper apart. Anything
    else (a ``functools.partial``) is keyed by itself.

    >>> def per_call():
    ...     return lambda module, x: x
    >>> method_key(per_call()) == method_key(per_call())
    True
    """
    try:
        return method.__code__, method.__name__
    except AttributeError:
        return method


def only_default_rule() -> bool:
    """Whether the default rule is the only ``linen_profiling_name`` implementation.

    Asked when the dispatcher builds its wrapper chain, which it rebuilds
    whenever plugins change, so per-call labelling never asks.
    """
    try:
        from linen.core import get_plugin_manager
    except ImportError:
        return True
    hook = getattr(get_plugin_manager().hook, 'linen_profiling_name', None)
    if hook is None:
        return True
    return all(impl.function is linen_profiling_name for impl in hook.get_hookimpls())


def cached_profiling_name(module: Any, method_name: str | None, method: Any) -> str:
    """The default rule's label, cached; only valid while :func:`only_default_rule`."""
    key = (type(module), getattr(module, 'name', None), method_name, method_key(method))
    try:
        return _cache[key]
    except KeyError:
        name = default_profiling_name(module, method_name, method)
        _cache[key] = name
        return name
    except TypeError:  # an unhashable method object
        return default_profiling_name(module, method_name, method)


def derive_profiling_name(module: Any, method_name: str | None, method: Any) -> str:
    """The label for a call: linen-module's name hook, or the default rule without it.

    Asks the hook for every call, so a rule reading any attribute of the
    instance (its path, a field) gets each instance's own label.
    """
    try:
        from linen.module import derive_profiling_name as hook_name
    except ImportError:
        name = None
    else:
        name = hook_name(module, method_name, method)
    if name is None:
        name = default_profiling_name(module, method_name, method)
    return name
