"""Stochastic layers, as ``flax.linen.stochastic``.

The public path Flax code imports through (``nn.stochastic.X``); the implementation lives
in the private modules named below.
"""

from __future__ import annotations

from linen.layers._stochastic import Dropout as Dropout
from linen.layers._typing import PRNGKey as PRNGKey
from linen.module import Module as Module
from linen.module import compact as compact
from linen.module import merge_param as merge_param

# Some imports above are not in `__all__`: the names flax.linen.stochastic has through its
# own imports (typing aliases, `Module`, `compact`, ...), kept for Flax code that
# reaches them through this module (`from flax.linen.stochastic import PRNGKey`).
__all__ = [
    'Dropout',
]
