"""Attention functions, masks and MultiHeadDotProductAttention against plain NumPy/JAX."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from linen.layers._attention import (
    AttentionInputsConflictError,
    AttentionInputShapeError,
    AttentionMaskShapeError,
    AutoregressiveCacheShapeError,
    MultiHeadAttention,
    MultiHeadDotProductAttention,
    QkvFeaturesNotDivisibleError,
    SelfAttention,
    combine_masks,
    dot_product_attention,
    dot_product_attention_weights,
    make_attention_mask,
    make_causal_mask,
)

KEYS = jax.random.split(jax.random.key(42), 8)


def _normal(i, shape, dtype=jnp.float32):
    return jax.random.normal(KEYS[i], shape, dtype)


# ----------------------------------------------------------------------------- reference


def ref_weights(q, k, bias=None, mask=None):
    """Attention weights in float64 NumPy, written from the formula."""
    q, k = np.asarray(q, np.float64), np.asarray(k, np.float64)
    logits = np.einsum('...qhd,...khd->...hqk', q, k) / np.sqrt(q.shape[-1])
    if bias is not None:
        logits = logits + np.asarray(bias, np.float64)
    if mask is not None:
        logits = np.where(np.asarray(mask, bool), logits, -1e30)
    logits = logits - logits.max(-1, keepdims=True)
    e = np.exp(logits)
    return e / e.sum(-1, keepdims=True)


def ref_attention(q, k, v, bias=None, mask=None):
    w = ref_weights(q, k, bias, mask)
    return np.einsum('...hqk,...khd->...qhd', w, np.asarray(v, np.float64))


def ref_dense_general(x, kernel, bias, n_in):
    """``x`` contracted over its last ``n_in`` axes with the kernel's first ``n_in``."""
    x, kernel = np.asarray(x, np.float64), np.asarray(kernel, np.float64)
    y = np.tensordot(x, kernel, axes=(list(range(x.ndim - n_in, x.ndim)), list(range(n_in))))
    return y if bias is None else y + np.asarray(bias, np.float64)


def ref_layer_norm(x, scale, eps=1e-6):
    x = np.asarray(x, np.float64)
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * np.asarray(scale, np.float64)


def ref_mha(params, xq, xk, xv, mask=None, normalize_qk=False):
    q = ref_dense_general(xq, params['query']['kernel'], params['query'].get('bias'), 1)
    k = ref_dense_general(xk, params['key']['kernel'], params['key'].get('bias'), 1)
    v = ref_dense_general(xv, params['value']['kernel'], params['value'].get('bias'), 1)
    if normalize_qk:
        q = ref_layer_norm(q, params['query_ln']['scale'])
        k = ref_layer_norm(k, params['key_ln']['scale'])
    x = ref_attention(q, k, v, mask=mask)
    return ref_dense_general(x, params['out']['kernel'], params['out'].get('bias'), 2)


# ----------------------------------------------------------------------------- functions


@pytest.mark.parametrize('batch', [(), (2,), (2, 3)])
def test_dot_product_attention_matches_reference(batch):
    q = _normal(0, (*batch, 4, 2, 8))
    k = _normal(1, (*batch, 5, 2, 8))
    v = _normal(2, (*batch, 5, 2, 6))
    out = dot_product_attention(q, k, v)
    assert out.shape == (*batch, 4, 2, 6)
    np.testing.assert_allclose(out, ref_attention(q, k, v), rtol=1e-5, atol=1e-5)
    weights = dot_product_attention_weights(q, k)
    assert weights.shape == (*batch, 2, 4, 5)
    np.testing.assert_allclose(weights, ref_weights(q, k), rtol=1e-5, atol=1e-6)


def test_zero_query_averages_values():
    # Equal logits give uniform weights: the output is the mean of the values.
    q = jnp.zeros((1, 3, 1, 4))
    k = _normal(1, (1, 5, 1, 4))
    v = jnp.arange(5.0).reshape(1, 5, 1, 1) * jnp.ones((1, 5, 1, 2))
    out = dot_product_attention(q, k, v)
    np.testing.assert_allclose(out, np.full((1, 3, 1, 2), 2.0), rtol=1e-6)


def test_bias_and_mask():
    q, k, v = _normal(0, (2, 4, 2, 8)), _normal(1, (2, 5, 2, 8)), _normal(2, (2, 5, 2, 3))
    bias = _normal(3, (2, 1, 4, 5))
    mask = jax.random.bernoulli(KEYS[4], 0.6, (2, 1, 4, 5)).at[..., 0].set(True)
    out = dot_product_attention(q, k, v, bias=bias, mask=mask)
    np.testing.assert_allclose(out, ref_attention(q, k, v, bias, mask), rtol=1e-5, atol=1e-5)


def test_mask_selecting_one_key_returns_its_value():
    q, k, v = _normal(0, (1, 3, 1, 4)), _normal(1, (1, 5, 1, 4)), _normal(2, (1, 5, 1, 2))
    mask = jnp.zeros((1, 1, 3, 5), bool).at[..., 2].set(True)
    out = dot_product_attention(q, k, v, mask=mask)
    np.testing.assert_allclose(out, np.broadcast_to(v[:, 2:3], (1, 3, 1, 2)), rtol=1e-6)


def test_dropout_deterministic_is_identity():
    q, k = _normal(0, (2, 4, 2, 8)), _normal(1, (2, 5, 2, 8))
    plain = dot_product_attention_weights(q, k)
    same = dot_product_attention_weights(
        q, k, dropout_rate=0.5, dropout_rng=KEYS[5], deterministic=True
    )
    np.testing.assert_array_equal(same, plain)


@pytest.mark.parametrize('broadcast', [True, False])
def test_dropout_scales_kept_weights(broadcast):
    q, k = _normal(0, (3, 4, 2, 8)), _normal(1, (3, 6, 2, 8))
    rate = 0.4
    plain = dot_product_attention_weights(q, k)
    dropped = dot_product_attention_weights(
        q, k, dropout_rate=rate, dropout_rng=KEYS[5], broadcast_dropout=broadcast
    )
    kept = np.asarray(dropped != 0)
    assert 0 < kept.mean() < 1
    np.testing.assert_allclose(
        np.asarray(dropped)[kept], np.asarray(plain)[kept] / (1 - rate), rtol=1e-5
    )
    same_everywhere = all(
        np.array_equal(kept[b, h], kept[0, 0]) for b in range(3) for h in range(2)
    )
    # A broadcast mask is shared by every batch element and head; a full one is not.
    assert same_everywhere == broadcast


def test_dropout_mask_comes_from_bernoulli_of_the_rng():
    q, k = _normal(0, (2, 4, 2, 8)), _normal(1, (2, 5, 2, 8))
    dropped = dot_product_attention_weights(q, k, dropout_rate=0.5, dropout_rng=KEYS[5])
    expected_keep = jax.random.bernoulli(KEYS[5], 0.5, (1, 1, 4, 5))
    np.testing.assert_array_equal(
        np.asarray(dropped != 0), np.broadcast_to(expected_keep, (2, 2, 4, 5))
    )


def test_dtypes():
    q = _normal(0, (2, 4, 2, 8), jnp.bfloat16)
    k = _normal(1, (2, 5, 2, 8), jnp.bfloat16)
    v = _normal(2, (2, 5, 2, 8), jnp.bfloat16)
    assert dot_product_attention(q, k, v).dtype == jnp.bfloat16
    assert dot_product_attention_weights(q, k).dtype == jnp.bfloat16
    # force_fp32_for_softmax keeps the float32 softmax result.
    assert dot_product_attention_weights(q, k, force_fp32_for_softmax=True).dtype == jnp.float32
    assert dot_product_attention(q, k, v, dtype=jnp.float32).dtype == jnp.float32
    # Mixed inputs promote.
    assert dot_product_attention(q, k.astype(jnp.float32), v).dtype == jnp.float32
    np.testing.assert_allclose(
        np.asarray(dot_product_attention(q, k, v), np.float32),
        ref_attention(q, k, v),
        rtol=5e-2,
        atol=5e-2,
    )


def test_mask_wrong_shape():
    q, k, v = _normal(0, (2, 4, 2, 8)), _normal(1, (2, 5, 2, 8)), _normal(2, (2, 5, 2, 8))
    with pytest.raises(
        AttentionMaskShapeError, match=r'mask has shape \(2, 4, 4\).*\(2, 2, 4, 5\)'
    ):
        dot_product_attention(q, k, v, mask=jnp.ones((2, 4, 4)))
    with pytest.raises(AttentionMaskShapeError, match='bias has shape'):
        dot_product_attention(q, k, v, bias=jnp.ones((3, 1, 4, 5)))


def test_input_shape_errors():
    q, k, v = _normal(0, (2, 4, 2, 8)), _normal(1, (2, 5, 2, 8)), _normal(2, (2, 5, 2, 8))
    with pytest.raises(AttentionInputShapeError, match='query has rank 3'):
        dot_product_attention(q[..., 0, :], k, v)
    with pytest.raises(AttentionInputShapeError, match=r'heads, depth'):
        dot_product_attention(q[..., :4], k, v)
    with pytest.raises(AttentionInputShapeError, match='batch dims'):
        dot_product_attention(q, k[:1], v[:1])
    with pytest.raises(AttentionInputShapeError, match='key shape .* value shape'):
        dot_product_attention(q, k, v[:, :3])


# ----------------------------------------------------------------------------- masks


def test_make_attention_mask():
    query_pad = jnp.array([[1, 1, 0]])
    key_pad = jnp.array([[1, 0]])
    mask = make_attention_mask(query_pad, key_pad)
    assert mask.shape == (1, 1, 3, 2) and mask.dtype == jnp.float32
    np.testing.assert_array_equal(mask[0, 0], [[1, 0], [1, 0], [0, 0]])
    ge = make_attention_mask(jnp.arange(3), jnp.arange(2), jnp.greater_equal, 1, jnp.bool_)
    assert ge.shape == (1, 1, 3, 2) and ge.dtype == jnp.bool_
    np.testing.assert_array_equal(ge[0, 0], [[True, False], [True, True], [True, True]])


def test_make_causal_mask():
    mask = make_causal_mask(jnp.ones((2, 4)), extra_batch_dims=1)
    assert mask.shape == (1, 2, 1, 4, 4)
    np.testing.assert_array_equal(mask[0, 1, 0], np.tril(np.ones((4, 4))))


def test_combine_masks():
    a = jnp.array([[1, 1, 0, 0]])
    b = jnp.array([[1, 0, 1, 0]])
    assert combine_masks() is None and combine_masks(None, None) is None
    np.testing.assert_array_equal(combine_masks(a, None, b), [[1, 0, 0, 0]])
    assert combine_masks(a, dtype=jnp.bool_).dtype == jnp.bool_
    with pytest.raises(AttentionMaskShapeError, match='combine_masks.*equal rank'):
        combine_masks(a, b[0])


# ----------------------------------------------------------------------------- layers


def test_mha_param_names_and_shapes():
    layer = MultiHeadDotProductAttention(num_heads=2, qkv_features=8, out_features=5)
    variables = layer.init(KEYS[0], jnp.ones((3, 4, 6)))
    shapes = jax.tree_util.tree_map(jnp.shape, dict(variables['params']))
    assert shapes == {
        'query': {'kernel': (6, 2, 4), 'bias': (2, 4)},
        'key': {'kernel': (6, 2, 4), 'bias': (2, 4)},
        'value': {'kernel': (6, 2, 4), 'bias': (2, 4)},
        'out': {'kernel': (2, 4, 5), 'bias': (5,)},
    }
    assert set(variables) == {'params'}


def test_mha_matches_reference_cross_attention():
    layer = MultiHeadDotProductAttention(num_heads=3, qkv_features=12, out_features=7)
    xq, xk, xv = _normal(0, (2, 4, 6)), _normal(1, (2, 5, 6)), _normal(2, (2, 5, 3))
    variables = layer.init(KEYS[3], xq, xk, xv)
    params = variables['params']
    assert params['value']['kernel'].shape == (3, 3, 4)
    # Biases start at zero; perturb them so the reference exercises them.
    params = jax.tree_util.tree_map(lambda p: p + 0.1, params)
    mask = make_attention_mask(jnp.array([[1, 1, 1, 0], [1, 1, 1, 1]]), jnp.ones((2, 5)))
    out = layer.apply({'params': params}, xq, xk, xv, mask=mask)
    assert out.shape == (2, 4, 7)
    np.testing.assert_allclose(out, ref_mha(params, xq, xk, xv, mask=mask), rtol=1e-4, atol=1e-4)


def test_mha_defaults_self_attention_and_inputs_k_for_v():
    layer = MultiHeadDotProductAttention(num_heads=2)
    xq, xk = _normal(0, (2, 4, 6)), _normal(1, (2, 5, 6))
    variables = layer.init(KEYS[3], xq)
    params = variables['params']
    assert params['out']['kernel'].shape == (2, 3, 6)
    np.testing.assert_allclose(
        layer.apply(variables, xq), ref_mha(params, xq, xq, xq), rtol=1e-4, atol=1e-4
    )
    np.testing.assert_allclose(
        layer.apply(variables, xq, xk), ref_mha(params, xq, xk, xk), rtol=1e-4, atol=1e-4
    )
    with pytest.warns(DeprecationWarning, match='inputs_kv'):
        via_kv = layer.apply(variables, xq, inputs_kv=xk)
    np.testing.assert_allclose(via_kv, ref_mha(params, xq, xk, xk), rtol=1e-4, atol=1e-4)


def test_mha_input_conflicts():
    layer = MultiHeadDotProductAttention(num_heads=2)
    x = jnp.ones((1, 3, 4))
    variables = layer.init(KEYS[0], x)
    with pytest.raises(AttentionInputsConflictError, match='inputs_kv` must be None'):
        layer.apply(variables, x, x, inputs_kv=x)
    with pytest.raises(AttentionInputsConflictError, match='inputs_k` cannot be None'):
        layer.apply(variables, x, inputs_v=x)


def test_mha_qkv_features_not_divisible():
    layer = MultiHeadDotProductAttention(num_heads=3, qkv_features=8, name='attn')
    with pytest.raises(QkvFeaturesNotDivisibleError, match=r'qkv_features \(8\).*num_heads \(3\)'):
        layer.init(KEYS[0], jnp.ones((1, 2, 4)))


def test_mha_mask_wrong_shape_names_the_layer():
    layer = MultiHeadDotProductAttention(num_heads=2)
    x = jnp.ones((2, 3, 4))
    variables = layer.init(KEYS[0], x)
    with pytest.raises(
        AttentionMaskShapeError, match=r'MultiHeadDotProductAttention.*\(2, 2, 3, 3\)'
    ):
        layer.apply(variables, x, mask=jnp.ones((2, 3, 5)))


def test_mha_normalize_qk():
    layer = MultiHeadDotProductAttention(num_heads=2, qkv_features=8, normalize_qk=True)
    x = _normal(0, (2, 3, 6))
    variables = layer.init(KEYS[1], x)
    params = variables['params']
    assert jax.tree_util.tree_map(jnp.shape, dict(params['query_ln'])) == {'scale': (4,)}
    assert jax.tree_util.tree_map(jnp.shape, dict(params['key_ln'])) == {'scale': (4,)}
    params = jax.tree_util.tree_map(lambda p: p + 0.1, params)
    np.testing.assert_allclose(
        layer.apply({'params': params}, x),
        ref_mha(params, x, x, x, normalize_qk=True),
        rtol=1e-4,
        atol=1e-4,
    )


def test_mha_dtype_and_param_dtype():
    x = _normal(0, (2, 3, 4))
    layer = MultiHeadDotProductAttention(num_heads=2, param_dtype=jnp.bfloat16)
    variables = layer.init(KEYS[1], x)
    assert all(p.dtype == jnp.bfloat16 for p in jax.tree_util.tree_leaves(variables))
    # float32 input and bfloat16 params compute in float32.
    assert layer.apply(variables, x).dtype == jnp.float32
    layer16 = MultiHeadDotProductAttention(num_heads=2, dtype=jnp.bfloat16)
    variables = layer16.init(KEYS[1], x)
    assert all(p.dtype == jnp.float32 for p in jax.tree_util.tree_leaves(variables))
    out = layer16.apply(variables, x)
    assert out.dtype == jnp.bfloat16
    ref = ref_mha(variables['params'], x, x, x)
    np.testing.assert_allclose(np.asarray(out, np.float32), ref, rtol=5e-2, atol=5e-2)


def test_mha_dropout_rng_and_deterministic():
    layer = MultiHeadDotProductAttention(num_heads=2, dropout_rate=0.5)
    x = _normal(0, (2, 3, 4))
    variables = layer.init(KEYS[1], x, deterministic=True)
    plain = layer.apply(variables, x, deterministic=True)
    np.testing.assert_allclose(plain, ref_mha(variables['params'], x, x, x), rtol=1e-4, atol=1e-4)
    a = layer.apply(variables, x, deterministic=False, rngs={'dropout': KEYS[2]})
    b = layer.apply(variables, x, deterministic=False, dropout_rng=KEYS[2])
    c = layer.apply(variables, x, deterministic=False, rngs={'dropout': KEYS[3]})
    assert not np.allclose(a, plain)
    np.testing.assert_array_equal(
        layer.apply(variables, x, deterministic=False, rngs={'dropout': KEYS[2]}), a
    )
    assert not np.allclose(a, c)
    assert not np.allclose(b, plain)
    with pytest.raises(Exception, match='deterministic'):
        layer.apply(variables, x)


def test_mha_sow_weights():
    layer = MultiHeadDotProductAttention(num_heads=2)
    x = _normal(0, (2, 3, 4))
    variables = layer.init(KEYS[1], x)
    _, state = layer.apply(variables, x, sow_weights=True, mutable=['intermediates'])
    (weights,) = state['intermediates']['attention_weights']
    p = variables['params']
    q = ref_dense_general(x, p['query']['kernel'], p['query']['bias'], 1)
    k = ref_dense_general(x, p['key']['kernel'], p['key']['bias'], 1)
    np.testing.assert_allclose(weights, ref_weights(q, k), rtol=1e-4, atol=1e-5)
    _, state = layer.apply(variables, x, mutable=['intermediates'])
    assert 'intermediates' not in state or not state['intermediates']


def test_mha_decode_matches_causal_attention():
    layer = MultiHeadDotProductAttention(num_heads=2, qkv_features=8, decode=True)
    full = MultiHeadDotProductAttention(num_heads=2, qkv_features=8)
    x = _normal(0, (2, 5, 4))
    variables = layer.init(KEYS[1], x)
    cache = variables['cache']
    assert cache['cached_key'].shape == (2, 5, 2, 4)
    assert cache['cached_value'].shape == (2, 5, 2, 4)
    assert cache['cache_index'].dtype == jnp.int32 and int(cache['cache_index']) == 0
    params = {'params': variables['params']}
    expected = full.apply(params, x, mask=make_causal_mask(x[..., 0]))
    steps = []
    state = {'cache': cache}
    for t in range(5):
        y, state = layer.apply({**params, **state}, x[:, t : t + 1], mutable=['cache'])
        steps.append(y)
    assert int(state['cache']['cache_index']) == 5
    np.testing.assert_allclose(jnp.concatenate(steps, axis=1), expected, rtol=1e-5, atol=1e-5)


def test_mha_decode_wrong_query_shape():
    layer = MultiHeadDotProductAttention(num_heads=2, decode=True)
    x = jnp.ones((2, 5, 4))
    variables = layer.init(KEYS[1], x)
    with pytest.raises(AutoregressiveCacheShapeError, match=r'expected query shape \(2, 1, 2, 2\)'):
        layer.apply(variables, x, mutable=['cache'])


def test_self_attention_and_alias():
    x = _normal(0, (2, 3, 4))
    self_attn = SelfAttention(num_heads=2)
    # Deprecated in Flax, which warns on every call: so does linen, Flax's words first.
    with pytest.warns(DeprecationWarning, match='^SelfAttention will be deprecated soon'):
        variables = self_attn.init(KEYS[1], x)
    ref = ref_mha(variables['params'], x, x, x)
    with pytest.warns(DeprecationWarning, match='SelfAttention at the root|SelfAttention:'):
        y = self_attn.apply(variables, x)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
    mha = MultiHeadAttention(num_heads=2)
    np.testing.assert_allclose(mha.apply(variables, x), ref, rtol=1e-4, atol=1e-4)
    assert issubclass(MultiHeadAttention, MultiHeadDotProductAttention)


def test_einsum_overrides():
    q, k, v = _normal(0, (2, 4, 2, 8)), _normal(1, (2, 5, 2, 8)), _normal(2, (2, 5, 2, 8))
    calls = []

    def counting_dot_general(*args, **kwargs):
        calls.append(1)
        return jax.lax.dot_general(*args, **kwargs)

    def counting_einsum(*args, **kwargs):
        calls.append(2)
        return jnp.einsum(*args, **kwargs)

    expected = ref_attention(q, k, v)
    out = dot_product_attention(q, k, v, einsum_dot_general=counting_dot_general)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    assert calls.count(1) == 2
    out = dot_product_attention(
        q, k, v, qk_attn_weights_einsum=counting_einsum, attn_weights_value_einsum=counting_einsum
    )
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    assert calls.count(2) == 2
    with pytest.raises(ValueError, match='mutually exclusive'):
        dot_product_attention_weights(
            q, k, einsum=counting_einsum, einsum_dot_general=counting_dot_general
        )


def test_custom_einsums_are_called_with_the_operands_only():
    q = jnp.ones((1, 3, 2, 4))
    seen = []

    def recording_einsum(equation, lhs, rhs, **kwargs):
        seen.append((equation, sorted(kwargs)))
        return jnp.einsum(equation, lhs, rhs, **kwargs)

    out = dot_product_attention(
        q, q, q, qk_attn_weights_einsum=recording_einsum, attn_weights_value_einsum=recording_einsum
    )
    np.testing.assert_allclose(out, ref_attention(q, q, q), rtol=1e-6, atol=1e-6)
    assert seen == [('...qhd,...khd->...hqk', []), ('...hqk,...khd->...qhd', [])]


@pytest.mark.parametrize(
    'kwargs',
    [
        {'precision': jax.lax.Precision.DEFAULT},
        {'einsum_dot_general': jax.lax.dot_general},
    ],
    ids=['precision', 'einsum_dot_general'],
)
def test_custom_einsums_exclude_precision_and_dot_general(kwargs):
    q = jnp.ones((1, 4, 2))
    with pytest.raises(ValueError, match='mutually exclusive'):
        dot_product_attention(
            q,
            q,
            q,
            qk_attn_weights_einsum=jnp.einsum,
            attn_weights_value_einsum=jnp.einsum,
            **kwargs,
        )
    with pytest.raises(ValueError, match='mutually exclusive'):
        dot_product_attention_weights(q, q, einsum=jnp.einsum, **kwargs)


@pytest.mark.parametrize('which', ['qk_attn_weights_einsum', 'attn_weights_value_einsum'])
def test_custom_einsums_come_together(which):
    q = jnp.ones((1, 4, 2))
    with pytest.raises(ValueError, match='must be specified together'):
        dot_product_attention(q, q, q, **{which: jnp.einsum})


def test_mha_dot_general_and_einsum_classes():
    calls = []

    def counting_dot_general(*args, **kwargs):
        calls.append('qkv')
        return jax.lax.dot_general(*args, **kwargs)

    class CountingEinsum:
        def __call__(self, *args, **kwargs):
            calls.append('einsum')
            return jnp.einsum(*args, **kwargs)

    layer = MultiHeadDotProductAttention(
        num_heads=2,
        qkv_dot_general=counting_dot_general,
        qk_attn_weights_einsum_cls=CountingEinsum,
        attn_weights_value_einsum_cls=CountingEinsum,
    )
    x = _normal(0, (2, 3, 4))
    variables = layer.init(KEYS[1], x)
    calls.clear()
    out = layer.apply(variables, x)
    assert calls.count('qkv') == 3 and calls.count('einsum') == 2
    np.testing.assert_allclose(out, ref_mha(variables['params'], x, x, x), rtol=1e-4, atol=1e-4)
