"""Normalization layers: LayerNorm, RMSNorm, BatchNorm, GroupNorm and InstanceNorm,
with Flax's arguments, variables and numerics.

The five statistics layers share two steps, in ``_norm_stats``: ``compute_stats``
reduces the input to a mean and a variance, and ``normalize`` subtracts, scales and
shifts. The layers differ only in which axes they reduce over and where the
statistics come from (BatchNorm keeps running averages in the ``batch_stats``
collection).

SpectralNorm and WeightNorm, which wrap another layer, live in ``_norm_wrappers``;
the errors they raise stay here with the others.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import jax.numpy as jnp
from jax import lax
from jax.core import Tracer

from linen.layers import initializers
from linen.layers._norm_stats import (
    Array,
    Axes,
    Dtype,
    Initializer,
    canonicalize_axes,
    check_mask,
    compute_stats,
    expanded,
    layer_where,
    normalize,
    reshaped,
)
from linen.layers._staged import STAGING_TRACER, nested_derivative
from linen.layers._types import shape_of
from linen.layers.errors import GroupNormScalarInputError as GroupNormScalarInputError
from linen.layers.errors import GroupSizeZeroError as GroupSizeZeroError
from linen.layers.errors import InvalidFeatureAxesError as InvalidFeatureAxesError
from linen.layers.errors import InvalidGroupsError as InvalidGroupsError
from linen.layers.errors import InvalidMaskShapeError as InvalidMaskShapeError
from linen.layers.errors import MissingUseRunningAverageError as MissingUseRunningAverageError
from linen.layers.errors import SpectralNormNonMatrixError as SpectralNormNonMatrixError
from linen.module import Module, compact, merge_param

__all__ = [
    'BatchNorm',
    'GroupNorm',
    'InstanceNorm',
    'InvalidFeatureAxesError',
    'InvalidGroupsError',
    'InvalidMaskShapeError',
    'LayerNorm',
    'MissingUseRunningAverageError',
    'RMSNorm',
    'SpectralNormNonMatrixError',
]

_FEATURE_AXES_FIX = 'Pass axes within [-rank, rank) of the input, e.g. -1 for the last axis.'


# --------------------------------------------------------------------------- layers


class LayerNorm(Module):
    """Layer normalization (Ba et al., 2016): normalizes each example over ``reduction_axes``.

    ``y = (x - mean) / sqrt(var + epsilon) * scale + bias`` with the statistics
    taken over ``reduction_axes`` and ``scale``/``bias`` of the shape of
    ``feature_axes``.

    Attributes:
      epsilon: added to the variance to avoid dividing by zero.
      dtype: dtype of the result (default: inferred from input and params).
      param_dtype: dtype of ``scale`` and ``bias``.
      use_bias: learn a ``bias`` (initialized by ``bias_init``).
      use_scale: learn a ``scale`` (initialized by ``scale_init``).
      bias_init: initializer of ``bias``.
      scale_init: initializer of ``scale``.
      reduction_axes: axes the statistics are computed over.
      feature_axes: axes ``scale`` and ``bias`` span.
      axis_name: a mapped axis (``vmap``/``pmap``) to average the statistics over.
      axis_index_groups: groups of devices along ``axis_name`` to average within.
      use_fast_variance: ``E[x^2] - E[x]^2`` in one pass instead of ``E[(x - E[x])^2]``.
      force_float32_reductions: compute the statistics in float32 or wider.

    >>> import jax, jax.numpy as jnp
    >>> import linen.nn as nn
    >>> x = jnp.arange(6.0).reshape(2, 3)
    >>> y, _ = nn.LayerNorm().init_with_output(jax.random.key(0), x)
    >>> y.round(3)
    Array([[-1.225,  0.   ,  1.225],
           [-1.225,  0.   ,  1.225]], dtype=float32)
    """

    epsilon: float = 1e-6
    dtype: Dtype | None = None
    param_dtype: Dtype = jnp.float32
    use_bias: bool = True
    use_scale: bool = True
    bias_init: Initializer = initializers.zeros
    scale_init: Initializer = initializers.ones
    reduction_axes: Axes = -1
    feature_axes: Axes = -1
    axis_name: str | None = None
    axis_index_groups: Any = None
    use_fast_variance: bool = True
    force_float32_reductions: bool = True

    @compact
    def __call__(self, x: Array, *, mask: Array | None = None) -> Array:
        """Normalizes ``x``; ``mask`` (broadcastable to ``x``) selects what counts in the stats."""
        mask = check_mask(self, mask, x)
        shape = shape_of(x)
        reduction_axes = canonicalize_axes(
            self, 'reduction_axes', self.reduction_axes, shape, _FEATURE_AXES_FIX
        )
        feature_axes = canonicalize_axes(
            self, 'feature_axes', self.feature_axes, shape, _FEATURE_AXES_FIX
        )
        mean, var = compute_stats(
            x, reduction_axes, self.dtype, self.axis_name, self.axis_index_groups,
            use_fast_variance=self.use_fast_variance, mask=mask,
            force_float32_reductions=self.force_float32_reductions,
        )  # fmt: skip
        return normalize(
            self, x, mean, var, reduction_axes, feature_axes, self.dtype, self.param_dtype,
            self.epsilon, self.use_bias, self.use_scale, self.bias_init, self.scale_init,
        )  # fmt: skip


class RMSNorm(Module):
    """Root-mean-square normalization (Zhang and Sennrich, 2019): ``x / rms(x) * scale``.

    Like :class:`LayerNorm` without the mean subtraction and without a bias.

    Attributes:
      epsilon: added to the mean square to avoid dividing by zero.
      dtype: dtype of the result (default: inferred from input and params).
      param_dtype: dtype of ``scale``.
      use_scale: learn a ``scale`` (initialized by ``scale_init``).
      scale_init: initializer of ``scale``.
      reduction_axes: axes the mean square is computed over.
      feature_axes: axes ``scale`` spans.
      axis_name: a mapped axis to average the statistics over.
      axis_index_groups: groups of devices along ``axis_name`` to average within.
      use_fast_variance: kept for signature parity with Flax (no mean is subtracted).
      force_float32_reductions: compute the statistics in float32 or wider.

    >>> import jax, jax.numpy as jnp
    >>> import linen.nn as nn
    >>> y, _ = nn.RMSNorm().init_with_output(jax.random.key(0), jnp.array([[1.0, -1.0]]))
    >>> y.round(3)
    Array([[ 1., -1.]], dtype=float32)
    """

    epsilon: float = 1e-6
    dtype: Dtype | None = None
    param_dtype: Dtype = jnp.float32
    use_scale: bool = True
    scale_init: Initializer = initializers.ones
    reduction_axes: Axes = -1
    feature_axes: Axes = -1
    axis_name: str | None = None
    axis_index_groups: Any = None
    use_fast_variance: bool = True
    force_float32_reductions: bool = True

    @compact
    def __call__(self, x: Array, *, mask: Array | None = None) -> Array:
        """Normalizes ``x`` by its root mean square over ``reduction_axes``."""
        mask = check_mask(self, mask, x)
        shape = shape_of(x)
        reduction_axes = canonicalize_axes(
            self, 'reduction_axes', self.reduction_axes, shape, _FEATURE_AXES_FIX
        )
        feature_axes = canonicalize_axes(
            self, 'feature_axes', self.feature_axes, shape, _FEATURE_AXES_FIX
        )
        mean, var = compute_stats(
            x, reduction_axes, self.dtype, self.axis_name, self.axis_index_groups,
            use_mean=False, use_fast_variance=self.use_fast_variance, mask=mask,
            force_float32_reductions=self.force_float32_reductions,
        )  # fmt: skip
        return normalize(
            self, x, mean, var, reduction_axes, feature_axes, self.dtype, self.param_dtype,
            self.epsilon, False, self.use_scale, initializers.zeros, self.scale_init,
        )  # fmt: skip


class BatchNorm(Module):
    """Batch normalization (Ioffe and Szegedy, 2015) with running averages in ``batch_stats``.

    In training (``use_running_average=False``) the layer normalizes with the
    statistics of the batch (over every axis but ``axis``) and, when the
    ``batch_stats`` collection is mutable, folds them into the running averages
    ``mean`` and ``var``: ``ra = momentum * ra + (1 - momentum) * batch``. In
    evaluation (``use_running_average=True``) it normalizes with the running averages.
    ``init`` leaves the running averages at zeros and ones.

    Attributes:
      use_running_average: normalize with the running averages; may instead be
        given at call time (exactly one of the two).
      axis: the feature axis or axes (not reduced over).
      momentum: decay of the running averages.
      epsilon: added to the variance to avoid dividing by zero.
      dtype: dtype of the result (default: inferred from input and params).
      param_dtype: dtype of ``scale`` and ``bias``.
      use_bias: learn a ``bias``.
      use_scale: learn a ``scale``.
      bias_init: initializer of ``bias``.
      scale_init: initializer of ``scale``.
      axis_name: a mapped axis (``vmap``/``pmap``) over which the batch statistics
        are averaged (cross-device batch norm); ignored during ``init``.
      axis_index_groups: groups of devices along ``axis_name`` to average within.
      use_fast_variance: ``E[x^2] - E[x]^2`` in one pass instead of two.
      force_float32_reductions: compute the statistics in float32 or wider.

    >>> import jax, jax.numpy as jnp
    >>> import linen.nn as nn
    >>> bn = nn.BatchNorm(use_running_average=False, momentum=0.9)
    >>> x = jnp.array([[0.0, 2.0], [2.0, 6.0]])
    >>> variables = bn.init(jax.random.key(0), x)
    >>> y, updates = bn.apply(variables, x, mutable=['batch_stats'])
    >>> updates['batch_stats']['mean']
    Array([0.1, 0.4], dtype=float32)
    """

    use_running_average: bool | None = None
    axis: int | Iterable[int] = -1
    momentum: float = 0.99
    epsilon: float = 1e-5
    dtype: Dtype | None = None
    param_dtype: Dtype = jnp.float32
    use_bias: bool = True
    use_scale: bool = True
    bias_init: Initializer = initializers.zeros
    scale_init: Initializer = initializers.ones
    axis_name: str | None = None
    axis_index_groups: Any = None
    use_fast_variance: bool = True
    force_float32_reductions: bool = True

    @compact
    def __call__(
        self,
        x: Array,
        use_running_average: bool | None = None,
        *,
        mask: Array | None = None,
    ) -> Array:
        """Normalizes ``x``; ``mask`` selects the entries that count toward the batch stats."""
        if use_running_average is None and self.use_running_average is None:
            raise MissingUseRunningAverageError(layer_where(self))
        use_running_average = merge_param(
            'use_running_average', self.use_running_average, use_running_average
        )
        mask = check_mask(self, mask, x)
        feature_axes = canonicalize_axes(
            self, 'axis', self.axis, x.shape,
            'Pass the feature axis of the input (default -1, the last axis).',
        )  # fmt: skip
        reduction_axes = tuple(i for i in range(x.ndim) if i not in feature_axes)
        feature_shape = tuple(x.shape[ax] for ax in feature_axes)

        ra_mean = self.variable(
            'batch_stats', 'mean', lambda s: jnp.zeros(s, jnp.float32), feature_shape
        )
        ra_var = self.variable(
            'batch_stats', 'var', lambda s: jnp.ones(s, jnp.float32), feature_shape
        )

        if use_running_average:
            mean, var = ra_mean.value, ra_var.value
        else:
            initializing = self.is_initializing()
            mean, var = compute_stats(
                x, reduction_axes, self.dtype,
                # init may run outside the mapped context that binds axis_name.
                None if initializing else self.axis_name,
                None if initializing else self.axis_index_groups,
                use_fast_variance=self.use_fast_variance, mask=mask,
                force_float32_reductions=self.force_float32_reductions,
            )  # fmt: skip
            if not initializing:
                momentum = self.momentum
                ra_mean.value = momentum * ra_mean.value + (1 - momentum) * mean
                ra_var.value = momentum * ra_var.value + (1 - momentum) * var

        return normalize(
            self, x, mean, var, reduction_axes, feature_axes, self.dtype, self.param_dtype,
            self.epsilon, self.use_bias, self.use_scale, self.bias_init, self.scale_init,
        )  # fmt: skip


class GroupNorm(Module):
    """Group normalization (Wu and He, 2018): statistics per group of channels.

    The last axis (the features) is split into ``num_groups`` groups of
    ``group_size`` channels; each example is normalized per group over
    ``reduction_axes`` and its group's channels. Give exactly one of
    ``num_groups`` and ``group_size`` (pass ``num_groups=None`` with ``group_size``).

    Attributes:
      num_groups: number of groups; must divide the number of channels.
      group_size: channels per group; must divide the number of channels.
      epsilon: added to the variance to avoid dividing by zero.
      dtype: dtype of the result (default: inferred from input and params).
      param_dtype: dtype of ``scale`` and ``bias``.
      use_bias: learn a ``bias``.
      use_scale: learn a ``scale``.
      bias_init: initializer of ``bias``.
      scale_init: initializer of ``scale``.
      reduction_axes: axes reduced over, which must include the last; default every
        axis but the first (the batch). Set it explicitly when the input has more
        leading batch axes at call time than at init.
      axis_name: a mapped axis to average the statistics over.
      axis_index_groups: groups of devices along ``axis_name`` to average within.
      use_fast_variance: ``E[x^2] - E[x]^2`` in one pass instead of two.
      force_float32_reductions: compute the statistics in float32 or wider.

    >>> import jax, jax.numpy as jnp
    >>> import linen.nn as nn
    >>> x = jnp.array([[0.0, 2.0, 5.0, 7.0]])
    >>> y, _ = nn.GroupNorm(num_groups=2).init_with_output(jax.random.key(0), x)
    >>> y.round(3)
    Array([[-1.,  1., -1.,  1.]], dtype=float32)
    """

    num_groups: int | None = 32
    group_size: int | None = None
    epsilon: float = 1e-6
    dtype: Dtype | None = None
    param_dtype: Dtype = jnp.float32
    use_bias: bool = True
    use_scale: bool = True
    bias_init: Initializer = initializers.zeros
    scale_init: Initializer = initializers.ones
    reduction_axes: Axes | None = None
    axis_name: str | None = None
    axis_index_groups: Any = None
    use_fast_variance: bool = True
    force_float32_reductions: bool = True

    def _groups(self, channels: int) -> tuple[int, int]:
        layer = layer_where(self)
        if (self.num_groups is None) == (self.group_size is None):
            raise InvalidGroupsError(
                layer,
                f'got num_groups={self.num_groups} and group_size={self.group_size}; exactly '
                'one must be given.',
                'Pass GroupNorm(num_groups=G) or GroupNorm(num_groups=None, group_size=S) '
                '(num_groups defaults to 32, so set it to None to use group_size).',
                flax_text='Either `num_groups` or `group_size` should be specified. If '
                '`group_size` is to be specified, pass `num_groups=None` as argument to '
                'override the default `num_groups` value of 32.',
            )
        if self.num_groups is not None:
            if self.num_groups <= 0 or channels % self.num_groups:
                raise InvalidGroupsError(
                    layer,
                    f'num_groups={self.num_groups} does not divide the {channels} channels '
                    '(the last axis of the input).',
                    f'Pick num_groups among the divisors of {channels}, or pass group_size.',
                    flax_text=f'Number of groups ({self.num_groups}) does not divide the '
                    f'number of channels ({channels}).',
                )
            return self.num_groups, channels // self.num_groups
        if self.group_size == 0:  # Flax takes the channels modulo 0: a ZeroDivisionError
            raise GroupSizeZeroError(
                layer,
                f'group_size=0 does not divide the {channels} channels (the last axis of the '
                'input).',
                f'Pick group_size among the divisors of {channels}.',
            )
        if self.group_size < 0 or channels % self.group_size:
            raise InvalidGroupsError(
                layer,
                f'group_size={self.group_size} does not divide the {channels} channels '
                '(the last axis of the input).',
                f'Pick group_size among the divisors of {channels}.',
                flax_text=f'Number of channels ({channels}) is not multiple of the group size '
                f'({self.group_size}).',
            )
        return channels // self.group_size, self.group_size

    @compact
    def __call__(self, x: Array, *, mask: Array | None = None) -> Array:
        """Normalizes ``x`` per group of channels of its last axis."""
        mask = check_mask(self, mask, x)
        ndim = x.ndim
        if ndim < 1:
            raise GroupNormScalarInputError(
                layer_where(self), 'the feature axis', -1, x.shape,
                'GroupNorm needs an input with a feature (last) axis.',
            )  # fmt: skip
        if self.reduction_axes is None:
            reduction_axes = (*range(1, ndim - 1), ndim - 1)
        else:
            reduction_axes = canonicalize_axes(
                self, 'reduction_axes', self.reduction_axes, x.shape, _FEATURE_AXES_FIX
            )
            if ndim - 1 not in reduction_axes:
                raise InvalidFeatureAxesError(
                    layer_where(self), 'reduction_axes', self.reduction_axes, x.shape,
                    'The reduction axes must include the last axis (the features), '
                    'e.g. reduction_axes=(1, 2, -1) for NHWC images.',
                )  # fmt: skip
        channels = x.shape[-1]
        num_groups, group_size = self._groups(channels)

        group_shape = (*x.shape[:-1], num_groups, group_size)
        outer_axes = reduction_axes[:-1]
        if mask is not None:
            mask_shape = mask.shape
            if not mask_shape or mask_shape[-1] != channels:
                # (Flax cannot split such a mask into groups: it is broadcast first.)
                mask = jnp.broadcast_to(mask, x.shape)
                mask_shape = x.shape
            mask = mask.reshape(*mask_shape[:-1], num_groups, group_size)
        mean, var = compute_stats(
            x.reshape(group_shape), (*outer_axes, ndim), self.dtype,
            self.axis_name, self.axis_index_groups,
            use_fast_variance=self.use_fast_variance, mask=mask,
            force_float32_reductions=self.force_float32_reductions,
        )  # fmt: skip
        # Back from one statistic per group to one per channel: broadcast over the
        # group's channels, then merge the two axes (Flax's two operations).
        stats_shape = shape_of(mean)
        per_group = (*stats_shape, group_size)
        group_axes = tuple(range(len(stats_shape)))
        per_channel = (*stats_shape[:-1], channels)
        if (
            type(var) is not STAGING_TRACER
            and isinstance(var, Tracer)
            and nested_derivative(mean, var)
        ):
            reshape, expand = lax.reshape, lax.broadcast_in_dim  # no staged call (F36)
        else:
            reshape, expand = reshaped, expanded
        mean = reshape(expand(mean, per_group, group_axes), per_channel)
        var = reshape(expand(var, per_group, group_axes), per_channel)
        return normalize(
            self, x, mean, var, outer_axes, (ndim - 1,), self.dtype, self.param_dtype,
            self.epsilon, self.use_bias, self.use_scale, self.bias_init, self.scale_init,
        )  # fmt: skip


class InstanceNorm(Module):
    """Instance normalization (Ulyanov et al., 2016): each example and channel on its own.

    Statistics are taken over every axis except the first (the batch) and
    ``feature_axes``.

    Attributes:
      epsilon: added to the variance to avoid dividing by zero.
      dtype: dtype of the result (default: inferred from input and params).
      param_dtype: dtype of ``scale`` and ``bias``.
      use_bias: learn a ``bias``.
      use_scale: learn a ``scale``.
      bias_init: initializer of ``bias``.
      scale_init: initializer of ``scale``.
      feature_axes: the channel axes; must not include axis 0 (the batch).
      axis_name: a mapped axis to average the statistics over.
      axis_index_groups: groups of devices along ``axis_name`` to average within.
      use_fast_variance: ``E[x^2] - E[x]^2`` in one pass instead of two.
      force_float32_reductions: compute the statistics in float32 or wider.

    >>> import jax, jax.numpy as jnp
    >>> import linen.nn as nn
    >>> x = jnp.array([[[0.0], [2.0]]])
    >>> y, _ = nn.InstanceNorm().init_with_output(jax.random.key(0), x)
    >>> y.ravel().round(3)
    Array([-1.,  1.], dtype=float32)
    """

    epsilon: float = 1e-6
    dtype: Dtype | None = None
    param_dtype: Dtype = jnp.float32
    use_bias: bool = True
    use_scale: bool = True
    bias_init: Initializer = initializers.zeros
    scale_init: Initializer = initializers.ones
    feature_axes: Axes = -1
    axis_name: str | None = None
    axis_index_groups: Any = None
    use_fast_variance: bool = True
    force_float32_reductions: bool = True

    @compact
    def __call__(self, x: Array, *, mask: Array | None = None) -> Array:
        """Normalizes each example and channel of ``x`` over the remaining axes."""
        mask = check_mask(self, mask, x)
        feature_axes = canonicalize_axes(
            self, 'feature_axes', self.feature_axes, x.shape, _FEATURE_AXES_FIX
        )
        if 0 in feature_axes:
            raise InvalidFeatureAxesError(
                layer_where(self), 'feature_axes', self.feature_axes, x.shape,
                'Axis 0 is the batch axis and cannot be a feature axis: give the input a '
                'leading batch axis, or pass feature_axes that exclude 0.',
                flax_text='The channel axes cannot include the leading dimension as this is '
                'assumed to be the batch axis.',
            )  # fmt: skip
        reduction_axes = tuple(i for i in range(1, x.ndim) if i not in feature_axes)
        mean, var = compute_stats(
            x, reduction_axes, self.dtype, self.axis_name, self.axis_index_groups,
            use_fast_variance=self.use_fast_variance, mask=mask,
            force_float32_reductions=self.force_float32_reductions,
        )  # fmt: skip
        return normalize(
            self, x, mean, var, reduction_axes, feature_axes, self.dtype, self.param_dtype,
            self.epsilon, self.use_bias, self.use_scale, self.bias_init, self.scale_init,
        )  # fmt: skip
