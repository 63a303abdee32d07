"""Recurrent layers, as ``flax.linen.recurrent``: the cells, ``RNN``, ``Bidirectional``
and ``flip_sequences``.

The public path Flax code imports through (``nn.recurrent.X``); the implementation lives
in the private modules named below.
"""

from __future__ import annotations

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
