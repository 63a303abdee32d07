"""The public names of linen.core, and those it contributes to ``linen.nn``.

One line per name, under the module that defines it. The package's ``__all__``
and lazy ``__getattr__``, the plugin's ``linen_exports`` and the type stubs are
derived from these tables (see ``name_table.py``). Names of light modules are
bound when ``linen.core`` is imported; those of modules that import heavier
dependencies resolve on first use.
"""

from __future__ import annotations

from linen.core.name_table import NameTable

NAMES = NameTable(
    'linen.core',
    {
        '._filters': (
            'DenyList',
            'group_collections',
            'in_filter',
            'intersect_filters',
            'subtract_filters',
            'union_filters',
        ),
        '._bus': ('get_plugin_manager',),
        '._rng': ('LazyRng',),
        '._scope': ('Array', 'Scope', 'Variable'),
        '._binding': ('apply', 'bind', 'init', 'lazy_init'),
        '.config': ('config',),
        '.hookspecs': ('hookimpl',),
        '.frozen_dict': ('FrozenDict', 'freeze', 'unfreeze', 'copy', 'pop', 'pretty_repr'),
        '.meta': (
            'AxisMetadata',
            'Partitioned',
            'PARTITION_NAME',
            'with_partitioning',
            'unbox',
            'replace_boxed',
            'get_partition_spec',
            'get_sharding',
        ),
    },
    submodules=(
        'errors',
        'frozen_dict',
        'meta',
        'scope',
        'serialization',
        'spmd',
        'struct',
        'traverse_util',
    ),
    aliases={
        'plugin_load_errors': '._bus:load_errors',
        'register_plugin': '._bus:register',
        'unregister_plugin': '._bus:unregister',
    },
    eager=(
        '.errors',
        '._filters',
        '._bus',
        '._rng',
        '._scope',
        '._binding',
        '.config',
        '.hookspecs',
    ),
)

# What ``linen.nn`` offers: the names flax.linen has of flax.core ...
FACADE = (
    'FrozenDict',
    'DenyList',
    'meta',
    'spmd',
    'errors',
    'config',
    'unbox',
    'Partitioned',
    'with_partitioning',
    'get_partition_spec',
    'get_sharding',
    'PARTITION_NAME',
)
# ... and the logical-partitioning API Flax keeps in flax.linen.spmd.
SPMD_FACADE = (
    'LogicallyPartitioned',
    'with_logical_partitioning',
    'logical_axis_rules',
    'set_logical_axis_rules',
    'get_logical_axis_rules',
    'logical_to_mesh_axes',
    'logical_to_mesh',
    'logical_to_mesh_sharding',
    'with_logical_constraint',
    'RulesFallback',
)
