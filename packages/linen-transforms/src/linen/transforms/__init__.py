"""linen.transforms: JAX transforms lifted over scopes and Modules.

``_pack.py`` moves a scope's variables and rng streams across a transform
boundary; one file per transform lifts it over scopes (``_vmap.py``,
``_scan.py``, ``_remat.py``, ``_jit.py``, ...); ``_module_lift.py`` applies a
lift to a Module class or method, and ``_api.py`` is the ``linen.nn`` surface.
``lift`` is the functional counterpart over ``Scope``.
"""

from __future__ import annotations

from linen.transforms.__about__ import __version__ as __version__
from linen.transforms._api import broadcast as broadcast
from linen.transforms._api import checkpoint as checkpoint
from linen.transforms._api import jit as jit
from linen.transforms._api import remat as remat
from linen.transforms._api import remat_scan as remat_scan
from linen.transforms._api import scan as scan
from linen.transforms._api import vmap as vmap

__all__ = [
    '__version__',
    'broadcast',
    'checkpoint',
    'jit',
    'remat',
    'remat_scan',
    'scan',
    'vmap',
]
