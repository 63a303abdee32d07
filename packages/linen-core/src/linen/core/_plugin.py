"""The linen-core plugin: contributes the core's names to ``linen.nn``."""

from __future__ import annotations

from linen.core.hookspecs import hookimpl

_EXPORTS = {
    'FrozenDict': 'linen.core.frozen_dict:FrozenDict',
    'DenyList': 'linen.core._filters:DenyList',
    'meta': 'linen.core.meta',
    'spmd': 'linen.core.spmd',
    'errors': 'linen.core.errors',
    'config': 'linen.core.config:config',
    'unbox': 'linen.core.meta:unbox',
    'Partitioned': 'linen.core.meta:Partitioned',
    'with_partitioning': 'linen.core.meta:with_partitioning',
    'get_partition_spec': 'linen.core.meta:get_partition_spec',
    'get_sharding': 'linen.core.meta:get_sharding',
    'PARTITION_NAME': 'linen.core.meta:PARTITION_NAME',
    'LogicallyPartitioned': 'linen.core.spmd:LogicallyPartitioned',
    'with_logical_partitioning': 'linen.core.spmd:with_logical_partitioning',
    'logical_axis_rules': 'linen.core.spmd:logical_axis_rules',
    'set_logical_axis_rules': 'linen.core.spmd:set_logical_axis_rules',
    'get_logical_axis_rules': 'linen.core.spmd:get_logical_axis_rules',
    'logical_to_mesh_axes': 'linen.core.spmd:logical_to_mesh_axes',
    'logical_to_mesh': 'linen.core.spmd:logical_to_mesh',
    'logical_to_mesh_sharding': 'linen.core.spmd:logical_to_mesh_sharding',
    'with_logical_constraint': 'linen.core.spmd:with_logical_constraint',
    'RulesFallback': 'linen.core.spmd:RulesFallback',
}


@hookimpl
def linen_exports():
    return dict(_EXPORTS)
