"""Stochastic layers, as ``flax.linen.stochastic``.

The public path Flax code imports through (``nn.stochastic.X``); the implementation lives
in the private modules named below.
"""

from __future__ import annotations

from linen.layers._stochastic import Dropout as Dropout

__all__ = [
    'Dropout',
]
