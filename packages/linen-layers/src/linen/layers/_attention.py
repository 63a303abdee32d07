"""Dot-product attention: the functional core, masks, and the multi-head layers.

Shapes follow Flax's convention: queries are ``[batch..., q_length, num_heads, depth]``,
keys and values ``[batch..., kv_length, num_heads, depth]``, attention weights
``[batch..., num_heads, q_length, kv_length]``, and masks/biases broadcast to the weights.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from linen.layers._dtypes import canonicalize_dtype, promote_dtype
from linen.layers._explicit import (
    contraction_out_sharding,
    explicit_mesh,
    inferable_operands,
    match_sharding,
    reshard_spec,
    spec_of,
)
from linen.layers._linear import DenseGeneral
from linen.layers._normalization import LayerNorm
from linen.layers._types import shape_of
from linen.layers.errors import AttentionInputsConflictError as AttentionInputsConflictError
from linen.layers.errors import AttentionInputShapeError as AttentionInputShapeError
from linen.layers.errors import AttentionMaskShapeError as AttentionMaskShapeError
from linen.layers.errors import AutoregressiveCacheShapeError as AutoregressiveCacheShapeError
from linen.layers.errors import LayerArgumentError
from linen.layers.errors import QkvFeaturesNotDivisibleError as QkvFeaturesNotDivisibleError
from linen.module import Module, compact, merge_param

Array = Any
PRNGKey = Any
Dtype = Any

_default_kernel_init = jax.nn.initializers.lecun_normal()
_zeros_init = jax.nn.initializers.zeros


# ----------------------------------------------------------------------------- errors


def _where(module) -> str:
    """The module path an error names, e.g. ``"/encoder/attention"``."""
    if module is None:
        return 'dot_product_attention'
    scope = getattr(module, 'scope', None)
    path = getattr(scope, 'path', None) if scope is not None else None
    if path:
        return f'{type(module).__name__} at "/{"/".join(path)}"'
    return f'{type(module).__name__} {module.name!r}' if module.name else type(module).__name__


# ----------------------------------------------------------------------------- helpers


def _promote(*args, dtype=None):
    """Casts the arrays to ``dtype`` or their common inexact type; returns both."""
    dtype = canonicalize_dtype(*args, dtype=dtype)
    return promote_dtype(*args, dtype=dtype), dtype


def _broadcasts_to(shape, target) -> bool:
    if len(shape) > len(target):
        return False
    return all(s == 1 or s == t for s, t in zip(reversed(shape), reversed(target)))


def _check_qk(where, query, key):
    qs, ks = shape_of(query), shape_of(key)
    if len(qs) == len(ks) and len(qs) >= 3 and qs[:-3] == ks[:-3] and qs[-2:] == ks[-2:]:
        return  # (every call: the checks below, in one line)
    if len(qs) != len(ks):
        raise AttentionInputShapeError(
            where,
            f'query has rank {len(qs)} ({qs}) but key has rank {len(ks)} ({ks})',
        )
    if len(qs) < 3:
        raise AttentionInputShapeError(where, f'query has shape {qs}, rank {len(qs)} < 3')
    if qs[:-3] != ks[:-3]:
        raise AttentionInputShapeError(
            where, f'query batch dims {qs[:-3]} differ from key batch dims {ks[:-3]}'
        )
    raise AttentionInputShapeError(
        where, f"query (heads, depth) {qs[-2:]} differ from key's {ks[-2:]}"
    )


def _qk_logits(query, key, precision, einsum_dot_general, einsum):
    """``[..., q, h, d] x [..., k, h, d] -> [..., h, q, k]``.

    The same einsum Flax and a pure JAX model write, so the compiled program is
    theirs too (a hand-ordered dot_general compiles to a different HLO).
    """
    fn = _einsum(einsum_dot_general, einsum)
    query, key, sharding = _explicit_einsum(fn, query, key, 'qhd', 'khd', 'hqk')
    if einsum is not None:  # a user's einsum is called with the operands only (as Flax)
        return fn('...qhd,...khd->...hqk', query, key, **sharding)
    return fn('...qhd,...khd->...hqk', query, key, precision=precision, **sharding)


def _einsum(einsum_dot_general, einsum):
    if einsum is not None:
        return einsum
    if einsum_dot_general is not None:
        return functools.partial(jnp.einsum, _dot_general=einsum_dot_general)
    return jnp.einsum


def _weights_times_value(weights, value, precision, einsum_dot_general, einsum):
    """``[..., h, q, k] x [..., k, h, d] -> [..., q, h, d]``."""
    fn = _einsum(einsum_dot_general, einsum)
    weights, value, sharding = _explicit_einsum(fn, weights, value, 'hqk', 'khd', 'qhd')
    if einsum is not None:
        return fn('...hqk,...khd->...qhd', weights, value, **sharding)
    return fn('...hqk,...khd->...qhd', weights, value, precision=precision, **sharding)


def _explicit_einsum(fn, lhs, rhs, lhs_tail, rhs_tail, out_tail) -> tuple:
    """``(lhs, rhs, {'out_sharding': ...})`` where explicit mesh axes make JAX's choice ambiguous.

    ``jnp.einsum`` itself gets ``out_sharding``; a user's einsum (or ``dot_general``)
    need not take one, so its operands are resharded until JAX can infer the output.
    The ``...`` batch axes are spelled out in letters the tails do not use.
    """
    if explicit_mesh(lhs, rhs) is None:
        return lhs, rhs, {}
    letters = [c for c in 'abcefgijlmnoprstuvwxyz' if c not in lhs_tail + rhs_tail]
    n_lhs, n_rhs = lhs.ndim - len(lhs_tail), rhs.ndim - len(rhs_tail)
    n_out = max(n_lhs, n_rhs)
    if n_out > len(letters):
        return lhs, rhs, {}
    batch = ''.join(letters[:n_out])
    labels = (
        batch[n_out - n_lhs :] + lhs_tail,
        batch[n_out - n_rhs :] + rhs_tail,
        batch + out_tail,
    )
    if fn is not jnp.einsum:
        return (*inferable_operands(lhs, rhs, *labels), {})
    out_sharding = contraction_out_sharding(lhs, rhs, *labels)
    return lhs, rhs, ({} if out_sharding is None else {'out_sharding': out_sharding})


# ----------------------------------------------------------------------------- functions


def dot_product_attention_weights(
    query: Array,
    key: Array,
    bias: Array | None = None,
    mask: Array | None = None,
    broadcast_dropout: bool = True,
    dropout_rng: PRNGKey | None = None,
    dropout_rate: float = 0.0,
    deterministic: bool = False,
    dtype: Dtype | None = None,
    precision=None,
    module: Module | None = None,
    force_fp32_for_softmax: bool = False,
    einsum_dot_general: Callable[..., Array] | None = None,
    einsum: Callable[..., Array] | None = None,
) -> Array:
    """Computes the attention weights ``softmax(q k^T / sqrt(depth) + bias)``.

    Args:
      query: ``[batch..., q_length, num_heads, qk_depth]``.
      key: ``[batch..., kv_length, num_heads, qk_depth]``.
      bias: added to the logits; broadcastable to ``[batch..., num_heads, q_length,
        kv_length]``.
      mask: boolean (or 0/1) array broadcastable to the same shape; where it is False the
        logit becomes the dtype's most negative finite value.
      broadcast_dropout: use one dropout mask for every batch element and head.
      dropout_rng: key for dropout.
      dropout_rate: probability of dropping a weight.
      deterministic: disables dropout when True.
      dtype: computation dtype; by default the promoted dtype of query and key.
      precision: ``jax.lax.Precision`` of the matmul.
      module: when given, the weights are sown to its ``intermediates`` collection as
        ``attention_weights``.
      force_fp32_for_softmax: compute the softmax in float32 (the weights are then returned
        in float32) when the dtype is narrower.
      einsum_dot_general: a ``dot_general`` for the ``jnp.einsum`` computing the logits.
      einsum: an einsum function replacing ``jnp.einsum`` for the logits, called as
        ``einsum(equation, query, key)``; it excludes ``precision`` and
        ``einsum_dot_general`` (``ValueError``), as in Flax.

    Returns:
      Weights ``[batch..., num_heads, q_length, kv_length]``.

    >>> q = jnp.ones((1, 3, 2, 4))
    >>> dot_product_attention_weights(q, q).shape
    (1, 2, 3, 3)
    """
    where = _where(module) if module is not None else 'dot_product_attention_weights'
    (query, key), dtype = _promote(query, key, dtype=dtype)
    _check_qk(where, query, key)
    if einsum is not None and (precision is not None or einsum_dot_general is not None):
        raise LayerArgumentError(
            where,
            '`einsum` was given with `precision` or `einsum_dot_general`',
            'A custom einsum is called with the operands only: pass the precision or the '
            'dot_general inside it (e.g. functools.partial(jnp.einsum, precision=...)).',
            flax_text='precision/einsum_dot_general and einsum are mutually exclusive. '
            'Please specify only one of them.',
        )
    # A host-side constant: jnp.sqrt here would run an eager device op on every trace.
    query = query / np.sqrt(shape_of(query)[-1]).astype(dtype)
    logits = _qk_logits(query, key, precision, einsum_dot_general, einsum)
    if bias is not None:
        if not _broadcasts_to(jnp.shape(bias), logits.shape):
            raise AttentionMaskShapeError(where, 'bias', jnp.shape(bias), logits.shape)
        logits = logits + bias
    if mask is not None:
        if not _broadcasts_to(jnp.shape(mask), logits.shape):
            raise AttentionMaskShapeError(where, 'mask', jnp.shape(mask), logits.shape)
        logits = jnp.where(mask, logits, jnp.finfo(dtype).min)
    if force_fp32_for_softmax and dtype != jnp.float32:
        weights = jax.nn.softmax(logits.astype(jnp.float32))
    else:
        weights = jax.nn.softmax(logits).astype(dtype)
    if module is not None:
        module.sow('intermediates', 'attention_weights', weights)
    if not deterministic and dropout_rate > 0.0:
        keep_prob = 1.0 - dropout_rate
        if broadcast_dropout:
            # One mask over q/k shared by every batch element and head.
            mask_shape = (1,) * (key.ndim - 2) + weights.shape[-2:]
        else:
            mask_shape = weights.shape
        keep = jax.random.bernoulli(dropout_rng, keep_prob, mask_shape)
        weights = weights * (keep.astype(weights.dtype) / np.asarray(keep_prob, weights.dtype))
    return weights


def dot_product_attention(
    query: Array,
    key: Array,
    value: Array,
    bias: Array | None = None,
    mask: Array | None = None,
    broadcast_dropout: bool = True,
    dropout_rng: PRNGKey | None = None,
    dropout_rate: float = 0.0,
    deterministic: bool = False,
    dtype: Dtype | None = None,
    precision=None,
    module: Module | None = None,
    force_fp32_for_softmax: bool = False,
    einsum_dot_general: Callable[..., Array] | None = None,
    qk_attn_weights_einsum: Callable[..., Array] | None = None,
    attn_weights_value_einsum: Callable[..., Array] | None = None,
) -> Array:
    """Attention ``softmax(q k^T / sqrt(depth) + bias) v`` over the key/value length.

    Args are as for :func:`dot_product_attention_weights`, plus ``value``
    (``[batch..., kv_length, num_heads, v_depth]``) and the two einsum overrides for the
    logits (``qk_attn_weights_einsum``) and the weighted sum (``attn_weights_value_einsum``):
    given together or not at all, and not with ``precision`` or ``einsum_dot_general``
    (``ValueError``, as in Flax); each is called as ``einsum(equation, lhs, rhs)``.

    Returns:
      ``[batch..., q_length, num_heads, v_depth]``.

    >>> q = jnp.ones((1, 3, 2, 4))
    >>> dot_product_attention(q, q, q).shape
    (1, 3, 2, 4)
    """
    if (qk_attn_weights_einsum is None) != (attn_weights_value_einsum is None):
        given = (
            'qk_attn_weights_einsum'
            if attn_weights_value_einsum is None
            else ('attn_weights_value_einsum')
        )
        raise LayerArgumentError(
            _where(module) if module is not None else 'dot_product_attention',
            f'only `{given}` was given',
            'Pass both einsums (jnp.einsum for the one you do not customize), or neither.',
            flax_text='qk_attn_weights_einsum and attn_weights_value_einsum must be '
            'specified together.',
        )
    if qk_attn_weights_einsum is not None and (
        precision is not None or einsum_dot_general is not None
    ):
        raise LayerArgumentError(
            _where(module) if module is not None else 'dot_product_attention',
            'custom einsums were given with `precision` or `einsum_dot_general`',
            'A custom einsum is called with the operands only: pass the precision or the '
            'dot_general inside it (e.g. functools.partial(jnp.einsum, precision=...)).',
            flax_text='precision/einsum_dot_general and qk_attn_weights_einsum/'
            'attn_weights_value_einsum are mutually exclusive. Please specify only one of them.',
        )
    (query, key, value), dtype = _promote(query, key, value, dtype=dtype)
    ks, vs = shape_of(key), shape_of(value)
    if len(ks) != len(vs) or ks[:-1] != vs[:-1]:
        where = _where(module) if module is not None else 'dot_product_attention'
        raise AttentionInputShapeError(
            where,
            f'key shape {key.shape} and value shape {value.shape} differ before the '
            'last (depth) axis',
        )
    weights = dot_product_attention_weights(
        query,
        key,
        bias,
        mask,
        broadcast_dropout,
        dropout_rng,
        dropout_rate,
        deterministic,
        dtype,
        precision,
        module,
        force_fp32_for_softmax,
        einsum_dot_general=einsum_dot_general,
        einsum=qk_attn_weights_einsum,
    )
    return _weights_times_value(
        weights, value, precision, einsum_dot_general, attn_weights_value_einsum
    )


# ----------------------------------------------------------------------------- masks


def make_attention_mask(
    query_input: Array,
    key_input: Array,
    pairwise_fn: Callable[..., Any] = jnp.multiply,
    extra_batch_dims: int = 0,
    dtype: Dtype = jnp.float32,
) -> Array:
    """A mask ``[batch..., 1, q_len, kv_len]`` from per-position query and key inputs.

    ``mask[..., 0, i, j] = pairwise_fn(query_input[..., i], key_input[..., j])``;
    the singleton axis broadcasts over heads.

    Args:
      query_input: ``[batch..., q_len]``, e.g. a padding indicator.
      key_input: ``[batch..., kv_len]``.
      pairwise_fn: the elementwise comparison.
      extra_batch_dims: leading singleton axes to add.
      dtype: dtype of the mask.

    >>> make_attention_mask(jnp.array([[1, 1, 0]]), jnp.array([[1, 0]])).shape
    (1, 1, 3, 2)
    """
    mask = pairwise_fn(jnp.expand_dims(query_input, -1), jnp.expand_dims(key_input, -2))
    mask = jnp.expand_dims(mask, -3)
    if extra_batch_dims:
        mask = jnp.expand_dims(mask, tuple(range(extra_batch_dims)))
    return mask.astype(dtype)


def make_causal_mask(x: Array, extra_batch_dims: int = 0, dtype: Dtype = jnp.float32) -> Array:
    """A mask ``[batch..., 1, len, len]`` letting position ``i`` attend to ``j <= i``.

    Args:
      x: ``[batch..., len]``; only its shape is used.
      extra_batch_dims: leading singleton axes to add.
      dtype: dtype of the mask.

    >>> make_causal_mask(jnp.ones((1, 3)))[0, 0]
    Array([[1., 0., 0.],
           [1., 1., 0.],
           [1., 1., 1.]], dtype=float32)
    """
    positions = jnp.broadcast_to(jnp.arange(x.shape[-1], dtype=jnp.int32), x.shape)
    return make_attention_mask(positions, positions, jnp.greater_equal, extra_batch_dims, dtype)


def combine_masks(*masks: Array | None, dtype: Dtype = jnp.float32) -> Array | None:
    """Logical AND of the given masks (``None`` entries are skipped).

    Returns ``None`` if every mask is ``None``.

    >>> combine_masks(jnp.array([1, 1, 0]), None, jnp.array([0, 1, 1]))
    Array([0., 1., 0.], dtype=float32)
    """
    present = [m for m in masks if m is not None]
    if not present:
        return None
    first = present[0]
    for other in present[1:]:
        if other.ndim != first.ndim:
            raise AttentionMaskShapeError(
                'combine_masks',
                'mask',
                other.shape,
                f'the rank of the first mask {tuple(first.shape)} (combined masks must have '
                'equal rank; expand the lower-rank mask with `jnp.expand_dims`)',
            )
    mask = present[0]
    for other in present[1:]:
        mask = jnp.logical_and(mask, other)
    return mask.astype(dtype)


# ----------------------------------------------------------------------------- layers


# Flax's sentence for passing ``inputs_kv`` with ``inputs_k``/``inputs_v``.
_FLAX_KV_CONFLICT = (
    'If either `inputs_k` or `inputs_v` is not None, `inputs_kv` must be None. If '
    '`inputs_kv` is not None, both `inputs_k` and `inputs_v` must be None.'
)


class MultiHeadDotProductAttention(Module):
    """Multi-head dot-product attention.

    Projects ``inputs_q`` to queries and ``inputs_k``/``inputs_v`` to keys and values with
    :class:`DenseGeneral` layers named ``query``, ``key``, ``value`` (kernels
    ``[features, num_heads, head_dim]``), runs ``attention_fn`` and projects back with
    ``out`` (kernel ``[num_heads, head_dim, out_features]``).

    Attributes:
      num_heads: number of heads; ``qkv_features`` must be divisible by it.
      dtype: computation dtype (default: inferred from inputs and params).
      param_dtype: dtype of the parameters.
      qkv_features: size of queries/keys/values over all heads (default: last dim of
        ``inputs_q``).
      out_features: size of the output (default: last dim of ``inputs_q``).
      broadcast_dropout: one dropout mask over batch and heads.
      dropout_rate: attention dropout rate.
      deterministic: disables dropout; merged with the ``__call__`` argument.
      precision: matmul precision.
      kernel_init: initializer of the q/k/v kernels (and of ``out`` unless
        ``out_kernel_init`` is set).
      out_kernel_init: initializer of the output kernel.
      bias_init: initializer of the q/k/v biases (and of ``out`` unless ``out_bias_init``).
      out_bias_init: initializer of the output bias.
      use_bias: whether the projections have biases.
      attention_fn: ``dot_product_attention`` or a compatible function.
      decode: autoregressive decoding: keys and values are accumulated in the ``cache``
        collection (``cached_key``, ``cached_value``, ``cache_index``).
      normalize_qk: apply a bias-free :class:`LayerNorm` (``query_ln``, ``key_ln``) to
        queries and keys.
      force_fp32_for_softmax: compute the softmax in float32.
      qkv_dot_general, out_dot_general, qkv_dot_general_cls, out_dot_general_cls:
        ``dot_general`` overrides of the projections.
      qk_attn_weights_einsum_cls, attn_weights_value_einsum_cls: factories of the einsum
        functions used inside ``attention_fn``.

    >>> layer = MultiHeadDotProductAttention(num_heads=2, qkv_features=8)
    >>> x = jnp.ones((1, 5, 4))
    >>> variables = layer.init(jax.random.key(0), x)
    >>> layer.apply(variables, x).shape
    (1, 5, 4)
    """

    num_heads: int
    dtype: Dtype | None = None
    param_dtype: Dtype = jnp.float32
    qkv_features: int | None = None
    out_features: int | None = None
    broadcast_dropout: bool = True
    dropout_rate: float = 0.0
    deterministic: bool | None = None
    precision: Any = None
    kernel_init: Callable = _default_kernel_init
    out_kernel_init: Callable | None = None
    bias_init: Callable = _zeros_init
    out_bias_init: Callable | None = None
    use_bias: bool = True
    attention_fn: Callable[..., Array] = dot_product_attention
    decode: bool = False
    normalize_qk: bool = False
    force_fp32_for_softmax: bool = False
    qkv_dot_general: Callable | None = None
    out_dot_general: Callable | None = None
    qkv_dot_general_cls: Any = None
    out_dot_general_cls: Any = None
    qk_attn_weights_einsum_cls: Callable[..., Callable[..., Array]] | None = None
    attn_weights_value_einsum_cls: Callable[..., Callable[..., Array]] | None = None

    @compact
    def __call__(
        self,
        inputs_q: Array,
        inputs_k: Array | None = None,
        inputs_v: Array | None = None,
        *,
        inputs_kv: Array | None = None,
        mask: Array | None = None,
        deterministic: bool | None = None,
        dropout_rng: PRNGKey | None = None,
        sow_weights: bool = False,
    ):
        """Attends from ``inputs_q`` to ``inputs_k``/``inputs_v``.

        Args:
          inputs_q: ``[batch..., q_length, features]``.
          inputs_k: ``[batch..., kv_length, features]``; defaults to ``inputs_q``
            (self-attention).
          inputs_v: defaults to ``inputs_k``.
          inputs_kv: deprecated; sets both ``inputs_k`` and ``inputs_v``.
          mask: broadcastable to ``[batch..., num_heads, q_length, kv_length]``.
          deterministic: disables dropout; merged with the attribute.
          dropout_rng: key for dropout (default: ``self.make_rng('dropout')``).
          sow_weights: sow the attention weights into ``intermediates``.

        Returns:
          ``[batch..., q_length, out_features]``.
        """
        if inputs_kv is not None:
            if inputs_k is not None or inputs_v is not None:
                raise AttentionInputsConflictError(
                    _where(self),
                    'if either `inputs_k` or `inputs_v` is given, `inputs_kv` must be None',
                    flax_text=_FLAX_KV_CONFLICT,
                )
            warnings.warn(
                'The inputs_kv arg will be deprecated soon. Use inputs_k and inputs_v '
                f'instead. ({_where(self)}: pass inputs_k, and inputs_v when it differs.)',
                DeprecationWarning,
                stacklevel=2,
            )
            inputs_k = inputs_v = inputs_kv
        else:
            if inputs_k is None:
                if inputs_v is not None:
                    raise AttentionInputsConflictError(
                        _where(self),
                        '`inputs_k` cannot be None if `inputs_v` is given',
                        flax_text='`inputs_k` cannot be None if `inputs_v` is not None.',
                    )
                inputs_k = inputs_q
            if inputs_v is None:
                inputs_v = inputs_k
            elif inputs_v.ndim >= 2 and inputs_v.shape[-1] == inputs_v.shape[-2]:
                # Flax's guard for code written before `mask` became keyword-only: a
                # square third argument is more likely a mask than values.
                warnings.warn(
                    f'You are passing an array of shape {inputs_v.shape} to the `inputs_v` '
                    'arg, when you may have intended to pass it to the `mask` arg. As of '
                    "Flax version 0.7.4, the function signature of MultiHeadDotProductAttention's "
                    '`__call__` method has changed to `__call__(inputs_q, inputs_k=None, '
                    'inputs_v=None, *, inputs_kv=None, mask=None, deterministic=None)`. Use the '
                    f'kwarg `mask` instead. ({_where(self)}.)',
                    DeprecationWarning,
                    stacklevel=2,
                )

        features = self.out_features or inputs_q.shape[-1]
        qkv_features = self.qkv_features or inputs_q.shape[-1]
        if qkv_features % self.num_heads:
            raise QkvFeaturesNotDivisibleError(_where(self), qkv_features, self.num_heads)
        head_dim = qkv_features // self.num_heads

        projection = functools.partial(
            DenseGeneral,
            axis=-1,
            dtype=self.dtype,
            param_dtype=self.param_dtype,
            features=(self.num_heads, head_dim),
            kernel_init=self.kernel_init,
            bias_init=self.bias_init,
            use_bias=self.use_bias,
            precision=self.precision,
            **_dot_general_kwargs(self.qkv_dot_general, self.qkv_dot_general_cls),
        )
        query = projection(name='query')(inputs_q)
        key = projection(name='key')(inputs_k)
        value = projection(name='value')(inputs_v)

        if self.normalize_qk:
            query = LayerNorm(
                name='query_ln', use_bias=False, dtype=self.dtype, param_dtype=self.param_dtype
            )(query)
            key = LayerNorm(
                name='key_ln', use_bias=False, dtype=self.dtype, param_dtype=self.param_dtype
            )(key)

        if mask is not None and not self.decode:
            expected = (*query.shape[:-3], self.num_heads, query.shape[-3], key.shape[-3])
            if not _broadcasts_to(jnp.shape(mask), expected):
                raise AttentionMaskShapeError(_where(self), 'mask', jnp.shape(mask), expected)

        if self.decode:
            key, value, mask = self._update_cache(query, key, value, mask)

        if self.dropout_rate > 0.0:
            deterministic = merge_param('deterministic', self.deterministic, deterministic)
            if not deterministic and dropout_rng is None:
                dropout_rng = self.make_rng('dropout')
        else:
            deterministic = True

        extra = {}
        if sow_weights:
            extra['module'] = self
        if self.force_fp32_for_softmax:
            extra['force_fp32_for_softmax'] = True
        if self.qk_attn_weights_einsum_cls is not None:
            extra['qk_attn_weights_einsum'] = self.qk_attn_weights_einsum_cls()
        if self.attn_weights_value_einsum_cls is not None:
            extra['attn_weights_value_einsum'] = self.attn_weights_value_einsum_cls()
        x = self.attention_fn(
            query,
            key,
            value,
            mask=mask,
            dropout_rng=dropout_rng,
            dropout_rate=self.dropout_rate,
            broadcast_dropout=self.broadcast_dropout,
            deterministic=deterministic,
            dtype=self.dtype,
            precision=self.precision,
            **extra,
        )
        return DenseGeneral(
            features=features,
            axis=(-2, -1),
            kernel_init=self.out_kernel_init or self.kernel_init,
            bias_init=self.out_bias_init or self.bias_init,
            use_bias=self.use_bias,
            dtype=self.dtype,
            param_dtype=self.param_dtype,
            precision=self.precision,
            **_dot_general_kwargs(self.out_dot_general, self.out_dot_general_cls),
            name='out',
        )(x)

    def _update_cache(self, query, key, value, mask):
        """Writes this step's key/value into the cache; returns the cached ones and mask.

        At init the cache is created from the full-length key/value (sizing it) and the
        inputs pass through unchanged.
        """
        is_initialized = self.has_variable('cache', 'cached_key')
        cached_key = self.variable('cache', 'cached_key', _zeros_like, key)
        cached_value = self.variable('cache', 'cached_value', _zeros_like, value)
        cache_index = self.variable('cache', 'cache_index', lambda: jnp.array(0, dtype=jnp.int32))
        if not is_initialized:
            return key, value, mask
        *batch_dims, max_length, num_heads, depth = cached_key.value.shape
        expected = (*batch_dims, 1, num_heads, depth)
        if expected != query.shape:
            raise AutoregressiveCacheShapeError(_where(self), expected, query.shape)
        index = cache_index.value
        zero = jnp.zeros((), index.dtype)
        start = (zero,) * len(batch_dims) + (index, zero, zero)
        key = _write_step(cached_key.value, key, start)
        value = _write_step(cached_value.value, value, start)
        cached_key.value = key
        cached_value.value = value
        cache_index.value = index + 1
        # Only the positions written so far are visible to this step's query.
        step_mask = jnp.broadcast_to(
            jnp.arange(max_length) <= index, (*batch_dims, 1, 1, max_length)
        )
        return key, value, combine_masks(mask, step_mask)


def _zeros_like(x):
    """A zero cache shaped like ``x``; under explicit mesh axes also sharded like it."""
    zeros = jnp.zeros(x.shape, x.dtype)
    return zeros if explicit_mesh(x) is None else match_sharding(zeros, x)


def _write_step(cache, update, start):
    """``cache`` with ``update`` written at ``start``, keeping the cache's sharding.

    Under explicit mesh axes ``dynamic_update_slice`` needs the update sharded like
    the cache; the step is resharded to it (a cache sharded over its length axis is
    gathered along it for the write and moved back after, so a decode loop's carry
    keeps its type). Elsewhere this is the plain update.
    """
    update = update.astype(cache.dtype)
    if explicit_mesh(cache, update) is None:
        return lax.dynamic_update_slice(cache, update, start)
    length = cache.ndim - 3
    spec = spec_of(cache)
    open_length = (*spec[:length], None, *spec[length + 1 :])
    written = lax.dynamic_update_slice(
        reshard_spec(cache, open_length), reshard_spec(update, open_length), start
    )
    return reshard_spec(written, spec)


def _dot_general_kwargs(dot_general, dot_general_cls) -> dict:
    """Passes only the overrides that are set, so DenseGeneral's defaults apply."""
    kwargs = {}
    if dot_general is not None:
        kwargs['dot_general'] = dot_general
    if dot_general_cls is not None:
        kwargs['dot_general_cls'] = dot_general_cls
    return kwargs


class MultiHeadAttention(MultiHeadDotProductAttention):
    """Alias of :class:`MultiHeadDotProductAttention` (auto-named ``MultiHeadAttention_N``).

    >>> layer = MultiHeadAttention(num_heads=2)
    >>> x = jnp.ones((1, 5, 4))
    >>> layer.apply(layer.init(jax.random.key(0), x), x).shape
    (1, 5, 4)
    """


class SelfAttention(MultiHeadDotProductAttention):
    """Self-attention: :class:`MultiHeadDotProductAttention` with ``inputs_k = inputs_q``.

    Deprecated, as in Flax: every call warns ``DeprecationWarning``. Call
    ``MultiHeadDotProductAttention`` with ``inputs_q`` alone for the same parameters
    and outputs.

    >>> import warnings
    >>> layer = SelfAttention(num_heads=2)
    >>> x = jnp.ones((1, 5, 4))
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter('always')
    ...     y = layer.apply(layer.init(jax.random.key(0), x), x)
    >>> y.shape, caught[0].category.__name__
    ((1, 5, 4), 'DeprecationWarning')
    """

    @compact
    def __call__(  # type: ignore[override]
        self,
        inputs_q: Array,
        mask: Array | None = None,
        deterministic: bool | None = None,
        dropout_rng: PRNGKey | None = None,
        sow_weights: bool = False,
    ):
        """Attends from ``inputs_q`` to itself; see the parent's ``__call__``."""
        warnings.warn(
            'SelfAttention will be deprecated soon. Use '
            '`MultiHeadDotProductAttention.__call__(inputs_q)` instead. '
            f'({_where(self)}: the same parameters and outputs come from '
            'MultiHeadDotProductAttention called with inputs_q alone.)',
            DeprecationWarning,
            stacklevel=2,
        )
        return super().__call__(
            inputs_q,
            mask=mask,
            deterministic=deterministic,
            dropout_rng=dropout_rng,
            sow_weights=sow_weights,
        )
