"""The plugin bus: one pluggy ``PluginManager`` for the whole ``linen`` namespace.

Plugins are modules named by entry points in group ``linen``. First-party
distributions register exactly like a third party: nothing here imports them.
``LINEN_DISABLE_PLUGINS`` (comma list of entry-point or distribution names)
blocks plugins.

Failures never pass silently, and one plugin's failure costs only that plugin: a
plugin that fails to import is recorded as a :class:`PluginLoadError` naming the
entry point and its distribution (with the original exception as ``__cause__``)
and shown as a :class:`PluginWarning`; a function named ``linen_*`` that is no
hook (a misspelling) gives a :class:`PluginHookNameWarning`; an exception in a
hook is re-raised as a :class:`PluginHookError` with the same information.

The manager is published only once every entry point is loaded, so another
thread never sees a half-loaded set of plugins.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import inspect
import os
import threading
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import pluggy

from linen.core import hookspecs
from linen.core._entry_points import Found, entry_points
from linen.core.errors import (
    PluginError,
    PluginHookError,
    PluginHookNameWarning,
    PluginLoadError,
    PluginWarning,
)

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
    'warn_plugin_problem',
]

ENTRY_POINT_GROUP = 'linen'

_lock = threading.RLock()
_pm: pluggy.PluginManager | None = None
# The manager being filled by _load; only the loading thread (which holds _lock)
# can see it, when a plugin module asks for the manager while it is imported.
_loading: pluggy.PluginManager | None = None
_load_errors: list[PluginError] = []
# name of a registered plugin -> the distribution that provides it: its name, or
# the entry point's Distribution until a message needs the name (reading it parses
# the distribution's metadata file, a cost every import would pay otherwise)
_distributions: dict[str, Any] = {}
_listeners: list[Callable[[], None]] = []
# Bumped whenever the set of plugins changes; caches (the dispatcher's wrapper
# chain, the facade's export table) compare against it.
_generation = 0


def plugins_generation() -> int:
    """A number that changes whenever a plugin is registered or unregistered."""
    return _generation


def on_plugins_changed(listener: Callable[[], None]) -> Callable[[], None]:
    """Call ``listener()`` after every registration change (caches drop themselves).

    Returns a function that removes the listener again; a listener that outlives
    its owner (a test, a notebook cell) should be removed with it.
    """
    _listeners.append(listener)

    def remove() -> None:
        with contextlib.suppress(ValueError):
            _listeners.remove(listener)

    return remove


def _changed() -> None:
    global _generation
    _generation += 1
    failed: list[tuple[Callable[[], None], Exception]] = []
    for listener in list(_listeners):
        # A raising listener is its owner's bug; it must not keep the other
        # listeners (the caches that must drop themselves) from running.
        try:
            listener()
        except Exception as exc:
            failed.append((listener, exc))
    for listener, exc in failed:
        warn_plugin_problem(
            f'plugin-change listener {listener!r} raised {type(exc).__name__}: {exc}; '
            'the registration itself went through. Remove a listener whose owner is '
            'gone with the function on_plugins_changed returned.',
            cause=exc,
            stacklevel=3,
        )


def _disabled_names() -> set[str]:
    raw = os.environ.get('LINEN_DISABLE_PLUGINS', '')
    return {name.strip() for name in raw.split(',') if name.strip()}


def _is_disabled(name: str, distribution: str, disabled: set[str]) -> bool:
    # Messages show both names, so the variable accepts either.
    return name in disabled or distribution in disabled


def _entry_points() -> list[Found]:
    return entry_points(ENTRY_POINT_GROUP)


def warn_plugin_problem(
    error: PluginError | str,
    category: type[Warning] = PluginWarning,
    cause: BaseException | None = None,
    stacklevel: int = 2,
) -> None:
    """Warn about a misbehaving plugin, chaining the original exception as ``__cause__``.

    Under ``-W error`` the warning is raised as an exception whose chain shows the
    plugin's own traceback.
    """
    warning = category(str(error))
    cause = cause if cause is not None else getattr(error, '__cause__', None)
    warning.__cause__ = cause
    warnings.warn(warning, stacklevel=stacklevel + 1)


def get_plugin_manager() -> pluggy.PluginManager:
    """The process-wide plugin manager, loading entry points on first use."""
    pm = _pm
    if pm is not None:
        return pm
    with _lock:
        if _pm is not None:
            return _pm
        if _loading is not None:
            # Re-entered from a plugin module being imported by _load (same thread).
            return _loading
        problems = _load()
    for problem in problems:
        warn_plugin_problem(problem.error, problem.category, stacklevel=2)
    return _pm  # type: ignore[return-value]


class _Problem(NamedTuple):
    """A warning to emit once the manager is published (not while holding the lock)."""

    error: PluginError
    category: type[Warning] = PluginWarning


def _load() -> list[_Problem]:
    global _pm, _loading
    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    # Historic: pluggy replays the call for each plugin as it is registered, so a
    # plugin's own specs are added before its other hooks are checked against them.
    pm.hook.linen_add_hookspecs.call_historic(kwargs={'plugin_manager': pm})
    _loading = pm
    problems: list[_Problem] = []
    try:
        disabled = _disabled_names()
        loaded: list[tuple[Any, str, Any]] = []
        for ep, dist in sorted(_entry_points(), key=lambda found: found.entry_point.name):
            dist = dist or '<unknown>'
            if disabled and _is_disabled(ep.name, _dist_name(dist), disabled):
                continue
            try:
                plugin = ep.load()
            except Exception as exc:
                err = PluginLoadError(ep.name, _dist_name(dist), exc)
                err.__cause__ = exc
                _load_errors.append(err)
                problems.append(_Problem(err))
                continue
            err = _register(pm, plugin, ep.name, dist)
            if err is not None:
                _load_errors.append(err)
                problems.append(_Problem(err))
            else:
                loaded.append((plugin, ep.name, dist))
        # Specs come from plugins (module's dispatcher hooks), so names are checked
        # only once every plugin has added its own.
        for plugin, name, dist in loaded:
            problems.extend(_unknown_hook_names(pm, plugin, name, dist))
    finally:
        _loading = None
    # Published last: a thread that finds _pm set sees every entry point loaded.
    _pm = pm
    _changed()
    return problems


def _dist_name(distribution: Any) -> str:
    """A distribution's name, from its name or its ``importlib.metadata.Distribution``."""
    if isinstance(distribution, str):
        return distribution
    # ``Distribution.name`` parses the whole METADATA file with the email parser on
    # every read; the ``Name:`` header is among the first lines.
    text = distribution.read_text('METADATA') or distribution.read_text('PKG-INFO') or ''
    for line in text.partition('\n\n')[0].splitlines():
        if line[:5].lower() == 'name:':
            return line[5:].strip()
    return distribution.name


def _unknown_hook_names(
    pm: pluggy.PluginManager, plugin: Any, name: str, distribution: Any
) -> list[_Problem]:
    """A ``linen_*`` function of a plugin that matches no hook spec (``linen_export``)."""
    problems = []
    for attr in sorted(dir(plugin)):
        if not attr.startswith(hookspecs.PROJECT_NAME + '_'):
            continue
        value = getattr(plugin, attr, None)
        if not inspect.isroutine(value):
            continue
        marker = getattr(value, hookspecs.PROJECT_NAME + '_impl', None) or {}
        if marker.get('optionalhook'):
            continue  # declared as a hook of a distribution that may be absent
        caller = getattr(pm.hook, attr, None)
        if caller is not None and caller.spec is not None:
            continue
        known = sorted(
            n
            for n in dir(pm.hook)
            if not n.startswith('_') and getattr(getattr(pm.hook, n), 'spec', None)
        )
        close = [k for k in known if _similar(attr, k)]
        hint = f' Did you mean {close[0]!r}?' if close else f' Known hooks: {", ".join(known)}.'
        err = PluginError(
            f'linen plugin "{name}" (entry point "{name}" of distribution '
            f'"{_dist_name(distribution)}") '
            f'defines {attr}, which is not a linen hook, so it is never called.{hint}'
        )
        problems.append(_Problem(err, PluginHookNameWarning))
    return problems


def _similar(a: str, b: str) -> bool:
    return difflib.SequenceMatcher(None, a, b).ratio() >= 0.8


def _register(pm: pluggy.PluginManager, plugin: Any, name: str, distribution: Any):
    """Register ``plugin``; return the :class:`PluginLoadError` if pluggy refuses it."""
    if pm.is_registered(plugin) or pm.get_plugin(name) is not None:
        return None
    try:
        pm.register(plugin, name=name)
    except Exception as exc:
        err = PluginLoadError(name, _dist_name(distribution), exc)
        err.__cause__ = exc
        return err
    _distributions[name] = distribution
    return None


def register(plugin: Any, name: str | None = None, distribution: str = '<runtime>') -> str:
    """Register a plugin object at run time (tests, notebooks); returns its name.

    Raises :class:`PluginLoadError` if pluggy refuses it (a hook with a wrong
    signature); warns :class:`PluginHookNameWarning` for a ``linen_*`` function
    that is no hook.
    """
    pm = get_plugin_manager()
    name = str(name or getattr(plugin, '__name__', None) or f'plugin-{id(plugin)}')
    with _lock:
        if _is_disabled(name, distribution, _disabled_names()):
            return name
        err = _register(pm, plugin, name, distribution)
        if err is not None:
            raise err
        problems = _unknown_hook_names(pm, plugin, name, distribution)
        _changed()
    for problem in problems:
        warn_plugin_problem(problem.error, problem.category)
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
        if plugin is None or name is None:
            return
        pm.unregister(plugin)
        _distributions.pop(name, None)
        _changed()


def plugin_distribution(plugin: Any) -> tuple[str, str]:
    """``(plugin name, distribution name)`` of a registered plugin object."""
    pm = get_plugin_manager()
    name = pm.get_name(plugin) or repr(plugin)
    distribution = _distributions.get(name, '<unknown>')
    if not isinstance(distribution, str):
        # Read once: the export table asks for every plugin's name more than once.
        distribution = _distributions[name] = _dist_name(distribution)
    return name, distribution


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
