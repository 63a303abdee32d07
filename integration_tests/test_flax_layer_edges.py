"""Flax as the oracle at the edges of the layers' own checks.

Found by a sweep of every ``raise`` in linen-layers: inputs Flax runs that linen
refused (a carry part of size 1 that broadcasts, einsum labels that are not letters,
``DenseGeneral(axis=())``, masks given as lists or numbers, pool padding as an array,
dropout rates outside [0, 1], a falsy ``precision`` beside custom einsums), and errors
that were not the builtin Flax's layers meet for the same input. Each program runs
with ``nn`` bound to ``flax.linen`` and to ``linen.nn``: a result must be Flax's bit for
bit; an error must be raised by both, linen's an instance of Flax's builtin.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import linen.nn as linen_nn
from integration_tests.oracle import assert_same_bits

pytestmark = pytest.mark.flax
flax_nn = pytest.importorskip('flax.linen')

PROGRAMS = {
    'lstm_h_of_1_init': """
x = jnp.ones((1, 3)); cell = nn.LSTMCell(8)
result = cell.init(jax.random.key(0), (jnp.ones((1, 8)), jnp.ones((1, 1))), x)
""",
    'lstm_h_of_1_apply': """
x = jnp.ones((1, 3)); cell = nn.LSTMCell(8)
v = cell.init(jax.random.key(0), (jnp.ones((1, 8)), jnp.ones((1, 1))), x)
result = cell.apply(v, (jnp.ones((1, 8)), jnp.ones((1, 1))), x)
""",
    'optimized_lstm_c_of_1': """
x = jnp.ones((1, 3)); cell = nn.OptimizedLSTMCell(8)
v = cell.init(jax.random.key(0), cell.initialize_carry(jax.random.key(0), x.shape), x)
result = cell.apply(v, (jnp.full((1, 1), 0.5), jnp.ones((1, 8))), x)
""",
    'optimized_lstm_h_of_1': """
x = jnp.ones((1, 3)); cell = nn.OptimizedLSTMCell(8)
result = cell.init_with_output(jax.random.key(0), (jnp.full((1, 8), 0.5), jnp.ones((1, 1))), x)
""",
    'conv_lstm_c_of_1': """
x = jnp.ones((1, 4, 3)); cell = nn.ConvLSTMCell(2, (3,))
c = cell.initialize_carry(jax.random.key(0), x.shape)
v = cell.init(jax.random.key(0), c, x)
result = cell.apply(v, (jnp.full((1, 1, 1), 0.3), c[1]), x)
""",
    'conv_lstm_c_one_channel': """
x = jnp.ones((1, 4, 3)); cell = nn.ConvLSTMCell(2, (3,))
c = cell.initialize_carry(jax.random.key(0), x.shape)
result = cell.init_with_output(jax.random.key(0), (jnp.full((1, 4, 1), 0.3), c[1]), x)
""",
    'conv_lstm_c_other_channels': """
x = jnp.ones((1, 4, 3)); cell = nn.ConvLSTMCell(2, (3,))
c = cell.initialize_carry(jax.random.key(0), x.shape)
v = cell.init(jax.random.key(0), c, x)
result = cell.apply(v, (jnp.ones((1, 4, 5)), c[1]), x)
""",
    'lstm_mixed_carry': """
x = jnp.ones((1, 3)); cell = nn.LSTMCell(8)
result = cell.init(jax.random.key(0), (jnp.ones((1, 4)), jnp.ones((1, 5))), x)
""",
    'einsum_underscore_labels': """
m = nn.Einsum((3,4), 'a_,_c->ac'); result = m.init_with_output(jax.random.key(0), jnp.arange(6.).reshape(2,3))
""",
    'einsum_digit_labels': """
m = nn.Einsum((3,4), '...1,12->...2'); result = m.init_with_output(jax.random.key(0), jnp.arange(12.).reshape(2,2,3))
""",
    'einsum_dot_in_output': """
m = nn.Einsum((3,4), 'ab,bc->a.c'); result = m.init_with_output(jax.random.key(0), jnp.arange(6.).reshape(2,3))
""",
    'einsum_two_commas_output': """
m = nn.Einsum((3,4), 'ab,bc->a,c'); result = m.init_with_output(jax.random.key(0), jnp.arange(6.).reshape(2,3))
""",
    'dense_general_no_axis_batch': """
m = nn.DenseGeneral(4, axis=(), batch_dims=(0,)); result = m.init_with_output(jax.random.key(0), jnp.arange(6.).reshape(2,3))
""",
    'dense_general_no_axis': """
m = nn.DenseGeneral((2,2), axis=()); result = m.init_with_output(jax.random.key(0), jnp.arange(6.).reshape(2,3))
""",
    'dense_general_no_axis_fan_avg': """
m = nn.DenseGeneral((2,2), axis=(), kernel_init=nn.initializers.variance_scaling(1.0, 'fan_avg', 'uniform')); result = m.init_with_output(jax.random.key(0), jnp.arange(6.).reshape(2,3))
""",
    'dense_general_two_axes': """
m = nn.DenseGeneral(3, axis=(0, 1), batch_dims=()); result = m.init_with_output(jax.random.key(0), jnp.arange(6.).reshape(2,3))
""",
    'dense_general_batch_axis': """
m = nn.DenseGeneral(3, axis=-1, batch_dims=(0,)); result = m.init_with_output(jax.random.key(0), jnp.arange(6.).reshape(2,3))
""",
    'embed_attend_scalar': """
e = nn.Embed(5, 4); v = e.init(jax.random.key(0), jnp.ones((2,), jnp.int32)); result = e.apply(v, jnp.array(2.5), method='attend')
""",
    'avg_pool_numpy_padding': """
result = nn.avg_pool(jnp.arange(8.).reshape(1,4,2), (2,), padding=np.array([[1,0]]), count_include_pad=False)
""",
    'max_pool_numpy_padding': """
result = nn.max_pool(jnp.arange(16.).reshape(1,4,4,1), (2,2), strides=(1,1), padding=np.array([[1,0],[0,1]]))
""",
    'max_pool_padding_list': """
result = nn.max_pool(jnp.arange(4.).reshape(1,4,1), (2,), padding=[(1,0)])
""",
    'dropout_negative_rate': """
result = nn.Dropout(-0.5, broadcast_dims=(0,)).apply({}, jnp.arange(6.).reshape(2,3), deterministic=False, rngs={'dropout': jax.random.key(1)})
""",
    'dropout_rate_above_one': """
result = nn.Dropout(1.5).apply({}, jnp.arange(6.).reshape(2,3), deterministic=False, rngs={'dropout': jax.random.key(1)})
""",
    'jit_dropout_rate_two': """
result = nn.jit(nn.Dropout)(2.0).apply({}, jnp.arange(6.).reshape(2,3), deterministic=False, rngs={'dropout': jax.random.key(1)})
""",
    'batch_norm_list_mask': """
x = jnp.arange(12.).reshape(2,3,2); mk = [[[1,1],[0,1],[1,1]],[[1,0],[1,1],[1,1]]]
result = nn.BatchNorm(use_running_average=False).init_with_output(jax.random.key(0), x, mask=mk)
""",
    'group_norm_float_mask': """
x = jnp.arange(12.).reshape(2,3,2); mk = jnp.array([[[1,1],[0,1],[1,1]],[[1,0],[1,1],[1,1]]], jnp.float32)
result = nn.GroupNorm(num_groups=1).init_with_output(jax.random.key(0), x, mask=mk)
""",
    'rms_norm_int_mask': """
x = jnp.arange(12.).reshape(2,3,2); mk = np.array([[[1,1],[0,1],[1,1]],[[1,0],[1,1],[1,1]]], np.int32)
result = nn.RMSNorm().init_with_output(jax.random.key(0), x, mask=mk)
""",
    'instance_norm_float_list_mask': """
x = jnp.arange(12.).reshape(2,3,2); mk = [[[1.,1.],[0.,1.],[1.,1.]],[[1.,0.],[1.,1.],[1.,1.]]]
result = nn.InstanceNorm().init_with_output(jax.random.key(0), x, mask=mk)
""",
    'layer_norm_mask_broadcast': """
x = jnp.arange(12.).reshape(2,3,2); mk = jnp.array([True, False])
result = nn.LayerNorm().init_with_output(jax.random.key(0), x, mask=mk)
""",
    'layer_norm_nested_list_mask': """
x = jnp.arange(12.).reshape(2,3,2)
result = nn.LayerNorm().init_with_output(jax.random.key(0), x, mask=[[True, True]])
""",
    'attention_empty_precision': """
q = jnp.arange(24.).reshape(1,3,2,4); result = nn.dot_product_attention(q, q, q, precision='', qk_attn_weights_einsum=jnp.einsum, attn_weights_value_einsum=jnp.einsum)
""",
    'attention_zero_precision': """
q = jnp.arange(24.).reshape(1,3,2,4); result = nn.dot_product_attention(q, q, q, precision=0, qk_attn_weights_einsum=jnp.einsum, attn_weights_value_einsum=jnp.einsum)
""",
    'group_norm_negative_group_size': """
result = nn.GroupNorm(num_groups=None, group_size=-2).init(jax.random.key(0), jnp.ones((2,6)))
""",
    'group_norm_group_size_zero': """
result = nn.GroupNorm(num_groups=None, group_size=0).init(jax.random.key(0), jnp.ones((2,6)))
""",
    'combine_masks_ranks': """
result = nn.combine_masks(jnp.ones((2, 3), bool), jnp.ones((3,), bool))
""",
    'conv_transpose_rank': """
result = nn.ConvTranspose(2, (3, 3)).init(jax.random.key(0), jnp.ones((4, 3)))
""",
    'conv_transpose_strides': """
result = nn.ConvTranspose(2, (3, 3), strides=(2,)).init(jax.random.key(0), jnp.ones((1, 4, 4, 3)))
""",
    'dense_scalar_input': """
result = nn.Dense(2).init(jax.random.key(0), jnp.ones(()))
""",
    'dense_general_axis_out_of_range': """
result = nn.DenseGeneral(2, axis=3).init(jax.random.key(0), jnp.ones((2, 3)))
""",
    'einsum_kernel_labels': """
result = nn.Einsum((3, 4, 5), 'ab,bc->ac').init(jax.random.key(0), jnp.ones((2, 3)))
""",
    'group_norm_scalar': """
result = nn.GroupNorm(num_groups=2).init(jax.random.key(0), jnp.ones(()))
""",
    'pool_strides_count': """
result = nn.max_pool(jnp.ones((1, 4, 4, 1)), (2, 2), strides=(1,))
""",
    'pool_input_rank': """
result = nn.max_pool(jnp.ones((4,)), (2, 2))
""",
    'pool_padding_pairs': """
result = nn.max_pool(jnp.ones((1, 4, 4, 1)), (2, 2), padding=[(1, 0)])
""",
    'pool_int_padding': """
result = nn.max_pool(jnp.ones((1, 4, 4, 1)), (2, 2), padding=[1, 1])
""",
    'dropout_broadcast_dims': """
result = nn.Dropout(0.5, broadcast_dims=(3,)).apply({}, jnp.ones((2, 3)), deterministic=False, rngs={'dropout': jax.random.key(1)})
""",
}


def _outcome(source: str, nn):
    namespace = {'nn': nn, 'jax': jax, 'jnp': jnp, 'np': np}
    try:
        exec(compile(source, '<program>', 'exec'), namespace)
    except Exception as err:  # the outcome to compare
        return 'raises', err
    return 'ok', namespace['result']


@pytest.mark.parametrize('case', list(PROGRAMS))
def test_layer_edge_as_on_flax(case):
    kind_theirs, theirs = _outcome(PROGRAMS[case], flax_nn)
    kind_ours, ours = _outcome(PROGRAMS[case], linen_nn)
    assert kind_ours == kind_theirs, (ours, theirs)
    if kind_ours == 'ok':
        assert_same_bits(ours, theirs)
    elif type(theirs).__module__ == 'builtins':
        assert isinstance(ours, type(theirs)), (type(ours).__mro__, theirs)
    else:
        assert type(ours).__name__ == type(theirs).__name__, (ours, theirs)
