"""Linear layers, as ``flax.linen.linear``: dense, einsum, convolution and embedding layers
and their default initializers.

The public path Flax code imports through (``nn.linear.X``); the implementation lives
in the private modules named below.
"""

from __future__ import annotations

from linen.layers._conv import Conv as Conv
from linen.layers._conv import ConvLocal as ConvLocal
from linen.layers._conv import ConvTranspose as ConvTranspose
from linen.layers._conv import PaddingLike as PaddingLike
from linen.layers._conv import canonicalize_padding as canonicalize_padding
from linen.layers._dtypes import promote_dtype as promote_dtype
from linen.layers._linear import Array as Array
from linen.layers._linear import Dense as Dense
from linen.layers._linear import DenseGeneral as DenseGeneral
from linen.layers._linear import Dtype as Dtype
from linen.layers._linear import Einsum as Einsum
from linen.layers._linear import Embed as Embed
from linen.layers._linear import default_embed_init as default_embed_init
from linen.layers._linear import default_kernel_init as default_kernel_init

__all__ = [
    'Array',
    'Conv',
    'ConvLocal',
    'ConvTranspose',
    'Dense',
    'DenseGeneral',
    'Dtype',
    'Einsum',
    'Embed',
    'PaddingLike',
    'canonicalize_padding',
    'default_embed_init',
    'default_kernel_init',
    'promote_dtype',
]
