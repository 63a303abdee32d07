"""Combinators, as ``flax.linen.combinators``.

The public path Flax code imports through (``nn.combinators.X``); the implementation lives
in the private modules named below.
"""

from __future__ import annotations

from linen.layers._combinators import Sequential as Sequential
from linen.module import Module as Module
from linen.module import compact as compact

# Some imports above are not in `__all__`: the names flax.linen.combinators has through its
# own imports (typing aliases, `Module`, `compact`, ...), kept for Flax code that
# reaches them through this module (`flax.linen.combinators.compact`).
__all__ = [
    'Sequential',
]
