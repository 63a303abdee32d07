"""linen.core: the functional core that Linen Modules stand on (API of ``flax.core``).

Variables live in collections (``params``, ``batch_stats``, ...) addressed by
module path; a :class:`Scope` is the view of one path, with rng streams that
follow Flax's derivation rule. ``init``/``apply``/``bind`` turn a function of a
scope into a function of variables.

Every public name is listed once, in ``_exports.py``; type checkers read the
generated ``__init__.pyi``.
"""

from __future__ import annotations

from linen.core.__about__ import __version__ as __version__
from linen.core._exports import NAMES as _NAMES

_NAMES.install(globals())
