"""``import linen.nn as nn``: the flax.linen-equivalent surface of what is installed.

Every name comes from a plugin's ``linen_exports`` hook (first-party
distributions register exactly like third-party ones). Values given as
``"module:attr"`` strings are imported on first access. A first-party name whose
distribution is not installed raises an ``AttributeError`` that names the
distribution and the ``pip install`` that brings it.
"""

from __future__ import annotations

import threading
import warnings
from typing import Any

from linen.core import _plugins
from linen.core.errors import PluginExportConflictError, PluginLoadError
from linen.nn._hints import PROVIDED_BY

__all__: list[str] = []

_lock = threading.RLock()
# name -> (value or "module:attr", plugin name, distribution)
_table: dict[str, tuple[Any, str, str]] | None = None
_resolved: set[str] = set()
_warned = False


class LinenPluginWarning(UserWarning):
    """A plugin failed to load; the rest of ``linen.nn`` still works."""


def _build_table() -> dict[str, tuple[Any, str, str]]:
    pm = _plugins.get_plugin_manager()
    table: dict[str, tuple[Any, str, str]] = {}
    for impl in reversed(pm.hook.linen_exports.get_hookimpls()):
        plugin_name, dist = _plugins.plugin_distribution(impl.plugin)
        exports = _plugins.call_single(impl, 'linen_exports')
        for name, value in (exports or {}).items():
            if name in table and table[name][2] != dist:
                raise PluginExportConflictError(name, table[name][2], dist)
            table[name] = (value, plugin_name, dist)
    return table


def _get_table() -> dict[str, tuple[Any, str, str]]:
    global _table, _warned
    table = _table
    if table is not None:
        return table
    with _lock:
        if _table is None:
            _table = _build_table()
            if not _warned:
                _warned = True
                for err in _plugins.load_errors():
                    warnings.warn(str(err), LinenPluginWarning, stacklevel=3)
        return _table


def _drop_cache() -> None:
    global _table
    with _lock:
        _table = None
        g = globals()
        for name in _resolved:
            g.pop(name, None)
        _resolved.clear()


_plugins.on_plugins_changed(_drop_cache)


def __getattr__(name: str) -> Any:
    if name.startswith('__'):
        raise AttributeError(name)
    entry = _get_table().get(name)
    if entry is None:
        raise AttributeError(_missing_message(name))
    value = entry[0]
    if isinstance(value, str):
        value = _plugins.import_string(value)
    with _lock:
        globals()[name] = value
        _resolved.add(name)
    return value


def __dir__() -> list[str]:
    return sorted(_get_table())


def _missing_message(name: str) -> str:
    dist = PROVIDED_BY.get(name)
    if dist is not None:
        broken = [
            e
            for e in _plugins.load_errors()
            if isinstance(e, PluginLoadError) and e.distribution == dist
        ]
        if broken:
            return f'linen.nn.{name} is provided by {dist}, which failed to load: {broken[0]}'
        extra = dist.removeprefix('linen-')
        return (
            f'linen.nn.{name} is provided by the distribution {dist}, which is not '
            f'installed (or is disabled by LINEN_DISABLE_PLUGINS). Install it with: '
            f'pip install "linen-core[{extra}]"'
        )
    errs = _plugins.load_errors()
    hint = ''
    if errs:
        hint = ' Some plugins failed to load: ' + '; '.join(str(e) for e in errs)
    return f"module 'linen.nn' has no attribute {name!r}.{hint}"
