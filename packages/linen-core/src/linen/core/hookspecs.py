"""Hook specifications of linen-core (pluggy project ``linen``).

Every distribution, first-party or third-party, registers a plugin module through
the entry-point group ``linen``; the plugin module holds ``@hookimpl`` functions.
Other distributions add their own specs (``linen.module.hookspecs``) through
:func:`linen_add_hookspecs`.

Each spec says how the results of its implementations combine, as pytest's
``hookspec.py`` does; the callers in linen-core honour that declaration.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pluggy

PROJECT_NAME = 'linen'

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec(historic=True)
def linen_add_hookspecs(plugin_manager: pluggy.PluginManager) -> None:
    """Add a distribution's hook specifications to the bus.

    Historic: the bus calls it once, with ``call_historic``, when the plugin
    manager is created, and pluggy replays that call for every plugin registered
    afterwards, as it is registered. A plugin's own specs are therefore in place
    before its other implementations are checked against them.

    :param plugin_manager: the bus's :class:`pluggy.PluginManager`; an
        implementation calls ``plugin_manager.add_hookspecs(module)``.

    Results: none (each implementation's return value is ignored).
    """


@hookspec
def linen_exports() -> Mapping[str, Any] | None:
    """Names this plugin contributes to the ``linen.nn`` facade.

    A value is either the object itself or a ``"package.module:attribute"``
    string, imported on first access so that ``import linen.nn`` stays cheap.
    A distribution usually returns ``NAMES.exports(...)`` of its
    :class:`~linen.core.name_table.NameTable`.

    Results: collected from every plugin; ``linen.nn`` calls each implementation
    on its own, so a failing one costs only its own names. First-party plugins
    are read first and keep their names; a name two third-party plugins export
    is withheld and reading it raises
    :class:`~linen.core.errors.PluginExportConflictError` naming both. ``None``
    counts as no names.
    """
