"""Convolution layers: Conv, ConvLocal, ConvTranspose, their shared base and padding helpers.

Parameter names, shapes, initializers and the order in which parameters are
created follow ``flax.linen``, as for the layers in ``_linear`` (whose shared
helpers this module imports).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from linen.layers import initializers
from linen.layers._dtypes import promote_dtype
from linen.layers._explicit import (
    conv_out_sharding,
    explicit_mesh,
    local_conv,
    replicate_for_conv,
)
from linen.layers._linear import _add_bias, default_kernel_init
from linen.layers._staged import one_op_exact, staged
from linen.layers._typing import Array, Dtype
from linen.layers.errors import (
    ConvTransposeArgumentError,
    ConvTransposeInputRankError,
    LayerArgumentError,
    LayerFeatureGroupError,
    LayerInputRankError,
    LayerMaskShapeError,
    LayerPaddingError,
    LayerPaddingStringError,
    LocalConvFeatureGroupError,
    describe_layer,
)
from linen.module import Module, compact

__all__ = [
    'canonicalize_padding',
    'Conv',
    'ConvLocal',
    'ConvTranspose',
]

PaddingLike = str | int | Sequence[int | tuple[int, int]]


def _broadcast_spatial(value, n: int, what: str, layer) -> tuple[int, ...]:
    if value is None:
        return (1,) * n
    if isinstance(value, int):
        return (value,) * n
    value = tuple(value)
    if len(value) != n:
        args = (
            describe_layer(layer),
            f'{what}={value} has {len(value)} entries for {n} spatial dimensions',
            f'Give one {what} per spatial dimension, or a single int.',
        )
        if isinstance(layer, ConvTranspose):  # lax.conv_transpose: a TypeError under Flax
            raise ConvTransposeArgumentError(*args)
        raise LayerArgumentError(*args)
    return value


_PADDING_STRINGS = ('SAME', 'SAME_LOWER', 'VALID', 'CIRCULAR', 'REFLECT', 'CAUSAL')
# The strings lax itself pads by; lax reads them in any case ('same'), so Flax does too.
_LAX_PADDING_STRINGS = ('SAME', 'SAME_LOWER', 'VALID')
# How jnp.pad extends the input for the padding modes lax has no name for.
_PAD_MODES = {'CIRCULAR': 'wrap', 'REFLECT': 'reflect'}


def _describe(layer) -> str:
    return layer if isinstance(layer, str) else describe_layer(layer)


def canonicalize_padding(padding: PaddingLike, rank: int):
    """The padding in the form ``lax`` takes: a string, or ``rank`` ``(low, high)`` pairs.

    An int pads both sides of every spatial dimension; a sequence gives one int or
    pair per dimension (one entry is repeated for all of them).

    >>> canonicalize_padding(1, 2)
    [(1, 1), (1, 1)]
    >>> canonicalize_padding([(0, 1), 2], 2)
    [(0, 1), (2, 2)]
    >>> canonicalize_padding('SAME', 3)
    'SAME'

    Raises:
      LayerPaddingError: (a ``ValueError``) for anything else.
    """
    return _canonical_padding(padding, rank, 'canonicalize_padding')


def _canonical_padding(padding, n: int, layer):
    """A padding string, or a list of ``n`` ``(low, high)`` pairs."""
    if isinstance(padding, str):
        if padding.upper() in _LAX_PADDING_STRINGS:
            return padding  # as given: lax reads it, as under Flax
        if padding not in _PADDING_STRINGS:
            raise LayerPaddingStringError(_describe(layer), padding, 'unknown padding string')
        return padding
    if isinstance(padding, int):
        return [(padding, padding)] * n
    if isinstance(padding, Sequence):
        pairs = []
        for p in padding:
            if isinstance(p, int):
                pairs.append((p, p))
            elif isinstance(p, Sequence) and len(p) == 2:
                pairs.append((int(p[0]), int(p[1])))
            else:
                raise LayerPaddingError(
                    _describe(layer), padding, f'entry {p!r} is not an int or a pair'
                )
        if len(pairs) == 1 and n != 1:
            pairs = pairs * n
        if len(pairs) != n:
            raise LayerPaddingError(
                _describe(layer),
                padding,
                f'{len(pairs)} entries for {n} spatial dimensions',
            )
        return pairs
    raise LayerPaddingError(_describe(layer), padding, f'unsupported type {type(padding)}')


def _conv(inputs, kernel, strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
          feature_group_count, precision):  # fmt: skip
    return lax.conv_general_dilated(
        inputs, kernel, strides, padding, lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation,
        dimension_numbers=dimension_numbers, feature_group_count=feature_group_count,
        precision=precision,
    )  # fmt: skip


# Conv's default convolution on concrete values (or staged) without explicit mesh
# axes: a one-operation staged call (see `_staged.py`).
_one_conv = staged(_conv, static_argnums=(2, 3, 4, 5, 6, 7, 8))


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:  # e.g. padding given as a list of pairs: run directly
        return False
    return True


def _conv_dimension_numbers(n: int) -> lax.ConvDimensionNumbers:
    """Channels-last layouts: inputs ``(N, *spatial, C)``, kernel ``(*spatial, I, O)``."""
    lhs = (0, n + 1, *range(1, n + 1))
    rhs = (n + 1, n, *range(n))
    return lax.ConvDimensionNumbers(lhs_spec=lhs, rhs_spec=rhs, out_spec=lhs)


def _kernel_size(module) -> tuple[int, ...]:
    ks = module.kernel_size
    return (ks,) if isinstance(ks, int) else tuple(ks)


def _flatten_batch(module, inputs, n: int):
    """Gives the input exactly one batch axis; returns it and the original batch shape."""
    if inputs.ndim < n + 1:
        args = (
            describe_layer(module),
            f'>= {n + 1} for a {n}-D kernel (..., {n} spatial dims, features)',
            inputs.shape,
            'Add the missing spatial/feature axes, or give `kernel_size` one entry per '
            'spatial dimension.',
        )
        if isinstance(module, ConvTranspose):  # Flax: lax.conv_transpose asserts the ranks
            raise ConvTransposeInputRankError(*args)
        raise LayerInputRankError(*args)
    batch_shape = inputs.shape[: inputs.ndim - n - 1]
    if len(batch_shape) != 1:
        inputs = jnp.reshape(inputs, (-1, *inputs.shape[len(batch_shape) :]))
    return inputs, batch_shape


def _restore_batch(y, batch_shape):
    if len(batch_shape) != 1:
        y = jnp.reshape(y, (*batch_shape, *y.shape[1:]))
    return y


def _check_mask(module, kernel_shape):
    if module.mask is not None and tuple(jnp.shape(module.mask)) != tuple(kernel_shape):
        raise LayerMaskShapeError(describe_layer(module), jnp.shape(module.mask), kernel_shape)


class _ConvBase(Module):
    """Shared body of :class:`Conv` (shared weights) and :class:`ConvLocal`."""

    features: int
    kernel_size: int | Sequence[int]
    strides: None | int | Sequence[int] = 1
    padding: PaddingLike = 'SAME'
    input_dilation: None | int | Sequence[int] = 1
    kernel_dilation: None | int | Sequence[int] = 1
    feature_group_count: int = 1
    use_bias: bool = True
    mask: Array | None = None
    dtype: Dtype | None = None
    param_dtype: Dtype = jnp.float32
    precision: Any = None
    kernel_init: Callable = default_kernel_init
    bias_init: Callable = initializers.zeros_init()
    promote_dtype: Callable = promote_dtype
    conv_general_dilated: Callable | None = None
    conv_general_dilated_cls: Any = None

    shared_weights = True  # class constant, not a field

    @compact
    def __call__(self, inputs: Array) -> Array:
        kernel_size = _kernel_size(self)
        n = len(kernel_size)
        inputs, batch_shape = _flatten_batch(self, inputs, n)
        strides = _broadcast_spatial(self.strides, n, 'strides', self)
        input_dilation = _broadcast_spatial(self.input_dilation, n, 'input_dilation', self)
        kernel_dilation = _broadcast_spatial(self.kernel_dilation, n, 'kernel_dilation', self)

        padding = _canonical_padding(self.padding, n, self)
        if isinstance(padding, str) and padding in _PAD_MODES:
            dilated = [(k - 1) * d + 1 for k, d in zip(kernel_size, kernel_dilation)]
            pads = [(0, 0), *(((k - 1) // 2, k // 2) for k in dilated), (0, 0)]
            inputs = jnp.pad(inputs, pads, mode=_PAD_MODES[padding])
            padding = 'VALID'
        elif padding == 'CAUSAL':
            if n != 1:
                raise LayerPaddingError(
                    describe_layer(self),
                    'CAUSAL',
                    f'only 1-D convolutions, got {n}-D',
                    flax_text='Causal padding is only implemented for 1D convolutions.',
                )
            left = kernel_dilation[0] * (kernel_size[0] - 1)
            inputs = jnp.pad(inputs, [(0, 0), (left, 0), (0, 0)])
            padding = 'VALID'

        in_features = inputs.shape[-1]
        groups = self.feature_group_count
        if in_features % groups and self.shared_weights:
            raise LayerFeatureGroupError(
                describe_layer(self),
                f'{in_features} input features are not divisible by feature_group_count={groups}',
                'Use a feature_group_count that divides the input features.',
            )
        dimension_numbers = _conv_dimension_numbers(n)

        if self.shared_weights:
            kernel_shape = (*kernel_size, in_features // groups, self.features)
        else:
            if groups != 1:
                raise LocalConvFeatureGroupError(describe_layer(self), groups)
            out_shape = jax.eval_shape(
                lambda x: lax.conv_general_dilated_patches(
                    x,
                    filter_shape=kernel_size,
                    window_strides=strides,
                    padding=padding,
                    lhs_dilation=input_dilation,
                    rhs_dilation=kernel_dilation,
                    dimension_numbers=dimension_numbers,
                ),
                jax.ShapeDtypeStruct(inputs.shape, inputs.dtype),
            ).shape
            out_spatial = tuple(out_shape[1:-1])
            kernel_shape = (*out_spatial, int(np.prod(kernel_size)) * in_features, self.features)

        _check_mask(self, kernel_shape)
        kernel = self.param('kernel', self.kernel_init, kernel_shape, self.param_dtype)
        if self.mask is not None:
            kernel = kernel * self.mask

        if self.use_bias:
            bias_shape = (self.features,) if self.shared_weights else (*out_spatial, self.features)
            bias = self.param('bias', self.bias_init, bias_shape, self.param_dtype)
        else:
            bias = None

        inputs, kernel, bias = self.promote_dtype(inputs, kernel, bias, dtype=self.dtype)
        if self.shared_weights:
            conv_args = dict(
                lhs_dilation=input_dilation,
                rhs_dilation=kernel_dilation,
                dimension_numbers=dimension_numbers,
                feature_group_count=groups,
                precision=self.precision,
            )
            y = None
            if self.conv_general_dilated_cls is not None:
                conv = self.conv_general_dilated_cls()
            elif self.conv_general_dilated is not None:
                conv = self.conv_general_dilated
            else:
                conv = lax.conv_general_dilated
                statics = (
                    strides, padding, input_dilation, kernel_dilation, dimension_numbers,
                    groups, self.precision,
                )  # fmt: skip
                explicit = explicit_mesh(inputs, kernel) is not None
                if not explicit and _hashable(statics) and one_op_exact(inputs, kernel):
                    y = _one_conv(inputs, kernel, *statics)
                elif explicit:
                    # Explicit mesh axes: JAX infers a convolution's output sharding
                    # only with a replicated kernel and unsharded input features.
                    out = jax.eval_shape(
                        lambda a, b: conv(a, b, strides, padding, **conv_args),
                        jax.ShapeDtypeStruct(inputs.shape, inputs.dtype),
                        jax.ShapeDtypeStruct(kernel.shape, kernel.dtype),
                    )
                    out_sharding = conv_out_sharding(inputs, kernel, out.shape)
                    if out_sharding is not None:
                        conv_args['out_sharding'] = out_sharding
            if y is None:
                y = conv(inputs, kernel, strides, padding, **conv_args)
        else:
            # Explicit mesh axes: JAX's local convolution refuses sharded input
            # features and differently sharded positions; local_conv reshards.
            local = (
                lax.conv_general_dilated_local
                if explicit_mesh(inputs, kernel) is None
                else local_conv
            )
            y = local(
                inputs,
                kernel,
                window_strides=strides,
                padding=padding,
                filter_shape=kernel_size,
                lhs_dilation=input_dilation,
                rhs_dilation=kernel_dilation,
                dimension_numbers=dimension_numbers,
                precision=self.precision,
            )
        return _restore_batch(_add_bias(y, bias), batch_shape)


class Conv(_ConvBase):
    """A convolution with weights shared across positions (1-D, 2-D, 3-D, ...).

    Inputs are channels-last ``(*batch, *spatial, features)``; no batch axis, or
    several, work too. The kernel has shape
    ``kernel_size + (in_features // feature_group_count, features)``.

    Attributes:
      features: number of output features.
      kernel_size: int or one int per spatial dimension.
      strides: int or one per spatial dimension (default 1).
      padding: ``'SAME'``, ``'VALID'``, ``'CIRCULAR'`` (periodic), ``'REFLECT'``
        (mirrored, edge excluded), ``'CAUSAL'`` (1-D only: pad on the left), an int, or ``(low, high)``
        pairs / ints per spatial dimension.
      input_dilation: dilation of the input (``lhs_dilation``).
      kernel_dilation: dilation of the kernel (atrous convolution).
      feature_group_count: split input features into groups (depthwise convs).
      mask: a 0/1 array of the kernel's shape multiplied into the kernel.
      use_bias: as in :class:`Dense`. So are `dtype`, `param_dtype`, `precision`, `kernel_init`, `bias_init`, `promote_dtype`.
      conv_general_dilated, conv_general_dilated_cls: replace
        ``lax.conv_general_dilated``.

    >>> import jax, jax.numpy as jnp
    >>> layer = Conv(features=4, kernel_size=(3, 3))
    >>> variables = layer.init(jax.random.key(0), jnp.ones((1, 8, 8, 3)))
    >>> variables['params']['kernel'].shape
    (3, 3, 3, 4)
    """


class ConvLocal(_ConvBase):
    """A locally connected convolution: a separate kernel at every output position.

    The kernel has shape ``out_spatial + (prod(kernel_size) * in_features, features)``
    and the bias ``out_spatial + (features,)``. Arguments as in :class:`Conv`.

    >>> import jax, jax.numpy as jnp
    >>> layer = ConvLocal(features=4, kernel_size=(3,), padding='VALID')
    >>> variables = layer.init(jax.random.key(0), jnp.ones((1, 8, 2)))
    >>> variables['params']['kernel'].shape
    (6, 6, 4)
    """

    shared_weights = False


class ConvTranspose(Module):
    """A transposed convolution (the gradient of a convolution; "deconvolution").

    The kernel has shape ``kernel_size + (in_features, features)``, or
    ``kernel_size + (features, in_features)`` with ``transpose_kernel=True`` so
    that the kernel of a :class:`Conv` can be reused.

    Attributes:
      features: as in :class:`Conv`. So are `kernel_size`, `use_bias`, `mask`, `dtype`, `param_dtype`, `precision`, `kernel_init`, `bias_init`, `promote_dtype`.
      strides: the strides of the forward convolution (upsampling factor).
      padding: as in :class:`Conv` except ``'CAUSAL'``; with ``'CIRCULAR'`` the
        output has ``input_size * stride`` positions, wrapped periodically.
      kernel_dilation: dilation of the kernel.
      transpose_kernel: flip spatial axes and swap in/out features of the kernel.
      preferred_element_type: accumulation dtype.

    >>> import jax, jax.numpy as jnp
    >>> layer = ConvTranspose(features=2, kernel_size=(3,), strides=(2,))
    >>> variables = layer.init(jax.random.key(0), jnp.ones((1, 5, 3)))
    >>> layer.apply(variables, jnp.ones((1, 5, 3))).shape
    (1, 10, 2)
    """

    features: int
    kernel_size: int | Sequence[int]
    strides: Sequence[int] | None = None
    padding: PaddingLike = 'SAME'
    kernel_dilation: Sequence[int] | None = None
    use_bias: bool = True
    mask: Array | None = None
    dtype: Dtype | None = None
    param_dtype: Dtype = jnp.float32
    precision: Any = None
    kernel_init: Callable = default_kernel_init
    bias_init: Callable = initializers.zeros_init()
    transpose_kernel: bool = False
    promote_dtype: Callable = promote_dtype
    preferred_element_type: Dtype | None = None

    @compact
    def __call__(self, inputs: Array) -> Array:
        kernel_size = _kernel_size(self)
        n = len(kernel_size)
        inputs, batch_shape = _flatten_batch(self, inputs, n)
        strides = _broadcast_spatial(self.strides, n, 'strides', self)
        kernel_dilation = (
            None
            if self.kernel_dilation is None
            else _broadcast_spatial(self.kernel_dilation, n, 'kernel_dilation', self)
        )
        in_features = inputs.shape[-1]
        if self.transpose_kernel:
            kernel_shape = (*kernel_size, self.features, in_features)
        else:
            kernel_shape = (*kernel_size, in_features, self.features)
        _check_mask(self, kernel_shape)

        padding = _canonical_padding(self.padding, n, self)
        if padding in ('CAUSAL', 'REFLECT'):
            raise LayerPaddingStringError(
                describe_layer(self),
                padding,
                f'a transposed convolution has no {padding.lower()} form (Flax has none either)',
            )
        circular = padding == 'CIRCULAR'
        if circular:
            padding = 'VALID'

        kernel = self.param('kernel', self.kernel_init, kernel_shape, self.param_dtype)
        if self.mask is not None:
            kernel = kernel * self.mask
        bias = (
            self.param('bias', self.bias_init, (self.features,), self.param_dtype)
            if self.use_bias
            else None
        )
        inputs, kernel, bias = self.promote_dtype(inputs, kernel, bias, dtype=self.dtype)
        # lax.conv_transpose takes no out_sharding: under explicit mesh axes the
        # operands are resharded so JAX can infer it (a no-op elsewhere).
        inputs, kernel = replicate_for_conv(inputs, kernel)
        y = lax.conv_transpose(
            inputs,
            kernel,
            strides,
            padding,
            rhs_dilation=kernel_dilation,
            transpose_kernel=self.transpose_kernel,
            precision=self.precision,
            preferred_element_type=self.preferred_element_type,
        )
        if circular:
            y = self._wrap_periodic(y, inputs.shape[1:-1], strides)
        return _restore_batch(_add_bias(y, bias), batch_shape)

    def _wrap_periodic(self, y, in_spatial, strides):
        """Folds the full (VALID) output onto a period of ``in_size * stride`` per axis.

        The full output is padded so its length is a whole number of periods, with
        the input's first position landing on a period boundary, then the periods
        are summed. The odd leftover position goes left for a plain kernel and right
        for a transposed one (mirroring :class:`Conv`'s circular padding).
        """
        periods = [size * stride for size, stride in zip(in_spatial, strides)]
        pads = [(0, 0)]
        for length, period in zip(y.shape[1:-1], periods):
            extra = -(length - period) % (2 * period)
            if self.transpose_kernel:
                pads.append((extra // 2, extra - extra // 2))
            else:
                pads.append((extra - extra // 2, extra // 2))
        pads.append((0, 0))
        y = jnp.pad(y, pads)
        for axis, period in enumerate(periods, start=1):
            folded = (*y.shape[:axis], y.shape[axis] // period, period, *y.shape[axis + 1 :])
            y = jnp.sum(jnp.reshape(y, folded), axis=axis)
        return y
