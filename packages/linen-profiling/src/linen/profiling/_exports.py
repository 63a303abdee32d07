"""The public names of linen.profiling: one line per name, under the module that defines it.

The package's ``__all__`` and lazy ``__getattr__``, the plugin's ``linen_exports``
and the type stubs are derived from this table (see ``linen.core.name_table``).
"""

from __future__ import annotations

from linen.core.name_table import NameTable

NAMES = NameTable(
    'linen.profiling',
    {
        '._activations': ('SavedActivations', 'SavedValue', 'saved_activations'),
        '._costs': ('CostRow', 'ModuleCosts', 'module_costs'),
        '._flame': ('flame_boxes', 'flame_graph'),
        '._hlo': ('module_path_from_op_name', 'phase_of_op_name', 'strip_metadata'),
        '._joined': ('Report', 'ReportDiff'),
        '._labels': ('label_scope',),
        '._memory': ('MemoryRow', 'ModuleMemory', 'module_memory'),
        '._named_call': ('named_call',),
        '._naming': ('default_profiling_name',),
        '._perfetto': ('perfetto_trace',),
        '._roofline': ('DEVICE_PEAKS', 'Roofline', 'RooflineRow', 'roofline'),
        '._state': (
            'disable_named_call',
            'enable_named_call',
            'is_named_call_enabled',
            'override_named_call',
        ),
        '._tabulate': ('tabulate',),
        '._trace': ('ModuleTimes', 'TimeRow', 'profile'),
        '._trace_time': ('TraceTimeRow', 'TraceTimes', 'trace_times'),
    },
)

# What ``linen.nn`` offers of them: the names flax.linen has.
FACADE = (
    'enable_named_call',
    'disable_named_call',
    'override_named_call',
    'named_call',
    'tabulate',
    'module_costs',
    'profile',
)
