"""``nn.summary``: where Flax code reaches for ``tabulate`` (``flax.linen.summary``).

Only the public entry point is here; Flax's ``Row``/``Table`` records are internal to its
table renderer and have no counterpart.
"""

from __future__ import annotations

from linen.profiling._tabulate import tabulate as tabulate

__all__ = ['tabulate']
