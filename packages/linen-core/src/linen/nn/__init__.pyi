"""Static view of ``linen.nn`` for type checkers and IDEs (``nn.Dense(...)`` gets a signature).

At run time the names come from the plugins' ``linen_exports`` hooks and resolve
lazily; this stub lists the first-party ones where they live. A test
(``test_nn_stub.py``) checks that it names exactly the first-party exports, each
the same object the facade returns: add a line here when a distribution exports
a new name.
"""

from typing import Any

from linen import module as module
from linen import transforms as transforms
from linen.core import PARTITION_NAME as PARTITION_NAME
from linen.core import DenyList as DenyList
from linen.core import FrozenDict as FrozenDict
from linen.core import Partitioned as Partitioned
from linen.core import Variable as Variable
from linen.core import config as config
from linen.core import errors as errors
from linen.core import get_partition_spec as get_partition_spec
from linen.core import get_sharding as get_sharding
from linen.core import meta as meta
from linen.core import spmd as spmd
from linen.core import unbox as unbox
from linen.core import with_partitioning as with_partitioning
from linen.core.errors import PluginWarning as PluginWarning
from linen.core.spmd import LogicallyPartitioned as LogicallyPartitioned
from linen.core.spmd import RulesFallback as RulesFallback
from linen.core.spmd import get_logical_axis_rules as get_logical_axis_rules
from linen.core.spmd import logical_axis_rules as logical_axis_rules
from linen.core.spmd import logical_to_mesh as logical_to_mesh
from linen.core.spmd import logical_to_mesh_axes as logical_to_mesh_axes
from linen.core.spmd import logical_to_mesh_sharding as logical_to_mesh_sharding
from linen.core.spmd import set_logical_axis_rules as set_logical_axis_rules
from linen.core.spmd import with_logical_constraint as with_logical_constraint
from linen.core.spmd import with_logical_partitioning as with_logical_partitioning
from linen.layers import RNN as RNN
from linen.layers import BatchApply as BatchApply
from linen.layers import BatchNorm as BatchNorm
from linen.layers import Bidirectional as Bidirectional
from linen.layers import Conv as Conv
from linen.layers import ConvLocal as ConvLocal
from linen.layers import ConvLSTMCell as ConvLSTMCell
from linen.layers import ConvTranspose as ConvTranspose
from linen.layers import Dense as Dense
from linen.layers import DenseGeneral as DenseGeneral
from linen.layers import Dropout as Dropout
from linen.layers import Einsum as Einsum
from linen.layers import Embed as Embed
from linen.layers import Fp8DirectDotGeneralOp as Fp8DirectDotGeneralOp
from linen.layers import Fp8DotGeneral as Fp8DotGeneral
from linen.layers import Fp8DotGeneralOp as Fp8DotGeneralOp
from linen.layers import Fp8Einsum as Fp8Einsum
from linen.layers import GroupNorm as GroupNorm
from linen.layers import GRUCell as GRUCell
from linen.layers import InstanceNorm as InstanceNorm
from linen.layers import LayerNorm as LayerNorm
from linen.layers import LSTMCell as LSTMCell
from linen.layers import MGUCell as MGUCell
from linen.layers import MultiHeadAttention as MultiHeadAttention
from linen.layers import MultiHeadDotProductAttention as MultiHeadDotProductAttention
from linen.layers import NANOOFp8DotGeneralOp as NANOOFp8DotGeneralOp
from linen.layers import OptimizedLSTMCell as OptimizedLSTMCell
from linen.layers import PReLU as PReLU
from linen.layers import RMSNorm as RMSNorm
from linen.layers import RNNCellBase as RNNCellBase
from linen.layers import SelfAttention as SelfAttention
from linen.layers import Sequential as Sequential
from linen.layers import SimpleCell as SimpleCell
from linen.layers import SpectralNorm as SpectralNorm
from linen.layers import WeightNorm as WeightNorm
from linen.layers import activation as activation
from linen.layers import attention as attention
from linen.layers import avg_pool as avg_pool
from linen.layers import batch_apply as batch_apply
from linen.layers import celu as celu
from linen.layers import combinators as combinators
from linen.layers import combine_masks as combine_masks
from linen.layers import dot_product_attention as dot_product_attention
from linen.layers import dot_product_attention_weights as dot_product_attention_weights
from linen.layers import dtypes as dtypes
from linen.layers import elu as elu
from linen.layers import fp8_ops as fp8_ops
from linen.layers import gelu as gelu
from linen.layers import glu as glu
from linen.layers import hard_sigmoid as hard_sigmoid
from linen.layers import hard_silu as hard_silu
from linen.layers import hard_swish as hard_swish
from linen.layers import hard_tanh as hard_tanh
from linen.layers import initializers as initializers
from linen.layers import leaky_relu as leaky_relu
from linen.layers import linear as linear
from linen.layers import log_sigmoid as log_sigmoid
from linen.layers import log_softmax as log_softmax
from linen.layers import logsumexp as logsumexp
from linen.layers import make_attention_mask as make_attention_mask
from linen.layers import make_causal_mask as make_causal_mask
from linen.layers import max_pool as max_pool
from linen.layers import min_pool as min_pool
from linen.layers import normalization as normalization
from linen.layers import normalize as normalize
from linen.layers import one_hot as one_hot
from linen.layers import ones as ones
from linen.layers import ones_init as ones_init
from linen.layers import partitioning as partitioning
from linen.layers import pool as pool
from linen.layers import pooling as pooling
from linen.layers import recurrent as recurrent
from linen.layers import relu as relu
from linen.layers import relu6 as relu6
from linen.layers import selu as selu
from linen.layers import sigmoid as sigmoid
from linen.layers import silu as silu
from linen.layers import soft_sign as soft_sign
from linen.layers import softmax as softmax
from linen.layers import softplus as softplus
from linen.layers import standardize as standardize
from linen.layers import stochastic as stochastic
from linen.layers import swish as swish
from linen.layers import tanh as tanh
from linen.layers import zeros as zeros
from linen.layers import zeros_init as zeros_init
from linen.module import Module as Module
from linen.module import apply as apply
from linen.module import compact as compact
from linen.module import compact_name_scope as compact_name_scope
from linen.module import init as init
from linen.module import init_with_output as init_with_output
from linen.module import intercept_methods as intercept_methods
from linen.module import merge_param as merge_param
from linen.module import nowrap as nowrap
from linen.module import share_scope as share_scope
from linen.profiling import disable_named_call as disable_named_call
from linen.profiling import enable_named_call as enable_named_call
from linen.profiling import module_costs as module_costs
from linen.profiling import named_call as named_call
from linen.profiling import override_named_call as override_named_call
from linen.profiling import profile as profile
from linen.profiling import summary as summary
from linen.profiling import tabulate as tabulate
from linen.transforms import add_metadata_axis as add_metadata_axis
from linen.transforms import broadcast as broadcast
from linen.transforms import checkpoint as checkpoint
from linen.transforms import cond as cond
from linen.transforms import custom_vjp as custom_vjp
from linen.transforms import fold_rngs as fold_rngs
from linen.transforms import grad as grad
from linen.transforms import jit as jit
from linen.transforms import jvp as jvp
from linen.transforms import lift as lift
from linen.transforms import map_variables as map_variables
from linen.transforms import remat as remat
from linen.transforms import remat_scan as remat_scan
from linen.transforms import scan as scan
from linen.transforms import switch as switch
from linen.transforms import value_and_grad as value_and_grad
from linen.transforms import vjp as vjp
from linen.transforms import vmap as vmap
from linen.transforms import while_loop as while_loop

LinenPluginWarning = PluginWarning

# Names of third-party plugins are only known at run time.
def __getattr__(name: str) -> Any: ...
def __dir__() -> list[str]: ...
