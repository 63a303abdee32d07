"""Dtype rules shared by the layers: which dtype a computation runs in.

Layers take a ``dtype`` (the computation's) and a ``param_dtype`` (the stored
parameters'). When ``dtype`` is ``None`` the computation runs in the dtype that
``jnp.result_type`` gives for the inputs and parameters together, so a bfloat16
input with float32 parameters computes in float32, as in Flax.
"""

from __future__ import annotations

from linen.layers._dtypes import canonicalize_dtype as canonicalize_dtype
from linen.layers._dtypes import promote_dtype as promote_dtype
from linen.layers._typing import Dtype as Dtype

# Some imports above are not in `__all__`: the names flax.linen.dtypes has through its
# own imports (typing aliases, `Module`, `compact`, ...), kept for Flax code that
# reaches them through this module (`from flax.linen.dtypes import Dtype`).
__all__ = [
    'canonicalize_dtype',
    'promote_dtype',
]
