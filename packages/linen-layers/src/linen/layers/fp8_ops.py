"""fp8 with delayed scaling, as ``flax.linen.fp8_ops``: the quantization functions and the
fp8 dot-general modules.

The public path Flax code imports through (``nn.fp8_ops.qdq``); the implementation lives in
``_fp8_ops`` (functions) and ``_fp8`` (modules).
"""

from __future__ import annotations

from linen.layers import _fp8, _fp8_ops
from linen.layers._fp8 import Fp8DirectDotGeneralOp as Fp8DirectDotGeneralOp
from linen.layers._fp8 import Fp8DotGeneral as Fp8DotGeneral
from linen.layers._fp8 import Fp8DotGeneralBase as Fp8DotGeneralBase
from linen.layers._fp8 import Fp8DotGeneralOp as Fp8DotGeneralOp
from linen.layers._fp8 import Fp8Einsum as Fp8Einsum
from linen.layers._fp8 import NANOOFp8DotGeneralOp as NANOOFp8DotGeneralOp
from linen.layers._fp8_ops import OVERWRITE_WITH_GRADIENT as OVERWRITE_WITH_GRADIENT
from linen.layers._fp8_ops import compute_amax_history as compute_amax_history
from linen.layers._fp8_ops import compute_scale as compute_scale
from linen.layers._fp8_ops import dequantize as dequantize
from linen.layers._fp8_ops import dot_general_transpose_lhs as dot_general_transpose_lhs
from linen.layers._fp8_ops import dot_general_transpose_rhs as dot_general_transpose_rhs
from linen.layers._fp8_ops import dot_general_with_precision as dot_general_with_precision
from linen.layers._fp8_ops import dot_general_with_precision_jvp as dot_general_with_precision_jvp
from linen.layers._fp8_ops import fp8_scaled_dot_general as fp8_scaled_dot_general
from linen.layers._fp8_ops import get_fp8_max as get_fp8_max
from linen.layers._fp8_ops import in_q as in_q
from linen.layers._fp8_ops import in_q_bwd as in_q_bwd
from linen.layers._fp8_ops import in_q_fwd as in_q_fwd
from linen.layers._fp8_ops import in_qdq as in_qdq
from linen.layers._fp8_ops import in_qdq_bwd as in_qdq_bwd
from linen.layers._fp8_ops import in_qdq_fwd as in_qdq_fwd
from linen.layers._fp8_ops import out_dq as out_dq
from linen.layers._fp8_ops import out_dq_bwd as out_dq_bwd
from linen.layers._fp8_ops import out_dq_fwd as out_dq_fwd
from linen.layers._fp8_ops import out_qdq as out_qdq
from linen.layers._fp8_ops import out_qdq_bwd as out_qdq_bwd
from linen.layers._fp8_ops import out_qdq_fwd as out_qdq_fwd
from linen.layers._fp8_ops import qdq as qdq
from linen.layers._fp8_ops import quantize as quantize
from linen.layers._fp8_ops import quantize_dequantize_update as quantize_dequantize_update
from linen.layers._fp8_ops import quantized_dot as quantized_dot
from linen.layers._fp8_ops import quantized_dot_bwd as quantized_dot_bwd
from linen.layers._fp8_ops import quantized_dot_fwd as quantized_dot_fwd
from linen.layers._fp8_ops import update_fp8_meta as update_fp8_meta

# Everything the two private modules make public, listed there once.
__all__ = sorted([*_fp8.__all__, *_fp8_ops.__all__])
