"""Linear layers, as ``flax.linen.linear``: dense, einsum, convolution and embedding layers
and their default initializers.

The public path Flax code imports through (``nn.linear.X``); the implementation lives
in the private modules named below.
"""

from __future__ import annotations

from jax import eval_shape as eval_shape

from linen.layers._conv import Conv as Conv
from linen.layers._conv import ConvLocal as ConvLocal
from linen.layers._conv import ConvTranspose as ConvTranspose
from linen.layers._conv import PaddingLike as PaddingLike
from linen.layers._conv import canonicalize_padding as canonicalize_padding
from linen.layers._dtypes import promote_dtype as promote_dtype
from linen.layers._linear import Dense as Dense
from linen.layers._linear import DenseGeneral as DenseGeneral
from linen.layers._linear import Einsum as Einsum
from linen.layers._linear import Embed as Embed
from linen.layers._linear import default_embed_init as default_embed_init
from linen.layers._linear import default_kernel_init as default_kernel_init
from linen.layers._typing import Array as Array
from linen.layers._typing import ConvGeneralDilatedT as ConvGeneralDilatedT
from linen.layers._typing import DotGeneralT as DotGeneralT
from linen.layers._typing import Dtype as Dtype
from linen.layers._typing import Initializer as Initializer
from linen.layers._typing import LaxPadding as LaxPadding
from linen.layers._typing import PrecisionLike as PrecisionLike
from linen.layers._typing import PRNGKey as PRNGKey
from linen.layers._typing import PromoteDtypeFn as PromoteDtypeFn
from linen.layers._typing import Shape as Shape
from linen.module import Module as Module
from linen.module import compact as compact

# Some imports above are not in `__all__`: the names flax.linen.linear has through its
# own imports (typing aliases, `Module`, `compact`, ...), kept for Flax code that
# reaches them through this module (`from flax.linen.linear import Initializer`).
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
