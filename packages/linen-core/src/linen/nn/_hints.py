"""Which first-party distribution provides each name of ``linen.nn``.

Used only to explain a missing name; what is available comes from the plugins.
"""

from __future__ import annotations

_NAMES = {
    'linen-module': (
        'Module', 'compact', 'nowrap', 'compact_name_scope', 'apply', 'init',
        'init_with_output', 'Variable', 'intercept_methods', 'share_scope', 'merge_param',
        'module',
    ),
    'linen-transforms': (
        'jit', 'vmap', 'scan', 'remat', 'checkpoint', 'remat_scan', 'grad', 'value_and_grad',
        'vjp', 'jvp', 'custom_vjp', 'cond', 'switch', 'while_loop', 'map_variables',
        'fold_rngs', 'add_metadata_axis', 'broadcast', 'transforms',
    ),
    'linen-profiling': (
        'enable_named_call', 'disable_named_call', 'override_named_call', 'named_call',
        'tabulate', 'module_costs', 'profile',
    ),
    'linen-layers': (
        'PReLU', 'celu', 'elu', 'gelu', 'glu', 'hard_sigmoid', 'hard_silu', 'hard_swish',
        'hard_tanh', 'leaky_relu', 'log_sigmoid', 'log_softmax', 'logsumexp', 'normalize',
        'one_hot', 'relu', 'relu6', 'selu', 'sigmoid', 'silu', 'soft_sign', 'softmax',
        'softplus', 'standardize', 'swish', 'tanh', 'zeros', 'ones', 'zeros_init', 'ones_init',
        'Dense', 'DenseGeneral', 'Einsum', 'Conv', 'ConvTranspose', 'ConvLocal', 'Embed',
        'LayerNorm', 'RMSNorm', 'BatchNorm', 'GroupNorm', 'InstanceNorm', 'SpectralNorm',
        'WeightNorm', 'Dropout', 'pool', 'avg_pool', 'max_pool', 'min_pool',
        'dot_product_attention_weights', 'dot_product_attention', 'MultiHeadDotProductAttention',
        'MultiHeadAttention', 'SelfAttention', 'make_attention_mask', 'make_causal_mask',
        'combine_masks', 'RNNCellBase', 'LSTMCell', 'OptimizedLSTMCell', 'GRUCell', 'MGUCell',
        'SimpleCell', 'ConvLSTMCell', 'RNN', 'Bidirectional', 'Sequential', 'BatchApply',
        'initializers', 'activation', 'dtypes',
    ),
}

PROVIDED_BY: dict[str, str] = {name: dist for dist, names in _NAMES.items() for name in names}
