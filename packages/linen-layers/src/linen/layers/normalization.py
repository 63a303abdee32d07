"""Normalization layers, as ``flax.linen.normalization``.

The public path Flax code imports through (``nn.normalization.X``); the implementation lives
in the private modules named below.
"""

from __future__ import annotations

from linen.layers._dtypes import canonicalize_dtype as canonicalize_dtype
from linen.layers._norm_wrappers import SpectralNorm as SpectralNorm
from linen.layers._norm_wrappers import WeightNorm as WeightNorm
from linen.layers._normalization import BatchNorm as BatchNorm
from linen.layers._normalization import GroupNorm as GroupNorm
from linen.layers._normalization import InstanceNorm as InstanceNorm
from linen.layers._normalization import LayerNorm as LayerNorm
from linen.layers._normalization import RMSNorm as RMSNorm

__all__ = [
    'BatchNorm',
    'GroupNorm',
    'InstanceNorm',
    'LayerNorm',
    'RMSNorm',
    'SpectralNorm',
    'WeightNorm',
    'canonicalize_dtype',
]
