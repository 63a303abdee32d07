"""The arithmetic the normalization layers share, with Flax's operations and order.

``compute_stats`` reduces an input to a mean and a variance (float32 or wider unless
``force_float32_reductions`` is off, averaged across devices with ``lax.pmean`` when
``axis_name`` is set); ``normalize`` subtracts the mean, scales by
``rsqrt(var + epsilon)`` times the learned ``scale`` and adds the learned ``bias``,
creating those parameters in Flax's order. ``canonicalize_axes``, ``check_mask`` and
``layer_where`` check a layer's arguments and name it in errors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from linen.layers._dtypes import canonicalize_dtype
from linen.layers._staged import (
    STAGING_TRACER,
    is_staged,
    nested_derivative,
    one_op_exact,
    staged,
)
from linen.layers._types import dtype_of, shape_of
from linen.layers.errors import InvalidFeatureAxesError, InvalidMaskShapeError
from linen.module import Module

__all__ = [
    'Array',
    'Axes',
    'Dtype',
    'Initializer',
    'canonicalize_axes',
    'check_mask',
    'compute_stats',
    'expanded',
    'layer_where',
    'normalize',
    'reshaped',
]

Array = jax.Array
Axes = int | Iterable[int]
Dtype = Any
Initializer = Callable[..., Array]

_Tracer = jax.core.Tracer


# --------------------------------------------------------------------------- errors


def layer_where(module: Module) -> str:
    """``LayerNorm at "/encoder/LayerNorm_0"``: the layer named the way errors show paths."""
    scope = getattr(module, 'scope', None)
    path = tuple(getattr(scope, 'path', ()) or ())
    where = '"/' + '/'.join(str(p) for p in path) + '"' if path else 'the root'
    return f'{type(module).__name__} at {where}'


# --------------------------------------------------------------------------- helpers


# (axes as given, rank) -> canonical axes; and (shape, reduction axes, feature axes)
# -> the shapes normalize reshapes to. Every norm layer call needs both, and a
# model has few distinct shapes: one dict lookup instead of a dozen generator steps.
_AXES: dict[tuple, tuple[int, ...]] = {}
_NORM_SHAPES: dict[tuple, tuple] = {}
_CACHE_LIMIT = 1024


def canonicalize_axes(module: Module, what: str, axes: Axes, shape, fix: str) -> tuple[int, ...]:
    """Axes as sorted, distinct, non-negative ints; out-of-range axes are an error."""
    try:
        return _AXES[axes, len(shape)]
    except (KeyError, TypeError):  # not seen yet, or a list of axes
        pass
    ndim = len(shape)
    given = (axes,) if isinstance(axes, int) else tuple(axes)
    if any(not -ndim <= ax < ndim for ax in given):
        raise InvalidFeatureAxesError(layer_where(module), what, given, shape, fix)
    canonical = tuple(sorted({ax % ndim for ax in given}))
    if type(axes) is int or type(axes) is tuple:
        if len(_AXES) >= _CACHE_LIMIT:
            _AXES.clear()
        _AXES[axes, ndim] = canonical
    return canonical


def _norm_shapes(shape: tuple, reduction_axes: tuple, feature_axes: tuple) -> tuple:
    """``(stats shape, stats axes, feature shape, param shape)`` of a norm over ``shape``.

    The statistics (``shape`` without ``reduction_axes``) are broadcast to ``stats shape``
    along ``stats axes``; ``scale`` and ``bias`` are reshaped to ``feature shape``.
    """
    key = (shape, reduction_axes, feature_axes)
    try:
        return _NORM_SHAPES[key]
    except KeyError:
        pass
    except TypeError:  # an unhashable (symbolic) dimension
        key = None
    shapes = (
        tuple(1 if ax in reduction_axes else d for ax, d in enumerate(shape)),
        tuple(ax for ax in range(len(shape)) if ax not in reduction_axes),
        tuple(d if ax in feature_axes else 1 for ax, d in enumerate(shape)),
        tuple(shape[ax] for ax in feature_axes),
    )
    if key is not None:
        if len(_NORM_SHAPES) >= _CACHE_LIMIT:
            _NORM_SHAPES.clear()
        _NORM_SHAPES[key] = shapes
    return shapes


def check_mask(module: Module, mask, x: Array):
    if mask is None:
        return mask
    if getattr(mask, 'dtype', None) != jnp.bool_:  # a list, 0/1 numbers: read as Flax does
        mask = jnp.asarray(mask, dtype=bool)
    if mask.shape == x.shape:
        return mask
    try:
        if np.broadcast_shapes(mask.shape, x.shape) == x.shape:
            return mask
    except ValueError:
        pass
    raise InvalidMaskShapeError(layer_where(module), mask.shape, x.shape)


# dtype -> the dtype its statistics are reduced in; dtype -> whether it is complex
_WIDENED: dict[Any, Any] = {}
_COMPLEX: dict[Any, bool] = {}


def _widened(dtype: Any) -> Any:
    try:
        return _WIDENED[dtype]
    except KeyError:
        widened = _WIDENED[dtype] = jnp.promote_types(dtype, jnp.float32)
        return widened
    except TypeError:  # an unhashable dtype-like
        return jnp.promote_types(dtype, jnp.float32)


def _reshape(x: Array, shape: tuple) -> Array:
    # (lax.reshape: the equation `.reshape` makes, without its argument handling)
    return lax.reshape(x, shape)


def _expand(x: Array, shape: tuple, axes: tuple) -> Array:
    # The statistics get their reduced axes back as a broadcast, not a reshape: Flax's
    # equation, whose transpose is a sum over the size-1 axes (a reshape's is a reshape).
    return lax.broadcast_in_dim(x, shape, axes)


# One-operation staged calls, used traced or not (see `_staged.py`): bare, these
# were most of a transformer's extra gradient-trace time. The reshapes and broadcasts
# are exact under any single derivative (not under a gradient of a gradient, F36:
# `normalize` runs them bare there); the square and the reciprocal root are not: where
# their argument is differentiated outside jit (`one_op_exact`), JAX differentiates
# the staged call as a whole, and a second derivative (a Hessian-vector product, a
# gradient of a `jax.jvp`) then rounds otherwise than Flax's op-by-op one. There the
# bare operation runs (the test costs a call on tracers only).
reshaped = staged(_reshape, static_argnums=1)
expanded = staged(_expand, static_argnums=(1, 2))
_square = staged(lax.square)
_staged_rsqrt = staged(lax.rsqrt)


def _rsqrt(x: Array) -> Array:
    if isinstance(x, _Tracer) and not one_op_exact(x):
        return lax.rsqrt(x)
    return _staged_rsqrt(x)


def _abs_sq(x: Array) -> Array:
    """``|x|**2``, real for complex ``x``."""
    dtype = dtype_of(x)
    is_complex = _COMPLEX.get(dtype) if dtype is not None else None
    if is_complex is None:
        is_complex = bool(jnp.iscomplexobj(x))
        if dtype is not None:
            _COMPLEX[dtype] = is_complex
    if is_complex:
        return lax.square(lax.real(x)) + lax.square(lax.imag(x))
    if isinstance(x, _Tracer) and not one_op_exact(x):
        return lax.square(x)
    return _square(x)


def compute_stats(
    x: Array,
    axes: tuple[int, ...],
    dtype: Dtype | None,
    axis_name: str | None = None,
    axis_index_groups: Any = None,
    use_mean: bool = True,
    use_fast_variance: bool = True,
    mask: Array | None = None,
    force_float32_reductions: bool = True,
) -> tuple[Array | None, Array]:
    """Mean and variance of ``x`` over ``axes`` (mean is None, a zero mean, when
    ``use_mean`` is off; the variance is then the mean square).

    Across devices the per-device means are averaged (not count-weighted under a
    mask), as Flax does, so the statistics match its numerics.
    """
    x_dtype = dtype_of(x)
    if dtype is None:
        dtype = x_dtype
    if force_float32_reductions:
        # Low-precision sums lose too much; widen to at least float32.
        dtype = _widened(dtype)
    if x_dtype != dtype:
        x = x.astype(dtype)

    def mean(*values):
        means = tuple(jnp.mean(v, axes, where=mask) for v in values)
        if axis_name is None:
            return means
        if len(means) == 1:
            return (lax.pmean(means[0], axis_name, axis_index_groups=axis_index_groups),)
        # One collective for all the moments, stacked in one array as Flax does: an
        # all-reduce of one buffer may add in another order than that of two.
        stacked = lax.pmean(jnp.stack(means), axis_name, axis_index_groups=axis_index_groups)
        return tuple(stacked[i] for i in range(len(means)))

    if not use_mean:
        # No mean: ``normalize`` subtracts a zero one (``None``), as Flax's program does.
        (mean_sq,) = mean(_abs_sq(x))
        return None, mean_sq
    if use_fast_variance:
        mu, mean_sq = mean(x, _abs_sq(x))
        # E[x^2] - E[x]^2 can round below zero.
        return mu, jnp.maximum(0.0, mean_sq - _abs_sq(mu))
    (mu,) = mean(x)
    (var,) = mean(_abs_sq(x - jnp.expand_dims(mu, axes)))
    return mu, var


def _centered(x, mean, var, stats_shape: tuple, stats_axes: tuple, epsilon: float, expand=None):
    """``(x - mean, rsqrt(var + epsilon))``, the statistics broadcast to ``stats_shape``.

    Flax's operations in Flax's order (the same values in another order can compile,
    and round, differently): both statistics broadcast, the subtraction (``x`` cast to
    the statistics' dtype), then the reciprocal. ``mean`` None is a zero mean.
    ``expand`` is the bare ``_expand`` under a gradient of a gradient (F36).
    """
    expand = expand or expanded
    if mean is None:
        if not isinstance(x, _Tracer):
            # Eagerly there is no program to match, and `x - 0` is `x` bit for bit.
            return x, _rsqrt(expand(var, stats_shape, stats_axes) + epsilon)
        mean = lax.full(shape_of(var), 0.0, dtype_of(var))
    mean = expand(mean, stats_shape, stats_axes)
    var = expand(var, stats_shape, stats_axes)
    return x - mean, _rsqrt(var + epsilon)


def _scaled(y, mul, scale, feature_shape: tuple, reshape=None):
    return y * (mul * (reshape or reshaped)(scale, feature_shape))


def _shifted(y, bias, feature_shape: tuple, reshape=None):
    return y + (reshape or reshaped)(bias, feature_shape)


# Traced, each run of operations between two parameters is staged and inlined (the
# parameters' initializers, on init, emit their equations in between, as in Flax).
# Each input is used once in a run, so gradients accumulate as for the direct
# operations (the statistics are not staged: x is used twice there, and the staged
# transpose would sum its cotangents in another order).
_centered_staged = staged(_centered, static_argnums=(3, 4, 5))
_scaled_staged = staged(_scaled, static_argnums=3)
_shifted_staged = staged(_shifted, static_argnums=2)


def normalize(
    module: Module,
    x: Array,
    mean: Array | None,
    var: Array,
    reduction_axes: tuple[int, ...],
    feature_axes: tuple[int, ...],
    dtype: Dtype | None,
    param_dtype: Dtype,
    epsilon: float,
    use_bias: bool,
    use_scale: bool,
    bias_init: Initializer,
    scale_init: Initializer,
) -> Array:
    """``(x - mean) * rsqrt(var + epsilon) * scale + bias``, params created in Flax's order.

    ``mean`` None (RMSNorm) is a zero mean, subtracted as Flax does.
    """
    stats_shape, stats_axes, feature_shape, param_shape = _norm_shapes(
        shape_of(x), reduction_axes, feature_axes
    )

    # Op by op unless staged anyway, as Flax's (a compiled run could round differently).
    # Under a gradient of a gradient (F36) no staged call at all, reshapes included.
    traced = is_staged(x)
    if traced:
        y, mul = _centered_staged(x, mean, var, stats_shape, stats_axes, epsilon)
    elif (isinstance(x, _Tracer) or isinstance(var, _Tracer)) and nested_derivative(x, mean, var):
        y, mul = _centered(x, mean, var, stats_shape, stats_axes, epsilon, _expand)
    else:
        y, mul = _centered(x, mean, var, stats_shape, stats_axes, epsilon)
    args = [x]
    if use_scale:
        scale = module.param('scale', scale_init, param_shape, param_dtype)
        args.append(scale)
        # (inline: a plain trace pays no call for the test, an eager call one isinstance)
        if (
            type(scale) is not STAGING_TRACER
            and isinstance(scale, _Tracer)
            and nested_derivative(y, scale)
        ):
            y = _scaled(y, mul, scale, feature_shape, _reshape)
        else:
            y = (_scaled_staged if traced else _scaled)(y, mul, scale, feature_shape)
    else:
        y = y * mul
    if use_bias:
        bias = module.param('bias', bias_init, param_shape, param_dtype)
        args.append(bias)
        if (
            type(bias) is not STAGING_TRACER
            and isinstance(bias, _Tracer)
            and nested_derivative(y, bias)
        ):
            y = _shifted(y, bias, feature_shape, _reshape)
        else:
            y = (_shifted_staged if traced else _shifted)(y, bias, feature_shape)
    dtype = canonicalize_dtype(*args, dtype=dtype)
    return y if dtype_of(y) == dtype else y.astype(dtype)
