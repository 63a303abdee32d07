"""``import linen.nn as nn``: the flax.linen-equivalent surface of what is installed.

Every name comes from a plugin's ``linen_exports`` hook (first-party
distributions register exactly like third-party ones). Values given as
``"module:attr"`` strings are imported on first access. A first-party name whose
distribution is not installed raises an ``AttributeError`` that names the
distribution and the ``pip install`` that brings it.

Exported modules import as submodules, as Flax's do: ``from linen.nn.initializers
import lecun_normal`` and ``import linen.nn.partitioning`` bind the very module
``linen.nn.initializers`` (``linen.nn.partitioning``) names, see
:class:`_SubmoduleFinder`.

One misbehaving plugin costs only its own names: if its ``linen_exports`` raises
or returns something that is not a mapping of names, or it exports a name a
first-party distribution owns, a :class:`~linen.core.errors.PluginWarning` names
its entry point and distribution (the original exception chained as
``__cause__``) and the rest of ``linen.nn`` works. A name two third-party plugins
both export is withheld: reading it raises
:class:`~linen.core.errors.PluginExportConflictError`.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import threading
import types
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
# `linen.nn.<name>...` entries of sys.modules made by `_SubmoduleFinder`
_aliased: set[str] = set()
_PREFIX = __name__ + '.'
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
        # Submodule imports answered from the old table: the next import asks the new.
        for fullname in _aliased:
            sys.modules.pop(fullname, None)
            g.pop(fullname[len(_PREFIX) :].partition('.')[0], None)
        _aliased.clear()


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


# --------------------------------------------------------------------------- submodules


class _SubmoduleFinder:
    """Answers ``import linen.nn.<name>`` where ``linen.nn.<name>`` is an exported module.

    Flax's ``flax.linen.initializers``, ``.linear``, ``.partitioning``... are files of
    its package, so code imports from them directly (``from flax.linen.attention import
    dot_product_attention_weights``). Here those modules live in the distribution that
    owns them (``linen.layers.initializers``) and ``linen.nn`` has no file for them:
    this finder, first on ``sys.meta_path``, gives the import the module the export
    table names, and ``linen.nn.<name>.<rest>`` the module ``<rest>`` below it, so no
    module ever runs a second time under another name. Names the table does not export
    as a module are left to the other finders (``import linen.nn.Dense`` fails as
    ``import flax.linen.Dense`` does); a first-party module whose distribution is not
    installed raises ``ModuleNotFoundError`` with the ``pip install`` that brings it.
    """

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if not fullname.startswith(_PREFIX):
            return None
        head, _, rest = fullname[len(_PREFIX) :].partition('.')
        if head.startswith('_'):  # the facade's own files
            return None
        table = _get_table()
        if head not in table.entries:
            conflict = table.conflicts.get(head)
            if conflict is not None:
                raise conflict
            if head in PROVIDED_BY:
                message, cause = _missing_message(head, table)
                raise ModuleNotFoundError(message, name=fullname) from cause
            return None
        module = __getattr__(head)
        if not isinstance(module, types.ModuleType):
            return None
        real = module.__name__ + ('.' + rest if rest else '')
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(real))


class _AliasLoader:
    """Loads a module name as an alias of an already importable module.

    The import machinery sets ``__spec__`` on whatever ``create_module`` returns;
    ``exec_module`` gives the module its own spec back, so ``importlib.reload`` and
    anything else reading ``__spec__`` still see where it lives.
    """

    def __init__(self, real: str) -> None:
        self.real = real
        self._spec: Any = None

    def create_module(self, spec: Any) -> types.ModuleType:
        module = importlib.import_module(self.real)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        alias = module.__spec__.name
        module.__spec__ = self._spec
        with _lock:
            _aliased.add(alias)


# First: the path finder would otherwise run `linen/module/x.py` a second time as
# `linen.nn.module.x` (the parent's `__path__` is linen.module's). One finder, also
# after `importlib.reload(linen.nn)` (which defines the class anew).
sys.meta_path[:] = [
    f
    for f in sys.meta_path
    if not (type(f).__name__ == '_SubmoduleFinder' and type(f).__module__ == __name__)
]
sys.meta_path.insert(0, _SubmoduleFinder())
