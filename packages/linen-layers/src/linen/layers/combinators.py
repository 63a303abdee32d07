"""Combinators, as ``flax.linen.combinators``.

The public path Flax code imports through (``nn.combinators.X``); the implementation lives
in the private modules named below.
"""

from __future__ import annotations

from linen.layers._combinators import Sequential as Sequential

__all__ = [
    'Sequential',
]
