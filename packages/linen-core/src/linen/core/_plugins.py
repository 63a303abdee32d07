"""The plugin bus: one pluggy ``PluginManager`` for the whole ``linen`` namespace.

Plugins are modules named by entry points in group ``linen``. First-party
distributions register exactly like a third party: nothing here imports them.
``LINEN_DISABLE_PLUGINS`` (comma list of entry-point names) blocks plugins.

Failures never pass silently: a plugin that fails to import is recorded as a
:class:`PluginLoadError` naming the plugin and its distribution and raised when
the facade is used (`linen.nn`), and an exception in a hook is re-raised as a
:class:`PluginHookError` with the same information.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable
from importlib import metadata
from typing import Any

import pluggy

from linen.core import hookspecs
from linen.core.errors import PluginError, PluginHookError, PluginLoadError

__all__ = [
    'ENTRY_POINT_GROUP',
    'get_plugin_manager',
    'register',
    'unregister',
    'call_hook',
    'call_single',
    'import_string',
    'plugin_distribution',
    'load_errors',
    'on_plugins_changed',
    'plugins_generation',
]

ENTRY_POINT_GROUP = 'linen'

_lock = threading.RLock()
_pm: pluggy.PluginManager | None = None
_load_errors: list[PluginError] = []
# name of a registered plugin -> the distribution that provides it
_distributions: dict[str, str] = {}
_listeners: list[Callable[[], None]] = []
# Bumped whenever the set of plugins changes; caches (the dispatcher's wrapper
# chain, the facade's export table) compare against it.
_generation = 0


def plugins_generation() -> int:
    """A number that changes whenever a plugin is registered or unregistered."""
    return _generation


def on_plugins_changed(listener: Callable[[], None]) -> None:
    """Call ``listener()`` after every registration change (caches drop themselves)."""
    _listeners.append(listener)


def _changed() -> None:
    global _generation
    _generation += 1
    for listener in list(_listeners):
        listener()


def _disabled_names() -> set[str]:
    raw = os.environ.get('LINEN_DISABLE_PLUGINS', '')
    return {name.strip() for name in raw.split(',') if name.strip()}


def _entry_points():
    return metadata.entry_points(group=ENTRY_POINT_GROUP)


def _on_register(plugin: Any, pm: pluggy.PluginManager) -> None:
    # A plugin may bring hook specs of its own; add them before pluggy validates
    # its implementations against specs it does not know yet.
    add = getattr(plugin, 'linen_add_hookspecs', None)
    if add is not None:
        add(plugin_manager=pm)


def get_plugin_manager() -> pluggy.PluginManager:
    """The process-wide plugin manager, loading entry points on first use."""
    pm = _pm
    if pm is not None:
        return pm
    with _lock:
        if _pm is None:
            _load()
        return _pm  # type: ignore[return-value]


def _load() -> None:
    global _pm
    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    _pm = pm
    disabled = _disabled_names()
    for ep in sorted(_entry_points(), key=lambda e: e.name):
        if ep.name in disabled:
            continue
        dist = ep.dist.name if getattr(ep, 'dist', None) is not None else '<unknown>'
        try:
            plugin = ep.load()
        except Exception as exc:
            _load_errors.append(PluginLoadError(ep.name, dist, exc))
            continue
        _register(plugin, ep.name, dist)
    _changed()


def _register(plugin: Any, name: str, distribution: str) -> None:
    pm = _pm
    assert pm is not None
    if pm.is_registered(plugin) or pm.get_plugin(name) is not None:
        return
    try:
        _on_register(plugin, pm)
        pm.register(plugin, name=name)
    except Exception as exc:
        _load_errors.append(PluginLoadError(name, distribution, exc))
        return
    _distributions[name] = distribution


def register(plugin: Any, name: str | None = None, distribution: str = '<runtime>') -> str:
    """Register a plugin object at run time (tests, notebooks); returns its name."""
    get_plugin_manager()
    name = name or getattr(plugin, '__name__', None) or f'plugin-{id(plugin)}'
    with _lock:
        if name in _disabled_names():
            return name
        before = len(_load_errors)
        _register(plugin, name, distribution)
        if len(_load_errors) > before:
            raise _load_errors.pop()
        _changed()
    return name


def unregister(name_or_plugin: Any) -> None:
    """Remove a plugin registered with :func:`register` (by name or object)."""
    pm = get_plugin_manager()
    with _lock:
        if isinstance(name_or_plugin, str):
            plugin = pm.get_plugin(name_or_plugin)
            name = name_or_plugin
        else:
            plugin = name_or_plugin
            name = pm.get_name(plugin)
        if plugin is None:
            return
        pm.unregister(plugin)
        _distributions.pop(name, None)
        _changed()


def plugin_distribution(plugin: Any) -> tuple[str, str]:
    """``(plugin name, distribution name)`` of a registered plugin object."""
    pm = get_plugin_manager()
    name = pm.get_name(plugin) or repr(plugin)
    return name, _distributions.get(name, '<unknown>')


def load_errors() -> list[PluginError]:
    """Plugins that failed to load, as errors naming plugin and distribution."""
    get_plugin_manager()
    return list(_load_errors)


def call_hook(hook_name: str, **kwargs: Any) -> Any:
    """Call a hook; an exception in an implementation names its plugin and distribution.

    pluggy does not say which implementation raised, so on failure the
    implementations are replayed one by one to find it (failures are rare; the
    normal path is a plain hook call).
    """
    pm = get_plugin_manager()
    hook = getattr(pm.hook, hook_name)
    try:
        return hook(**kwargs)
    except PluginError:
        raise
    except Exception as exc:
        culprit = _find_raising_impl(hook, kwargs)
        if culprit is None:
            raise
        name, dist = plugin_distribution(culprit)
        raise PluginHookError(name, dist, hook_name, exc) from exc


def call_single(impl: Any, hook_name: str, **kwargs: Any) -> Any:
    """Call one hook implementation; a failure names its plugin and distribution."""
    try:
        return impl.function(**{k: kwargs[k] for k in impl.argnames if k in kwargs})
    except Exception as exc:
        name, dist = plugin_distribution(impl.plugin)
        raise PluginHookError(name, dist, hook_name, exc) from exc


def _find_raising_impl(hook, kwargs) -> Any:
    for impl in hook.get_hookimpls():
        if impl.hookwrapper or getattr(impl, 'wrapper', False):
            continue
        args = {k: kwargs[k] for k in impl.argnames if k in kwargs}
        try:
            impl.function(**args)
        except Exception:
            return impl.plugin
    return None


def import_string(target: str) -> Any:
    """Resolve ``"package.module:attr.sub"`` to the object."""
    module_name, _, attr = target.partition(':')
    obj: Any = importlib.import_module(module_name)
    for part in filter(None, attr.split('.')):
        obj = getattr(obj, part)
    return obj
