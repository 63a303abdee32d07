"""Hook specifications of linen-core (pluggy project ``linen``).

Every distribution, first-party or third-party, registers a plugin module through
the entry-point group ``linen``; the plugin module holds ``@hookimpl`` functions.
Other distributions add their own specs (``linen.module.hookspecs``) through
:func:`linen_add_hookspecs`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pluggy

PROJECT_NAME = 'linen'

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def linen_add_hookspecs(plugin_manager: pluggy.PluginManager) -> None:
    """Add a distribution's hook specifications to the bus.

    Called once for each plugin as it is registered (historic: plugins registered
    later still see every call). Implementations call
    ``plugin_manager.add_hookspecs(module)``.
    """


@hookspec
def linen_exports() -> Mapping[str, Any]:
    """Names this plugin contributes to the ``linen.nn`` facade.

    Results are collected from every plugin. A value is either the object itself
    or a ``"package.module:attribute"`` string, imported on first access so that
    ``import linen.nn`` stays cheap. A name contributed by two distributions raises
    :class:`~linen.core.errors.PluginExportConflictError` naming both.
    """
    raise NotImplementedError  # a specification: plugins implement it
