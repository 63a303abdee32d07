"""Dot-product attention as functions: the attention weights and the weighted sum.

Shapes follow Flax's convention: queries are ``[batch..., q_length, num_heads, depth]``,
keys and values ``[batch..., kv_length, num_heads, depth]``, attention weights
``[batch..., num_heads, q_length, kv_length]``, and masks/biases broadcast to the weights.
The multi-head layers and the masks built on these are in ``_attention.py``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from linen.layers._dtypes import canonicalize_dtype, promote_dtype
from linen.layers._explicit import contraction_out_sharding, explicit_mesh, inferable_operands
from linen.layers._staged import STAGING_TRACER, nested_derivative, staged
from linen.layers._types import shape_of
from linen.layers.errors import (
    AttentionInputShapeError,
    AttentionMaskShapeError,
    LayerArgumentError,
)
from linen.module import Module

Array = Any
PRNGKey = Any
_Tracer = jax.core.Tracer
Dtype = Any


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


def _root(depth: int, dtype) -> Array:
    return jnp.sqrt(depth).astype(dtype)


# (traced once per depth and dtype: the two equations without jnp's Python each time)
_staged_root = staged(_root, static_argnums=(0, 1))


def _depth_scale(query, dtype):
    """``sqrt(depth)`` in ``dtype``: the square root taken in JAX's default float type
    (float32; float64 in 64-bit mode), as ``jnp.sqrt(depth)`` takes it, then cast.

    Traced, the root is an operation of the program, as in Flax's (XLA folds it; a
    constant in its place is another program, which XLA may round otherwise). Eagerly
    the host computes the same root, without a device operation.
    """
    depth = shape_of(query)[-1]
    if isinstance(query, _Tracer):
        return _staged_root(depth, dtype)
    return np.sqrt(np.asarray(depth, jax.dtypes.canonicalize_dtype(np.float64))).astype(dtype)


def _weights_body(query, key, bias, mask, dtype, precision, force_fp32_for_softmax):
    """Scaled logits, bias, mask and softmax: the operations of the default path, in order."""
    query = query / _root(query.shape[-1], dtype)  # (traced: see _depth_scale)
    logits = jnp.einsum('...qhd,...khd->...hqk', query, key, precision=precision)
    if bias is not None:
        logits = logits + bias
    if mask is not None:
        logits = jnp.where(mask, logits, jnp.finfo(dtype).min)
    if force_fp32_for_softmax and dtype != jnp.float32:
        return jax.nn.softmax(logits.astype(jnp.float32))
    return jax.nn.softmax(logits).astype(dtype)


def _weighted_sum_body(weights, value, precision):
    return jnp.einsum('...hqk,...khd->...qhd', weights, value, precision=precision)


# Under a staging trace the default path runs as two cached, inlined calls (see
# ``_staged.py``): the equations of the direct calls, without re-parsing the einsums
# and re-checking every operand on each layer call. Only there: under eager vmap or
# grad a compiled run could round differently from the op-by-op one.
_staged_weights = staged(_weights_body, static_argnums=(4, 5, 6))
_staged_weighted_sum = staged(_weighted_sum_body, static_argnums=2)


def _stageable(a, b) -> bool:
    """Whether the default path on ``a`` and ``b`` may run staged: a staging trace, no
    explicit mesh axes, and no gradient of a gradient to regroup its sums (F36). (Its
    precision is hashable: ``jnp.einsum`` takes it as a static argument too.)"""
    staged_a, staged_b = type(a) is STAGING_TRACER, type(b) is STAGING_TRACER
    if not (staged_a or staged_b) or explicit_mesh(a, b) is not None:
        return False
    return (staged_a and staged_b) or not nested_derivative(a, b)


def _logits_shape(query, key) -> tuple:
    qs, ks = shape_of(query), shape_of(key)
    return qs[:-3] + (qs[-2], qs[-3], ks[-3])


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
    if einsum is not None and (precision or einsum_dot_general is not None):  # Flax's test
        raise LayerArgumentError(
            where,
            '`einsum` was given with `precision` or `einsum_dot_general`',
            'A custom einsum is called with the operands only: pass the precision or the '
            'dot_general inside it (e.g. functools.partial(jnp.einsum, precision=...)).',
            flax_text='precision/einsum_dot_general and einsum are mutually exclusive. '
            'Please specify only one of them.',
        )
    if einsum is None and einsum_dot_general is None and _stageable(query, key):
        shape = _logits_shape(query, key)
        if bias is not None and not _broadcasts_to(jnp.shape(bias), shape):
            raise AttentionMaskShapeError(where, 'bias', jnp.shape(bias), shape)
        if mask is not None and not _broadcasts_to(jnp.shape(mask), shape):
            raise AttentionMaskShapeError(where, 'mask', jnp.shape(mask), shape)
        weights = _staged_weights(query, key, bias, mask, dtype, precision, force_fp32_for_softmax)
        return _sow_and_drop(
            weights, module, key, deterministic, dropout_rate, broadcast_dropout, dropout_rng
        )
    query = query / _depth_scale(query, dtype)
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
    return _sow_and_drop(
        weights, module, key, deterministic, dropout_rate, broadcast_dropout, dropout_rng
    )


def _sow_and_drop(
    weights, module, key, deterministic, dropout_rate, broadcast_dropout, dropout_rng
):
    """The weights sown (as ``intermediates/attention_weights``) and dropped out."""
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
        precision or einsum_dot_general is not None  # Flax's test: a falsy precision passes
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
    if (
        attn_weights_value_einsum is None
        and einsum_dot_general is None
        and _stageable(weights, value)
    ):
        return _staged_weighted_sum(weights, value, precision)
    return _weights_times_value(
        weights, value, precision, einsum_dot_general, attn_weights_value_einsum
    )
