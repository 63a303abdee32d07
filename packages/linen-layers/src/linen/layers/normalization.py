"""Normalization layers, as ``flax.linen.normalization``.

The public path Flax code imports through (``nn.normalization.X``); the implementation lives
in the private modules named below.
"""

from __future__ import annotations

from dataclasses import field as field

from linen.layers._dtypes import canonicalize_dtype as canonicalize_dtype
from linen.layers._norm_wrappers import SpectralNorm as SpectralNorm
from linen.layers._norm_wrappers import WeightNorm as WeightNorm
from linen.layers._normalization import BatchNorm as BatchNorm
from linen.layers._normalization import GroupNorm as GroupNorm
from linen.layers._normalization import InstanceNorm as InstanceNorm
from linen.layers._normalization import LayerNorm as LayerNorm
from linen.layers._normalization import RMSNorm as RMSNorm
from linen.layers._typing import Array as Array
from linen.layers._typing import Axes as Axes
from linen.layers._typing import Dtype as Dtype
from linen.layers._typing import Initializer as Initializer
from linen.layers._typing import PRNGKey as PRNGKey
from linen.layers._typing import Shape as Shape
from linen.module import Module as Module
from linen.module import compact as compact
from linen.module import merge_param as merge_param
from linen.transforms import map_variables as map_variables

# Some imports above are not in `__all__`: the names flax.linen.normalization has through its
# own imports (typing aliases, `Module`, `compact`, ...), kept for Flax code that
# reaches them through this module (`from flax.linen.normalization import Axes`).
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
