"""The linen-transforms plugin: contributes the lifted transforms to ``linen.nn``."""

from __future__ import annotations

from linen.core.hookspecs import hookimpl

_NAMES = (
    'vmap',
    'scan',
    'jit',
    'remat',
    'checkpoint',
    'remat_scan',
    'broadcast',
    'grad',
    'value_and_grad',
    'vjp',
    'jvp',
    'custom_vjp',
    'cond',
    'switch',
    'while_loop',
    'map_variables',
    'fold_rngs',
    'add_metadata_axis',
)


@hookimpl
def linen_exports():
    exports = {name: f'linen.transforms:{name}' for name in _NAMES}
    exports['transforms'] = 'linen.transforms'
    exports['lift'] = 'linen.transforms.lift'
    return exports
