"""The public names of linen.transforms: one line per name, under the module that defines it.

The package's ``__all__`` and lazy ``__getattr__``, the plugin's ``linen_exports``
and the type stubs are derived from this table (see ``linen.core.name_table``).
"""

from __future__ import annotations

from linen.core.name_table import NameTable

# The transforms Flax lifts, under the same names at both levels: over Modules (this
# package) and over scopes (``lift``, whose ``__all__`` reads this tuple too).
LIFTED = (
    'add_metadata_axis',
    'broadcast',
    'checkpoint',
    'cond',
    'custom_vjp',
    'fold_rngs',
    'grad',
    'jit',
    'jvp',
    'map_variables',
    'remat',
    'remat_scan',
    'scan',
    'switch',
    'value_and_grad',
    'vjp',
    'vmap',
    'while_loop',
)

NAMES = NameTable(
    'linen.transforms',
    {
        '._api': LIFTED,
        # Flax has these in flax.core.lift and flax.linen.transforms, not in flax.linen.
        '._axis_markers': ('In', 'Out'),
        '._module_lift': ('lift_transform',),
        # linen's own (Flax has no trace reuse)
        '._reuse': ('linen_reuse_traces',),
    },
    submodules=('lift',),
)
