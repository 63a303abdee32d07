"""linen.transforms: JAX transforms lifted over scopes and Modules.

``_pack.py`` moves a scope's variables and rng streams across a transform
boundary; one file per transform lifts it over scopes (``_vmap.py``,
``_scan.py``, ``_remat.py``, ``_jit.py``, ...); ``_module_lift.py`` applies a
lift to a Module class or method, and ``_api.py`` is the ``linen.nn`` surface.
``lift`` is the functional counterpart over ``Scope``.

Every public name is listed once, in ``_exports.py``, and resolved on first
access: the plugin bus imports ``linen.transforms._plugin`` at start-up, which
must not pull in every transform. Type checkers read the generated
``__init__.pyi``.
"""

from __future__ import annotations

from linen.transforms.__about__ import __version__ as __version__
from linen.transforms._exports import NAMES as _NAMES

_NAMES.install(globals())
