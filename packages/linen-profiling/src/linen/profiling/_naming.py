"""The default profiling-name rule (Flax's ``_derive_profiling_name``).

``module.name`` if set, else the class name; plus ``.method`` unless the method
is ``__call__``. ``functools.partial`` is seen through to the function's name.
It is the ``trylast`` implementation of linen-module's ``linen_profiling_name``
hook, so a user's plugin that returns a string wins and one that returns
``None`` falls through to it.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ['default_profiling_name', 'derive_profiling_name', 'method_function_name']


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


# (type, instance name, method name, method) -> label. A label depends on what
# the name hook's plugins return, so the cache empties when plugins change.
_cache: dict[tuple, str] = {}
_cache_hooked = False


def _clear_cache() -> None:
    _cache.clear()


def derive_profiling_name(module: Any, method_name: str | None, method: Any) -> str:
    """The label for a call: linen-module's name hook, or the default rule without it."""
    global _cache_hooked
    key = (type(module), getattr(module, 'name', None), method_name, method)
    try:
        return _cache[key]
    except KeyError:
        pass
    except TypeError:  # an unhashable method object: no caching
        key = None
    try:
        from linen.module import derive_profiling_name as hook_name
    except ImportError:
        name = None
    else:
        if not _cache_hooked:
            from linen.core.plugin_bus import on_plugins_changed

            on_plugins_changed(_clear_cache)
            _cache_hooked = True
        name = hook_name(module, method_name, method)
    if name is None:
        name = default_profiling_name(module, method_name, method)
    if key is not None:
        _cache[key] = name
    return name
