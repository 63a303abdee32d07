"""linen.profiling: module labels in profiles, and per-module cost and time reports.

See the package README for how the parts fit. Every public name is listed
once, in ``_exports.py``, and resolved on first access, so the plugin bus can
import ``linen.profiling._plugin`` at start-up without loading the report
machinery. Type checkers read the generated ``__init__.pyi``.
"""

from __future__ import annotations

from linen.profiling.__about__ import __version__ as __version__
from linen.profiling._exports import NAMES as _NAMES

_NAMES.install(globals())
