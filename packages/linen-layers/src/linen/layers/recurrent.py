"""Recurrent layers, as ``flax.linen.recurrent``: the cells, ``RNN``, ``Bidirectional``
and ``flip_sequences``.

The public path Flax code imports through (``nn.recurrent.X``); the implementation lives
in the private modules named below.
"""

from __future__ import annotations

from jax.nn import sigmoid as sigmoid
from jax.numpy import tanh as tanh

from linen.core import FrozenDict as FrozenDict
from linen.layers._conv import Conv as Conv
from linen.layers._dtypes import promote_dtype as promote_dtype
from linen.layers._linear import Dense as Dense
from linen.layers._linear import default_kernel_init as default_kernel_init
from linen.layers._recurrent import ConvLSTMCell as ConvLSTMCell
from linen.layers._recurrent import GRUCell as GRUCell
from linen.layers._recurrent import LSTMCell as LSTMCell
from linen.layers._recurrent import MGUCell as MGUCell
from linen.layers._recurrent import OptimizedLSTMCell as OptimizedLSTMCell
from linen.layers._recurrent import RNNCellBase as RNNCellBase
from linen.layers._recurrent import SimpleCell as SimpleCell
from linen.layers._rnn import RNN as RNN
from linen.layers._rnn import Bidirectional as Bidirectional
from linen.layers._rnn import flip_sequences as flip_sequences
from linen.layers._typing import Array as Array
from linen.layers._typing import Carry as Carry
from linen.layers._typing import CarryHistory as CarryHistory
from linen.layers._typing import Dtype as Dtype
from linen.layers._typing import Initializer as Initializer
from linen.layers._typing import Output as Output
from linen.layers._typing import PrecisionLike as PrecisionLike
from linen.layers._typing import PRNGKey as PRNGKey
from linen.module import Module as Module
from linen.module import compact as compact
from linen.module import nowrap as nowrap

# Some imports above are not in `__all__`: the names flax.linen.recurrent has through its
# own imports (typing aliases, `Module`, `compact`, ...), kept for Flax code that
# reaches them through this module (`from flax.linen.recurrent import Carry`).
__all__ = [
    'Bidirectional',
    'ConvLSTMCell',
    'GRUCell',
    'LSTMCell',
    'MGUCell',
    'OptimizedLSTMCell',
    'RNN',
    'RNNCellBase',
    'SimpleCell',
    'flip_sequences',
]
