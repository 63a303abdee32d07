"""linen.transforms: JAX transforms lifted over scopes and Modules.

``_pack.py`` moves a scope's variables and rng streams across a transform
boundary; one file per transform lifts it over scopes (``_vmap.py``,
``_scan.py``, ``_remat.py``, ``_jit.py``, ...); ``_module_lift.py`` applies a
lift to a Module class or method, and ``_api.py`` is the ``linen.nn`` surface.
``lift`` is the functional counterpart over ``Scope``.
"""

from __future__ import annotations

from linen.transforms import lift as lift
from linen.transforms.__about__ import __version__ as __version__
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

__all__ = [
    '__version__',
    'add_metadata_axis',
    'broadcast',
    'checkpoint',
    'cond',
    'custom_vjp',
    'fold_rngs',
    'grad',
    'jit',
    'jvp',
    'lift',
    'map_variables',
    'remat',
    'remat_scan',
    'scan',
    'switch',
    'value_and_grad',
    'vjp',
    'vmap',
    'while_loop',
]
