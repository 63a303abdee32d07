"""linen.layers: the Flax Linen layer set.

Names are resolved lazily (``_names.LOCATION``), so ``import linen.layers`` is
cheap and each family of layers is imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from linen.layers.__about__ import __version__ as __version__
from linen.layers._names import LOCATION as _LOCATION

__all__ = ['__version__', *sorted(_LOCATION)]

if TYPE_CHECKING:  # what the lazy names below resolve to, for type checkers and IDEs
    from linen.layers import activation as activation
    from linen.layers import attention as attention
    from linen.layers import batch_apply as batch_apply
    from linen.layers import combinators as combinators
    from linen.layers import dtypes as dtypes
    from linen.layers import fp8_ops as fp8_ops
    from linen.layers import initializers as initializers
    from linen.layers import linear as linear
    from linen.layers import normalization as normalization
    from linen.layers import partitioning as partitioning
    from linen.layers import pooling as pooling
    from linen.layers import recurrent as recurrent
    from linen.layers import stochastic as stochastic
    from linen.layers._attention import MultiHeadAttention as MultiHeadAttention
    from linen.layers._attention import MultiHeadDotProductAttention as MultiHeadDotProductAttention
    from linen.layers._attention import SelfAttention as SelfAttention
    from linen.layers._attention import combine_masks as combine_masks
    from linen.layers._attention import dot_product_attention as dot_product_attention
    from linen.layers._attention import (
        dot_product_attention_weights as dot_product_attention_weights,
    )
    from linen.layers._attention import make_attention_mask as make_attention_mask
    from linen.layers._attention import make_causal_mask as make_causal_mask
    from linen.layers._batch_apply import BatchApply as BatchApply
    from linen.layers._combinators import Sequential as Sequential
    from linen.layers._conv import Conv as Conv
    from linen.layers._conv import ConvLocal as ConvLocal
    from linen.layers._conv import ConvTranspose as ConvTranspose
    from linen.layers._fp8 import Fp8DirectDotGeneralOp as Fp8DirectDotGeneralOp
    from linen.layers._fp8 import Fp8DotGeneral as Fp8DotGeneral
    from linen.layers._fp8 import Fp8DotGeneralOp as Fp8DotGeneralOp
    from linen.layers._fp8 import Fp8Einsum as Fp8Einsum
    from linen.layers._fp8 import NANOOFp8DotGeneralOp as NANOOFp8DotGeneralOp
    from linen.layers._linear import Dense as Dense
    from linen.layers._linear import DenseGeneral as DenseGeneral
    from linen.layers._linear import Einsum as Einsum
    from linen.layers._linear import Embed as Embed
    from linen.layers._norm_wrappers import SpectralNorm as SpectralNorm
    from linen.layers._norm_wrappers import WeightNorm as WeightNorm
    from linen.layers._normalization import BatchNorm as BatchNorm
    from linen.layers._normalization import GroupNorm as GroupNorm
    from linen.layers._normalization import InstanceNorm as InstanceNorm
    from linen.layers._normalization import LayerNorm as LayerNorm
    from linen.layers._normalization import RMSNorm as RMSNorm
    from linen.layers._pooling import avg_pool as avg_pool
    from linen.layers._pooling import max_pool as max_pool
    from linen.layers._pooling import min_pool as min_pool
    from linen.layers._pooling import pool as pool
    from linen.layers._recurrent import ConvLSTMCell as ConvLSTMCell
    from linen.layers._recurrent import GRUCell as GRUCell
    from linen.layers._recurrent import LSTMCell as LSTMCell
    from linen.layers._recurrent import MGUCell as MGUCell
    from linen.layers._recurrent import OptimizedLSTMCell as OptimizedLSTMCell
    from linen.layers._recurrent import RNNCellBase as RNNCellBase
    from linen.layers._recurrent import SimpleCell as SimpleCell
    from linen.layers._rnn import RNN as RNN
    from linen.layers._rnn import Bidirectional as Bidirectional
    from linen.layers._stochastic import Dropout as Dropout
    from linen.layers.activation import PReLU as PReLU
    from linen.layers.activation import celu as celu
    from linen.layers.activation import elu as elu
    from linen.layers.activation import gelu as gelu
    from linen.layers.activation import glu as glu
    from linen.layers.activation import hard_sigmoid as hard_sigmoid
    from linen.layers.activation import hard_silu as hard_silu
    from linen.layers.activation import hard_swish as hard_swish
    from linen.layers.activation import hard_tanh as hard_tanh
    from linen.layers.activation import leaky_relu as leaky_relu
    from linen.layers.activation import log_sigmoid as log_sigmoid
    from linen.layers.activation import log_softmax as log_softmax
    from linen.layers.activation import logsumexp as logsumexp
    from linen.layers.activation import normalize as normalize
    from linen.layers.activation import one_hot as one_hot
    from linen.layers.activation import relu as relu
    from linen.layers.activation import relu6 as relu6
    from linen.layers.activation import selu as selu
    from linen.layers.activation import sigmoid as sigmoid
    from linen.layers.activation import silu as silu
    from linen.layers.activation import soft_sign as soft_sign
    from linen.layers.activation import softmax as softmax
    from linen.layers.activation import softplus as softplus
    from linen.layers.activation import standardize as standardize
    from linen.layers.activation import swish as swish
    from linen.layers.activation import tanh as tanh
    from linen.layers.initializers import ones as ones
    from linen.layers.initializers import ones_init as ones_init
    from linen.layers.initializers import zeros as zeros
    from linen.layers.initializers import zeros_init as zeros_init


def __getattr__(name: str):
    target = _LOCATION.get(name)
    if target is None:
        raise AttributeError(f"module 'linen.layers' has no attribute {name!r}")
    module_name, _, attr = target.partition(':')
    value = importlib.import_module(module_name)
    if attr:
        value = getattr(value, attr)
    globals()[name] = value
    return value


def __dir__():
    return __all__
