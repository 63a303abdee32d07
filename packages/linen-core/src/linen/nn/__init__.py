"""``import linen.nn as nn``: the flax.linen-equivalent surface of what is installed.

Every name comes from a plugin's ``linen_exports`` hook (first-party
distributions register exactly like third-party ones). Values given as
``"module:attr"`` strings are imported on first access. A first-party name whose
distribution is not installed raises an ``AttributeError`` that names the
distribution and the ``pip install`` that brings it.

One misbehaving plugin costs only its own names: if its ``linen_exports`` raises
or returns something that is not a mapping of names, or it exports a name a
first-party distribution owns, a :class:`~linen.core.errors.PluginWarning` names
its entry point and distribution (the original exception chained as
``__cause__``) and the rest of ``linen.nn`` works. A name two third-party plugins
both export is withheld: reading it raises
:class:`~linen.core.errors.PluginExportConflictError`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, NamedTuple

from linen.core import _bus
from linen.core.errors import (
    PluginError,
    PluginExportConflictError,
    PluginExportsTypeError,
    PluginHookError,
    PluginLoadError,
)
from linen.core.errors import PluginWarning as PluginWarning
from linen.nn._hints import FIRST_PARTY, PROVIDED_BY, install_command

__all__: list[str] = []

_lock = threading.RLock()


class _Entry(NamedTuple):
    value: Any  # the object, or a "module:attr" string
    plugin: str
    distribution: str


class _Table(NamedTuple):
    generation: int
    entries: dict[str, _Entry]
    # name two third-party plugins export -> the error reading it raises
    conflicts: dict[str, PluginExportConflictError]
    # plugins whose linen_exports failed: their names are unknown, hence absent
    failed: list[PluginError]


_table: _Table | None = None
_resolved: set[str] = set()
# messages already warned for the current plugin set (a problem warns once per set)
_warned: set[str] = set()


def _exports_of(impl) -> Mapping[str, Any]:
    plugin_name, dist = _bus.plugin_distribution(impl.plugin)
    exports = _bus.call_single(impl, 'linen_exports')
    if exports is None:
        return {}
    if not isinstance(exports, Mapping):
        raise PluginExportsTypeError(
            plugin_name, dist, f'returned a {type(exports).__name__} ({exports!r:.80})'
        )
    bad = [k for k in exports if not isinstance(k, str) or not k.isidentifier()]
    if bad:
        raise PluginExportsTypeError(
            plugin_name, dist, f'returned keys that are not identifiers: {bad[:5]!r}'
        )
    return exports


def _build_table(generation: int) -> tuple[_Table, list[tuple[PluginError, BaseException]]]:
    """The export table, and the problems to warn about (error, original exception)."""
    pm = _bus.get_plugin_manager()
    entries: dict[str, _Entry] = {}
    conflicts: dict[str, PluginExportConflictError] = {}
    failed: list[PluginError] = []
    problems: list[tuple[PluginError, BaseException]] = []
    # First-party plugins first: their names are the ones a clash cannot take away.
    impls = sorted(
        reversed(pm.hook.linen_exports.get_hookimpls()),
        key=lambda impl: _bus.plugin_distribution(impl.plugin)[1] not in FIRST_PARTY,
    )
    for impl in impls:
        plugin_name, dist = _bus.plugin_distribution(impl.plugin)
        try:
            exports = _exports_of(impl)
        except PluginHookError as err:
            failed.append(err)
            problems.append((err, err.__cause__ or err))
            continue
        except PluginExportsTypeError as err:
            failed.append(err)
            problems.append((err, err))
            continue
        for name, value in exports.items():
            withheld = conflicts.get(name)
            if withheld is not None:
                if dist not in withheld.distributions:
                    # Every contributor is named, so the advice resolves the clash.
                    err = PluginExportConflictError(name, *withheld.distributions, dist)
                    conflicts[name] = err
                    problems.append((err, err))
                continue
            previous = entries.get(name)
            if previous is None or previous.distribution == dist:
                entries[name] = _Entry(value, plugin_name, dist)
                continue
            err = PluginExportConflictError(name, previous.distribution, dist)
            if previous.distribution in FIRST_PARTY:
                # The first-party name stays; only the newcomer loses it.
                problems.append((err, err))
            else:
                del entries[name]
                conflicts[name] = err
                problems.append((err, err))
    return _Table(generation, entries, conflicts, failed), problems


def _get_table() -> _Table:
    global _table
    # The manager first, outside our lock: loading it calls our _drop_cache
    # listener, and a thread holding our lock must never wait for the bus's.
    _bus.get_plugin_manager()
    generation = _bus.plugins_generation()
    table = _table
    if table is not None and table.generation == generation:
        return table
    with _lock:
        if _table is not None and _table.generation == generation:
            return _table
        table, problems = _build_table(generation)
        _table = table
        fresh = [(err, cause) for err, cause in problems if str(err) not in _warned]
        _warned.clear()
        _warned.update(str(err) for err, _ in problems)
    # Warned after the table is stored: under -W error the warning raises, and the
    # next access must still find a working table.
    for err, cause in fresh:
        _bus.warn_plugin_problem(err, cause=cause, stacklevel=3)
    return table


def _drop_cache() -> None:
    global _table
    with _lock:
        _table = None
        g = globals()
        for name in _resolved:
            g.pop(name, None)
        _resolved.clear()


_bus.on_plugins_changed(_drop_cache)


def __getattr__(name: str) -> Any:
    if name.startswith('__'):
        raise AttributeError(name)
    table = _get_table()
    entry = table.entries.get(name)
    if entry is None:
        conflict = table.conflicts.get(name)
        if conflict is not None:
            raise conflict
        message, cause = _missing_message(name, table)
        raise AttributeError(message) from cause
    value = entry.value
    if isinstance(value, str):
        try:
            value = _bus.import_string(value)
        except Exception as exc:
            # The plugin named something that does not import: its fault, so its name.
            raise PluginLoadError(entry.plugin, entry.distribution, exc) from exc
    with _lock:
        if _table is table:  # not if the plugin set changed meanwhile
            globals()[name] = value
            _resolved.add(name)
    return value


def __dir__() -> list[str]:
    return sorted(_get_table().entries)


def _missing_message(name: str, table: _Table) -> tuple[str, PluginError | None]:
    """Why ``name`` is absent, and the plugin failure to chain (if one may be the cause)."""
    failures = [*_bus.load_errors(), *table.failed]
    dist = PROVIDED_BY.get(name)
    if dist is not None:
        broken = [e for e in failures if getattr(e, 'distribution', None) == dist]
        if broken:
            return f'linen.nn.{name} is provided by {dist}, which failed: {broken[0]}', broken[0]
        return (
            f'linen.nn.{name} is provided by the distribution {dist}, which is not '
            f'installed (or is disabled by LINEN_DISABLE_PLUGINS). Install it with: '
            f'{install_command(dist)}'
        ), None
    if not failures:
        return f"module 'linen.nn' has no attribute {name!r}", None
    hint = '; '.join(str(e) for e in failures)
    message = (
        f"module 'linen.nn' has no attribute {name!r}. It may belong to a plugin that "
        f'failed: {hint}'
    )
    return message, failures[0]
