"""Flax as the oracle for the texts of layer errors and deprecation warnings.

Where Flax's own tests match a message (``assertRaisesRegex``/``assertWarnsRegex``),
code and log searches written for Flax look for that sentence. linen's message must
start with it, verbatim as Flax prints it here, and then say where and how to fix;
the error stays linen's typed class, a subclass of the builtin Flax raises.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import linen.nn as linen_nn
from linen.layers import errors as layer_errors

pytestmark = pytest.mark.flax
flax_nn = pytest.importorskip('flax.linen')

KEY = jax.random.key(0)
X3 = jnp.ones((2, 3, 4))


def _einsum(eq):
    return lambda nn: nn.Einsum((4, 5), eq).init(KEY, X3)


# case -> (program, linen's class, how many of Flax's sentences must lead ours)
ERRORS = {
    'einsum_no_arrow': (_einsum('abc,cd'), layer_errors.LayerArgumentError, None),
    'einsum_no_comma': (_einsum('abc->'), layer_errors.LayerArgumentError, None),
    'einsum_two_commas': (_einsum('abc,cd,de->abe'), layer_errors.LayerArgumentError, None),
    'einsum_two_arrows': (_einsum('abc,cd->abd->x'), layer_errors.LayerArgumentError, None),
    'sequential_empty': (
        lambda nn: nn.Sequential([]).init(KEY, X3),
        layer_errors.LayerArgumentError,
        None,
    ),
    'batch_apply_without_inputs': (
        lambda nn: nn.BatchApply(lambda x: x)(jnp.ones(3)),
        layer_errors.LayerInputRankError,
        None,
    ),
    'instance_norm_batch_axis': (
        lambda nn: nn.InstanceNorm(feature_axes=(0, -1)).init(KEY, X3),
        layer_errors.InvalidFeatureAxesError,
        None,
    ),
    'spectral_norm_3d': (
        lambda nn: nn.SpectralNorm(nn.Conv(3, (2,)), error_on_non_matrix=True).init(
            KEY, X3, update_stats=True
        ),
        layer_errors.SpectralNormNonMatrixError,
        None,
    ),
    'embed_float_ids': (
        lambda nn: nn.Embed(10, 4).init(KEY, jnp.ones((2,))),
        layer_errors.LayerInputDtypeError,
        None,
    ),
    'conv_causal_2d': (
        lambda nn: nn.Conv(4, (3, 3), padding='CAUSAL').init(KEY, jnp.ones((1, 8, 8, 3))),
        layer_errors.LayerPaddingError,
        None,
    ),
    # A padding string Flax hands to lax, which raises RuntimeError for it: ours is a
    # RuntimeError too (and a LayerPaddingError, a ValueError).
    'conv_unknown_padding': (
        lambda nn: nn.Conv(4, (3,), padding='WRAP').init(KEY, jnp.ones((1, 8, 3))),
        layer_errors.LayerPaddingStringError,
        None,
    ),
    'conv_lowercase_circular': (
        lambda nn: nn.Conv(4, (3,), padding='circular').init(KEY, jnp.ones((1, 8, 3))),
        layer_errors.LayerPaddingStringError,
        None,
    ),
    'conv_transpose_causal': (
        lambda nn: nn.ConvTranspose(4, (3,), padding='CAUSAL').init(KEY, jnp.ones((1, 8, 3))),
        layer_errors.LayerPaddingStringError,
        None,
    ),
    'max_pool_unknown_padding': (
        lambda nn: nn.max_pool(jnp.ones((1, 8, 3)), (2,), padding='FULL'),
        layer_errors.LayerPaddingStringError,
        None,
    ),
    # Flax asserts that the groups divide the input features: an AssertionError too.
    'conv_feature_groups_do_not_divide': (
        lambda nn: nn.Conv(4, (3,), feature_group_count=3).init(KEY, jnp.ones((1, 8, 2))),
        layer_errors.LayerFeatureGroupError,
        None,
    ),
    # Flax has no grouped local convolution: a NotImplementedError too.
    'conv_local_feature_groups': (
        lambda nn: nn.ConvLocal(4, (3,), feature_group_count=2).init(KEY, jnp.ones((1, 8, 4))),
        layer_errors.LocalConvFeatureGroupError,
        None,
    ),
    'conv_mask_shape': (
        lambda nn: nn.Conv(4, (3,), mask=jnp.ones((2, 3, 4))).init(KEY, jnp.ones((1, 8, 3))),
        layer_errors.LayerMaskShapeError,
        None,
    ),
    'group_norm_groups': (
        lambda nn: nn.GroupNorm(num_groups=4).init(KEY, jnp.ones((2, 6))),
        layer_errors.InvalidGroupsError,
        None,
    ),
    'group_norm_group_size': (
        lambda nn: nn.GroupNorm(num_groups=None, group_size=4).init(KEY, jnp.ones((2, 6))),
        layer_errors.InvalidGroupsError,
        None,
    ),
    'group_norm_both': (
        lambda nn: nn.GroupNorm(num_groups=2, group_size=3).init(KEY, jnp.ones((2, 6))),
        layer_errors.InvalidGroupsError,
        None,
    ),
    'batch_norm_use_running_average': (
        lambda nn: nn.BatchNorm().init(KEY, jnp.ones((2, 3))),
        layer_errors.MissingUseRunningAverageError,
        None,
    ),
    'dense_general_batch_dims': (
        lambda nn: nn.DenseGeneral(3, axis=0, batch_dims=(1,)).init(KEY, X3),
        layer_errors.LayerArgumentError,
        None,
    ),
    # Flax asserts: ours is an AssertionError too (and a ValueError).
    'attention_heads_divide_features': (
        lambda nn: nn.MultiHeadDotProductAttention(3).init(KEY, jnp.ones((1, 2, 4))),
        layer_errors.QkvFeaturesNotDivisibleError,
        None,
    ),
    # Flax goes on with a recommendation and a link; ours with where and how.
    'attention_kv_and_k': (
        lambda nn: nn.MultiHeadDotProductAttention(2).init(KEY, X3, inputs_k=X3, inputs_kv=X3),
        layer_errors.AttentionInputsConflictError,
        2,
    ),
    'attention_einsum_with_precision': (
        lambda nn: nn.dot_product_attention(
            X3,
            X3,
            X3,
            precision=jax.lax.Precision.DEFAULT,
            qk_attn_weights_einsum=jnp.einsum,
            attn_weights_value_einsum=jnp.einsum,
        ),
        layer_errors.LayerArgumentError,
        None,
    ),
    'attention_einsum_with_dot_general': (
        lambda nn: nn.dot_product_attention(
            X3,
            X3,
            X3,
            einsum_dot_general=jax.lax.dot_general,
            qk_attn_weights_einsum=jnp.einsum,
            attn_weights_value_einsum=jnp.einsum,
        ),
        layer_errors.LayerArgumentError,
        None,
    ),
    'attention_only_qk_einsum': (
        lambda nn: nn.dot_product_attention(X3, X3, X3, qk_attn_weights_einsum=jnp.einsum),
        layer_errors.LayerArgumentError,
        None,
    ),
    'attention_only_value_einsum': (
        lambda nn: nn.dot_product_attention(X3, X3, X3, attn_weights_value_einsum=jnp.einsum),
        layer_errors.LayerArgumentError,
        None,
    ),
    'attention_weights_einsum_with_precision': (
        lambda nn: nn.dot_product_attention_weights(
            X3, X3, precision=jax.lax.Precision.HIGHEST, einsum=jnp.einsum
        ),
        layer_errors.LayerArgumentError,
        None,
    ),
    'mha_einsum_classes_with_precision': (
        lambda nn: nn.MultiHeadDotProductAttention(
            2,
            precision=jax.lax.Precision.HIGHEST,
            qk_attn_weights_einsum_cls=lambda: jnp.einsum,
            attn_weights_value_einsum_cls=lambda: jnp.einsum,
        ).init(KEY, X3),
        layer_errors.LayerArgumentError,
        None,
    ),
    'attention_v_without_k': (
        lambda nn: nn.MultiHeadDotProductAttention(2).init(KEY, X3, inputs_v=X3),
        layer_errors.AttentionInputsConflictError,
        1,
    ),
}


def _sentences(text: str, n: int | None) -> str:
    if n is None:
        return text
    return '. '.join(text.split('. ')[:n]) + '.'


def _raised(program, nn) -> BaseException:
    with pytest.raises(Exception) as info:
        program(nn)
    return info.value


@pytest.mark.parametrize('case', list(ERRORS))
def test_layer_error_starts_with_flax_sentence(case):
    program, linen_class, sentences = ERRORS[case]
    theirs = _raised(program, flax_nn)
    ours = _raised(program, linen_nn)
    assert type(ours) is linen_class
    assert isinstance(ours, type(theirs))
    lead = _sentences(str(theirs), sentences)
    assert str(ours).startswith(lead), (str(ours), lead)
    assert len(str(ours)) > len(lead) + 20  # then where and how to fix


# Where Flax's error is whatever JAX or Python meets on the way (an IndexError of a
# shape tuple, an assert, a dot_general's TypeError), linen's typed error is that
# builtin too, so `except` clauses written for Flax catch it; its text is linen's own.
_Q = jnp.ones((2, 3, 2, 4))  # (batch, length, heads, depth)


def _lstm_with_carry(carry_c):
    def program(nn):
        cell = nn.ConvLSTMCell(4, (3,))
        x = jnp.ones((1, 6, 2))
        carry = cell.initialize_carry(KEY, x.shape)
        variables = cell.init(KEY, carry, x)
        return cell.apply(variables, (carry_c, carry[1]), x)

    return program


def _attend(nn):
    embed = nn.Embed(5, 4)
    variables = embed.init(KEY, jnp.ones((2,), jnp.int32))
    return embed.apply(variables, jnp.ones((2, 3)), method='attend')


BUILTINS = {
    'layer_norm_axis_out_of_range': (
        lambda nn: nn.LayerNorm(feature_axes=3).init(KEY, jnp.ones((2, 4))),
        layer_errors.InvalidFeatureAxesError,
    ),
    'rms_norm_axis_out_of_range': (
        lambda nn: nn.RMSNorm(feature_axes=2).init(KEY, jnp.ones((2, 4))),
        layer_errors.InvalidFeatureAxesError,
    ),
    'batch_norm_axis_out_of_range': (
        lambda nn: nn.BatchNorm(use_running_average=False, axis=3).init(KEY, X3),
        layer_errors.InvalidFeatureAxesError,
    ),
    'attention_ranks_differ': (
        lambda nn: nn.dot_product_attention(_Q, jnp.ones((2, 3, 4)), _Q),
        layer_errors.AttentionInputShapeError,
    ),
    'attention_depths_differ': (
        lambda nn: nn.dot_product_attention(_Q, jnp.ones((2, 3, 2, 5)), _Q),
        layer_errors.AttentionInputShapeError,
    ),
    'attention_batches_differ': (
        lambda nn: nn.dot_product_attention(_Q, jnp.ones((3, 3, 2, 4)), jnp.ones((3, 3, 2, 4))),
        layer_errors.AttentionInputShapeError,
    ),
    'attention_key_value_lengths_differ': (
        lambda nn: nn.dot_product_attention(_Q, _Q, jnp.ones((2, 4, 2, 4))),
        layer_errors.AttentionInputShapeError,
    ),
    'attention_rank_2_query': (
        lambda nn: nn.dot_product_attention(jnp.ones((3, 4)), jnp.ones((3, 4)), jnp.ones((3, 4))),
        layer_errors.AttentionInputShapeError,
    ),
    'rnn_without_time_axis': (
        lambda nn: nn.RNN(nn.LSTMCell(4)).init(KEY, jnp.ones((3,))),
        layer_errors.RNNInputShapeError,
    ),
    'conv_lstm_cell_state_of_other_features': (
        _lstm_with_carry(jnp.zeros((1, 6, 5))),
        layer_errors.RNNCarryShapeError,
    ),
    'embed_attend_query_of_other_features': (_attend, layer_errors.LayerInputShapeError),
}


@pytest.mark.parametrize('case', list(BUILTINS))
def test_layer_error_is_the_builtin_flax_raises(case):
    program, linen_class = BUILTINS[case]
    theirs = _raised(program, flax_nn)
    ours = _raised(program, linen_nn)
    assert type(theirs).__module__ == 'builtins', theirs
    assert type(ours) is linen_class
    assert isinstance(ours, type(theirs)), (type(ours).__mro__, theirs)


WARNINGS = {
    'inputs_kv': lambda nn: nn.MultiHeadDotProductAttention(2).init(KEY, X3, inputs_kv=X3),
    'self_attention': lambda nn: nn.SelfAttention(2).init(KEY, X3),
    'square_inputs_v_may_be_a_mask': lambda nn: nn.MultiHeadDotProductAttention(2).init(
        KEY, jnp.ones((2, 4, 4)), jnp.ones((2, 4, 4)), jnp.ones((2, 4, 4))
    ),
}


def _warned(program, nn) -> list[tuple[type, str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        program(nn)
    return [(w.category, str(w.message)) for w in caught]


@pytest.mark.parametrize('case', list(WARNINGS))
def test_attention_deprecation_warning_starts_with_flax_sentence(case):
    theirs = _warned(WARNINGS[case], flax_nn)
    ours = _warned(WARNINGS[case], linen_nn)
    assert [c for c, _ in ours] == [c for c, _ in theirs] == [DeprecationWarning]
    # Flax's text up to its link; linen names the module instead.
    lead = theirs[0][1].split(' See https://')[0]
    assert ours[0][1].startswith(lead), (ours[0][1], lead)
    if case == 'square_inputs_v_may_be_a_mask':
        # The mask passed by keyword, as the warning asks: silent on both sides.
        q = jnp.ones((2, 4, 4))
        for nn in (flax_nn, linen_nn):
            with warnings.catch_warnings():
                warnings.simplefilter('error')
                nn.MultiHeadDotProductAttention(2).init(KEY, q, q, mask=jnp.ones((2, 1, 4, 4)))


def test_custom_attention_einsums_are_called_as_flax_calls_them():
    def program(nn):
        seen = []

        def einsum(*args, **kwargs):
            seen.append((args[0], sorted(kwargs)))
            return jnp.einsum(*args, **kwargs)

        q = jnp.linspace(-1.0, 1.0, 24).reshape(1, 3, 2, 4)
        out = nn.dot_product_attention(
            q, q, q, qk_attn_weights_einsum=einsum, attn_weights_value_einsum=einsum
        )
        return out, seen

    ours, seen_ours = program(linen_nn)
    theirs, seen_theirs = program(flax_nn)
    assert (
        seen_ours
        == seen_theirs
        == [
            ('...qhd,...khd->...hqk', []),
            ('...hqk,...khd->...qhd', []),
        ]
    )
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6)
