"""The linen-module plugin: its hook specs and its names in ``linen.nn``."""

from __future__ import annotations

from linen.core.hookspecs import hookimpl


@hookimpl
def linen_add_hookspecs(plugin_manager):
    from linen.module import hookspecs

    plugin_manager.add_hookspecs(hookspecs)


@hookimpl
def linen_exports():
    from linen.module._exports import FACADE, NAMES

    return NAMES.exports(FACADE, module='linen.module')
