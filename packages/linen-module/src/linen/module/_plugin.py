"""The linen-module plugin: its hook specs and its names in ``linen.nn``."""

from __future__ import annotations

from linen.core.hookspecs import hookimpl

_EXPORTS = {
    'Module': 'linen.module._module:Module',
    'compact': 'linen.module._module:compact',
    'nowrap': 'linen.module._module:nowrap',
    'compact_name_scope': 'linen.module._module:compact_name_scope',
    'apply': 'linen.module._functional:apply',
    'init': 'linen.module._functional:init',
    'init_with_output': 'linen.module._functional:init_with_output',
    'merge_param': 'linen.module._functional:merge_param',
    'share_scope': 'linen.module._functional:share_scope',
    'intercept_methods': 'linen.module._intercept:intercept_methods',
    'kw_only_dataclasses': 'linen.module.kw_only_dataclasses',
    'Variable': 'linen.core:Variable',
    'module': 'linen.module',
}


@hookimpl
def linen_add_hookspecs(plugin_manager):
    from linen.module import hookspecs

    plugin_manager.add_hookspecs(hookspecs)


@hookimpl
def linen_exports():
    return dict(_EXPORTS)
