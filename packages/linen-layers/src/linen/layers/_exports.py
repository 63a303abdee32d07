"""The public names of linen.layers: one line per name, under the module that defines it.

Adding a layer is one line here: its name under its module (a new module is one
more entry). The package's ``__all__`` and lazy ``__getattr__``, the plugin's
``linen_exports`` and the type stubs are derived from this table (see
``linen.core.name_table``); ``tools/generate_names.py`` rewrites the stubs.
"""

from __future__ import annotations

from linen.core.name_table import NameTable

NAMES = NameTable(
    'linen.layers',
    {
        '.activation': (
            'PReLU',
            'celu',
            'elu',
            'gelu',
            'glu',
            'hard_sigmoid',
            'hard_silu',
            'hard_swish',
            'hard_tanh',
            'leaky_relu',
            'log_sigmoid',
            'log_softmax',
            'logsumexp',
            'normalize',
            'one_hot',
            'relu',
            'relu6',
            'selu',
            'sigmoid',
            'silu',
            'soft_sign',
            'softmax',
            'softplus',
            'standardize',
            'swish',
            'tanh',
        ),
        '.initializers': ('zeros', 'ones', 'zeros_init', 'ones_init'),
        '._linear': ('Dense', 'DenseGeneral', 'Einsum', 'Embed'),
        '._conv': ('Conv', 'ConvTranspose', 'ConvLocal'),
        '._normalization': (
            'LayerNorm',
            'RMSNorm',
            'BatchNorm',
            'GroupNorm',
            'InstanceNorm',
        ),
        '._norm_wrappers': ('SpectralNorm', 'WeightNorm'),
        '._stochastic': ('Dropout',),
        '._pooling': ('pool', 'avg_pool', 'max_pool', 'min_pool'),
        '._dot_product': ('dot_product_attention_weights', 'dot_product_attention'),
        '._attention': (
            'MultiHeadDotProductAttention',
            'MultiHeadAttention',
            'SelfAttention',
            'make_attention_mask',
            'make_causal_mask',
            'combine_masks',
        ),
        '._recurrent': (
            'RNNCellBase',
            'LSTMCell',
            'OptimizedLSTMCell',
            'GRUCell',
            'MGUCell',
            'SimpleCell',
            'ConvLSTMCell',
        ),
        '._rnn': ('RNN', 'Bidirectional'),
        '._combinators': ('Sequential',),
        '._batch_apply': ('BatchApply',),
        '._fp8': (
            'Fp8DirectDotGeneralOp',
            'Fp8DotGeneral',
            'Fp8DotGeneralOp',
            'Fp8Einsum',
            'NANOOFp8DotGeneralOp',
        ),
    },
    # Public submodules, as `nn.initializers`, and the namespaces Flax code reaches through
    # (`nn.linear.default_kernel_init`, `nn.recurrent.LSTMCell`, ...).
    submodules=(
        'initializers',
        'activation',
        'dtypes',
        'linear',
        'attention',
        'recurrent',
        'normalization',
        'pooling',
        'stochastic',
        'combinators',
        'batch_apply',
        'fp8_ops',
        'partitioning',
    ),
)
