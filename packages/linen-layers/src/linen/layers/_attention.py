"""Dot-product attention: masks and the multi-head layers.

Shapes follow Flax's convention: queries are ``[batch..., q_length, num_heads, depth]``,
keys and values ``[batch..., kv_length, num_heads, depth]``, attention weights
``[batch..., num_heads, q_length, kv_length]``, and masks/biases broadcast to the weights.
The functions (``dot_product_attention`` and its weights) are in ``_dot_product.py``;
they are imported here too, where they were defined before.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from linen.layers._dot_product import _broadcasts_to, _where
from linen.layers._dot_product import dot_product_attention as dot_product_attention
from linen.layers._dot_product import (
    dot_product_attention_weights as dot_product_attention_weights,
)
from linen.layers._explicit import (
    explicit_mesh,
    match_sharding,
    reshard_spec,
    spec_of,
)
from linen.layers._linear import DenseGeneral
from linen.layers._normalization import LayerNorm
from linen.layers.errors import AttentionInputsConflictError as AttentionInputsConflictError
from linen.layers.errors import AttentionInputShapeError as AttentionInputShapeError
from linen.layers.errors import AttentionMaskShapeError as AttentionMaskShapeError
from linen.layers.errors import AutoregressiveCacheShapeError as AutoregressiveCacheShapeError
from linen.layers.errors import CombineMasksRankError as CombineMasksRankError
from linen.layers.errors import QkvFeaturesNotDivisibleError as QkvFeaturesNotDivisibleError
from linen.module import Module, compact, merge_param

Array = Any
PRNGKey = Any
Dtype = Any

_default_kernel_init = jax.nn.initializers.lecun_normal()
_zeros_init = jax.nn.initializers.zeros


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
            raise CombineMasksRankError(
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
