"""Pooling functions, as ``flax.linen.pooling``.

The public path Flax code imports through (``nn.pooling.X``); the implementation lives
in the private modules named below.
"""

from __future__ import annotations

from linen.layers._pooling import avg_pool as avg_pool
from linen.layers._pooling import max_pool as max_pool
from linen.layers._pooling import min_pool as min_pool
from linen.layers._pooling import pool as pool

__all__ = [
    'avg_pool',
    'max_pool',
    'min_pool',
    'pool',
]
