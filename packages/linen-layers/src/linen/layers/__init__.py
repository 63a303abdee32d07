"""linen.layers: the Flax Linen layer set.

Every public name is listed once, in ``_exports.py``, and resolved on first
access, so ``import linen.layers`` is cheap and each family of layers is
imported on first use. Type checkers read the generated ``__init__.pyi``.
"""

from __future__ import annotations

from linen.layers.__about__ import __version__ as __version__
from linen.layers._exports import NAMES as _NAMES

_NAMES.install(globals())
