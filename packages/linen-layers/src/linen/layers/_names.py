"""Which private module defines each public name of linen.layers.

One table serves both the package's lazy ``__getattr__`` and the plugin's
``linen_exports``, so adding a layer is one line here.
"""

from __future__ import annotations

_BY_MODULE: dict[str, tuple[str, ...]] = {
    'activation': (
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
    'initializers': ('zeros', 'ones', 'zeros_init', 'ones_init'),
    '_linear': ('Dense', 'DenseGeneral', 'Einsum', 'Embed'),
    '_conv': ('Conv', 'ConvTranspose', 'ConvLocal'),
    '_normalization': (
        'LayerNorm',
        'RMSNorm',
        'BatchNorm',
        'GroupNorm',
        'InstanceNorm',
    ),
    '_norm_wrappers': ('SpectralNorm', 'WeightNorm'),
    '_stochastic': ('Dropout',),
    '_pooling': ('pool', 'avg_pool', 'max_pool', 'min_pool'),
    '_attention': (
        'dot_product_attention_weights',
        'dot_product_attention',
        'MultiHeadDotProductAttention',
        'MultiHeadAttention',
        'SelfAttention',
        'make_attention_mask',
        'make_causal_mask',
        'combine_masks',
    ),
    '_recurrent': (
        'RNNCellBase',
        'LSTMCell',
        'OptimizedLSTMCell',
        'GRUCell',
        'MGUCell',
        'SimpleCell',
        'ConvLSTMCell',
    ),
    '_rnn': ('RNN', 'Bidirectional'),
    '_combinators': ('Sequential',),
    '_batch_apply': ('BatchApply',),
    '_fp8': (
        'Fp8DirectDotGeneralOp',
        'Fp8DotGeneral',
        'Fp8DotGeneralOp',
        'Fp8Einsum',
        'NANOOFp8DotGeneralOp',
    ),
}

# Public submodules, as `nn.initializers`, and the namespaces Flax code reaches through
# (`nn.linear.default_kernel_init`, `nn.recurrent.LSTMCell`, ...).
SUBMODULES = (
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
)

LOCATION: dict[str, str] = {
    name: f'linen.layers.{module}:{name}' for module, names in _BY_MODULE.items() for name in names
}
LOCATION.update({sub: f'linen.layers.{sub}' for sub in SUBMODULES})
