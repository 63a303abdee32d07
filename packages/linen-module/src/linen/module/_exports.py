"""The public names of linen.module: one line per name, under the module that defines it.

The package's ``__all__`` and namespace, the plugin's ``linen_exports`` and the type
stub are derived from this table (see ``linen.core.name_table``). Every module is
bound at import (``eager``): the Module class is needed as soon as the package is.
"""

from __future__ import annotations

from linen.core.name_table import NameTable

_MODULES = {
    '._dispatch': ('MethodCallContext', 'invalidate_method_wrappers'),
    '._functional': ('apply', 'init', 'init_with_output', 'merge_param', 'share_scope'),
    '._intercept': ('intercept_methods',),
    '._module': ('Module', 'compact', 'compact_name_scope', 'nowrap'),
    '._profiling_name': ('derive_profiling_name',),
    '._state': ('module_stack',),
    '.hookspecs': ('MethodWrapper',),
}

NAMES = NameTable(
    'linen.module',
    _MODULES,
    submodules=('kw_only_dataclasses',),
    # Flax's flax.linen.Variable is the core's Variable; linen.nn offers it from here.
    aliases={'Variable': 'linen.core:Variable'},
    eager=(*_MODULES, '.kw_only_dataclasses', 'linen.core'),
)

# What linen.nn offers of them: the Module system as flax.linen has it.
FACADE = (
    'Module',
    'Variable',
    'apply',
    'compact',
    'compact_name_scope',
    'init',
    'init_with_output',
    'intercept_methods',
    'kw_only_dataclasses',
    'merge_param',
    'nowrap',
    'share_scope',
)
