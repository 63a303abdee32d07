"""linen.transforms: JAX transforms lifted over scopes and Modules.

``_pack.py`` moves a scope's variables and rng streams across a transform
boundary; one file per transform lifts it over scopes (``_vmap.py``,
``_scan.py``, ``_remat.py``, ``_jit.py``, ...); ``_module_lift.py`` applies a
lift to a Module class or method, and ``_api.py`` is the ``linen.nn`` surface.
``lift`` is the functional counterpart over ``Scope``.
"""

from __future__ import annotations

import importlib as _importlib
from typing import TYPE_CHECKING

from linen.transforms.__about__ import __version__ as __version__

# Resolved on first access: the plugin bus imports linen.transforms._plugin at
# start-up, which must not pull in every transform.
_LOCATION = {
    'lift': 'linen.transforms.lift',
    'add_metadata_axis': 'linen.transforms._api',
    'broadcast': 'linen.transforms._api',
    'checkpoint': 'linen.transforms._api',
    'cond': 'linen.transforms._api',
    'custom_vjp': 'linen.transforms._api',
    'fold_rngs': 'linen.transforms._api',
    'grad': 'linen.transforms._api',
    'jit': 'linen.transforms._api',
    'jvp': 'linen.transforms._api',
    'map_variables': 'linen.transforms._api',
    'remat': 'linen.transforms._api',
    'remat_scan': 'linen.transforms._api',
    'scan': 'linen.transforms._api',
    'switch': 'linen.transforms._api',
    'value_and_grad': 'linen.transforms._api',
    'vjp': 'linen.transforms._api',
    'vmap': 'linen.transforms._api',
    'while_loop': 'linen.transforms._api',
}


if TYPE_CHECKING:  # what the lazy names below resolve to, for type checkers and IDEs
    from linen.transforms import lift as lift
    from linen.transforms._api import add_metadata_axis as add_metadata_axis
    from linen.transforms._api import broadcast as broadcast
    from linen.transforms._api import checkpoint as checkpoint
    from linen.transforms._api import cond as cond
    from linen.transforms._api import custom_vjp as custom_vjp
    from linen.transforms._api import fold_rngs as fold_rngs
    from linen.transforms._api import grad as grad
    from linen.transforms._api import jit as jit
    from linen.transforms._api import jvp as jvp
    from linen.transforms._api import map_variables as map_variables
    from linen.transforms._api import remat as remat
    from linen.transforms._api import remat_scan as remat_scan
    from linen.transforms._api import scan as scan
    from linen.transforms._api import switch as switch
    from linen.transforms._api import value_and_grad as value_and_grad
    from linen.transforms._api import vjp as vjp
    from linen.transforms._api import vmap as vmap
    from linen.transforms._api import while_loop as while_loop

__all__ = ['__version__', *sorted(_LOCATION)]


def __getattr__(name: str):
    module = _LOCATION.get(name)
    if module is None:
        raise AttributeError(f"module 'linen.transforms' has no attribute {name!r}")
    value = _importlib.import_module(module)
    if name != 'lift':
        value = getattr(value, name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
