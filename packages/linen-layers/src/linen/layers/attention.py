"""Attention, as ``flax.linen.attention``: the dot-product functions, the multi-head
layers and the mask helpers.

The public path Flax code imports through (``nn.attention.X``); the implementation lives
in the private modules named below.
"""

from __future__ import annotations

from linen.layers._attention import MultiHeadAttention as MultiHeadAttention
from linen.layers._attention import MultiHeadDotProductAttention as MultiHeadDotProductAttention
from linen.layers._attention import SelfAttention as SelfAttention
from linen.layers._attention import combine_masks as combine_masks
from linen.layers._attention import make_attention_mask as make_attention_mask
from linen.layers._attention import make_causal_mask as make_causal_mask
from linen.layers._dot_product import dot_product_attention as dot_product_attention
from linen.layers._dot_product import (
    dot_product_attention_weights as dot_product_attention_weights,
)
from linen.layers._dtypes import promote_dtype as promote_dtype
from linen.layers._linear import DenseGeneral as DenseGeneral
from linen.layers._linear import default_kernel_init as default_kernel_init
from linen.layers._normalization import LayerNorm as LayerNorm
from linen.layers._typing import Array as Array
from linen.layers._typing import DotGeneralT as DotGeneralT
from linen.layers._typing import Dtype as Dtype
from linen.layers._typing import Initializer as Initializer
from linen.layers._typing import PrecisionLike as PrecisionLike
from linen.layers._typing import PRNGKey as PRNGKey
from linen.layers._typing import Shape as Shape
from linen.module import Module as Module
from linen.module import compact as compact
from linen.module import merge_param as merge_param

# Some imports above are not in `__all__`: the names flax.linen.attention has through its
# own imports (typing aliases, `Module`, `compact`, ...), kept for Flax code that
# reaches them through this module (`from flax.linen.attention import PrecisionLike`).
__all__ = [
    'MultiHeadAttention',
    'MultiHeadDotProductAttention',
    'SelfAttention',
    'combine_masks',
    'dot_product_attention',
    'dot_product_attention_weights',
    'make_attention_mask',
    'make_causal_mask',
    'promote_dtype',
]
