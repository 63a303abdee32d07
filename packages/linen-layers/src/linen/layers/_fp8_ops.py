"""fp8 quantization with delayed scaling: the functions behind the fp8 dot-general modules.

Delayed scaling keeps, per quantized tensor, a ``scale`` (shape ``(1,)``) and an
``amax_history`` (the absolute maxima of the last ``L`` steps, newest first). Each step
the new scale is ``max(amax_history) / fp8_max`` (kept when that amax is zero or not
finite), the tensor is divided by it, clipped to the fp8 range and cast to fp8, and the
history is rolled to take this step's amax.

The new scale and history leave a step as *gradients*: the ``custom_vjp`` functions here
return them as the cotangents of their ``scale`` and ``amax_history`` arguments, and the
training loop writes those gradients over the variables of the
``_overwrite_with_gradient`` collection instead of applying an update to them. That is
Flax's protocol (same collection name, same cotangent convention), so optimizers and
training loops written for Flax's fp8 layers work unchanged.

Flax also defines ``fm32``/``fp32_max_grad``, an extended dtype whose cotangents add by
``max``; JAX has no public API for defining dtypes, so it is not offered here (see
``docs/differences.md``).
"""

from __future__ import annotations

import warnings
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from linen.layers.errors import Fp8ArgumentError

__all__ = [
    'OVERWRITE_WITH_GRADIENT',
    'compute_amax_history',
    'compute_scale',
    'dequantize',
    'dot_general_transpose_lhs',
    'dot_general_transpose_rhs',
    'dot_general_with_precision',
    'dot_general_with_precision_jvp',
    'fp8_scaled_dot_general',
    'get_fp8_max',
    'in_q',
    'in_q_bwd',
    'in_q_fwd',
    'in_qdq',
    'in_qdq_bwd',
    'in_qdq_fwd',
    'out_dq',
    'out_dq_bwd',
    'out_dq_fwd',
    'out_qdq',
    'out_qdq_bwd',
    'out_qdq_fwd',
    'qdq',
    'quantize',
    'quantize_dequantize_update',
    'quantized_dot',
    'quantized_dot_bwd',
    'quantized_dot_fwd',
    'update_fp8_meta',
]

OVERWRITE_WITH_GRADIENT = '_overwrite_with_gradient'

_FP8_DTYPES = ('float8_e4m3fn', 'float8_e5m2', 'float8_e4m3fnuz', 'float8_e5m2fnuz')


# ----------------------------------------------------------------------------- scaling


def get_fp8_max(fp8_dtype, out_dtype):
    """The largest finite value of ``fp8_dtype``, as a scalar of ``out_dtype``.

    >>> float(get_fp8_max(jnp.float8_e4m3fn, jnp.float32))
    448.0
    """
    if jnp.dtype(fp8_dtype).name not in _FP8_DTYPES:
        raise Fp8ArgumentError(
            'get_fp8_max',
            f'{jnp.dtype(fp8_dtype).name} is not an fp8 dtype',
            f'Use one of {", ".join("jnp." + d for d in _FP8_DTYPES)}.',
        )
    return jnp.finfo(fp8_dtype).max.astype(out_dtype)


def quantize(x, q_dtype, scale, compute_dtype):
    """``x / scale``, clipped to ``q_dtype``'s finite range, cast to ``q_dtype``.

    The division and clip run in ``compute_dtype`` (the fp8 maximum is cast to it first,
    so nothing is promoted to float32 on the way).
    """
    fp8_max = get_fp8_max(q_dtype, compute_dtype)
    scaled = x / jnp.broadcast_to(scale.astype(compute_dtype), x.shape)
    return jnp.clip(scaled, -fp8_max, fp8_max).astype(q_dtype)


def dequantize(x, dq_dtype, scale):
    """``x`` cast to ``dq_dtype``, times ``scale``."""
    return x.astype(dq_dtype) * jnp.broadcast_to(scale.astype(dq_dtype), x.shape)


def qdq(x, q_dtype, scale, compute_dtype):
    """Quantize then dequantize: ``x`` rounded through ``q_dtype``, back in ``x.dtype``."""
    return dequantize(quantize(x, q_dtype, scale, compute_dtype), x.dtype, scale)


def compute_scale(amax, scale, fp8_max, margin=0):
    """The next scale: ``amax / fp8_max * 2**margin``, or ``scale`` if amax is 0 or not finite.

    >>> compute_scale(jnp.float32(896.0), jnp.float32(1.0), jnp.float32(448.0))
    Array(2., dtype=float32)
    """
    # Computed through the reciprocal (the factor the tensor is multiplied by), as
    # Transformer Engine does, so the rounding is the same as Flax's.
    old_factor = 1.0 / scale
    factor = (fp8_max / amax) / (2**margin)
    factor = jnp.where(amax > 0.0, factor, old_factor)
    factor = jnp.where(jnp.isfinite(amax), factor, old_factor)
    return 1.0 / factor


def compute_amax_history(x, amax_history):
    """The history rolled by one step, with ``max(|x|)`` as the newest (first) entry."""
    amax = jnp.max(jnp.abs(x)).astype(amax_history.dtype)
    return jnp.roll(amax_history, shift=-1, axis=0).at[0].set(amax)


def update_fp8_meta(x, q_dtype, scale, amax_history):
    """``(new_scale, new_history)``: the scale from the history so far, then ``x``'s amax."""
    fp8_max = get_fp8_max(q_dtype, jnp.float32)
    new_scale = compute_scale(jnp.max(amax_history, axis=0), scale, fp8_max)
    return new_scale, compute_amax_history(x, amax_history)


def quantize_dequantize_update(x, q_dtype, scale, amax_history, compute_dtype):
    """``(qdq(x) at the new scale, new_scale, new_history)``."""
    new_scale, new_history = update_fp8_meta(x, q_dtype, scale, amax_history)
    return qdq(x, q_dtype, new_scale, compute_dtype), new_scale, new_history


# ----------------------------------------------------------------------------- dot transposes


def dot_general_transpose_lhs(
    g, x, y, *, dimension_numbers, precision, preferred_element_type=None, swap_ans=False
):
    """The cotangent of ``x`` in ``lax.dot_general(x, y, dimension_numbers)`` given ``g``.

    ``x`` only supplies its rank. With ``swap_ans`` the output's free axes are ``y``'s
    before ``x``'s (how the right-hand transpose reuses this one).
    """
    (x_contract, y_contract), (x_batch, y_batch) = dimension_numbers
    x_ndim, y_ndim = np.ndim(x), np.ndim(y)
    x_free = [i for i in range(x_ndim) if i not in (*x_contract, *x_batch)]
    y_free = [i for i in range(y_ndim) if i not in (*y_contract, *y_batch)]
    # Where each group of axes sits in g: batch first, then the free axes in order.
    n_batch = len(x_batch)
    if swap_ans:
        g_y_free = range(n_batch, n_batch + len(y_free))
    else:
        g_y_free = range(n_batch + len(x_free), n_batch + len(x_free) + len(y_free))
    g_batch = range(n_batch)
    # Contracting g with y over y's free axes leaves (batch, x_free, y_contract sorted):
    # y's contracting axes in y's order, i.e. x's contracting axes sorted by their partner.
    product = lax.dot_general(
        g,
        y,
        ((tuple(g_y_free), tuple(y_free)), (tuple(g_batch), tuple(y_batch))),
        precision=precision,
        preferred_element_type=preferred_element_type,
    )
    x_contract_in_y_order = [x_contract[i] for i in np.argsort(y_contract)]
    layout = [*x_batch, *x_free, *x_contract_in_y_order]
    return lax.transpose(product, tuple(int(i) for i in np.argsort(layout)))


def dot_general_transpose_rhs(
    g, x, y, *, dimension_numbers, precision, preferred_element_type=None
):
    """The cotangent of ``y`` in ``lax.dot_general(x, y, dimension_numbers)`` given ``g``."""
    (x_contract, y_contract), (x_batch, y_batch) = dimension_numbers
    return dot_general_transpose_lhs(
        g,
        y,
        x,
        dimension_numbers=((y_contract, x_contract), (y_batch, x_batch)),
        precision=precision,
        preferred_element_type=preferred_element_type,
        swap_ans=True,
    )


# ----------------------------------------------------------------------------- qdq ops


@partial(jax.custom_vjp, nondiff_argnums=(0, 1))
def in_qdq(compute_dtype, q_dtype, inp, scale, amax_history):
    """``inp`` rounded through fp8 at the updated scale.

    Backward: the cotangent passes straight through to ``inp``; the updated scale and
    history come out as the cotangents of ``scale`` and ``amax_history``.
    """
    return quantize_dequantize_update(inp, q_dtype, scale, amax_history, compute_dtype)[0]


def in_qdq_fwd(compute_dtype, q_dtype, inp, scale, amax_history):
    """Forward rule of :func:`in_qdq`."""
    out, new_scale, new_history = quantize_dequantize_update(
        inp, q_dtype, scale, amax_history, compute_dtype
    )
    return out, (new_scale, new_history)


def in_qdq_bwd(compute_dtype, q_dtype, res, g):
    """Backward rule of :func:`in_qdq`."""
    new_scale, new_history = res
    return g, new_scale, new_history


in_qdq.defvjp(in_qdq_fwd, in_qdq_bwd)


@partial(jax.custom_vjp, nondiff_argnums=(0, 1))
def out_qdq(compute_dtype, q_dtype, out, scale, amax_history):
    """The identity forward; backward rounds the cotangent through fp8 (delayed scaling).

    The updated scale and history are the cotangents of ``scale`` and ``amax_history``.
    """
    return out


def out_qdq_fwd(compute_dtype, q_dtype, out, scale, amax_history):
    """Forward rule of :func:`out_qdq`."""
    return out, (scale, amax_history)


def out_qdq_bwd(compute_dtype, q_dtype, res, g):
    """Backward rule of :func:`out_qdq`."""
    scale, amax_history = res
    return quantize_dequantize_update(g, q_dtype, scale, amax_history, compute_dtype)


out_qdq.defvjp(out_qdq_fwd, out_qdq_bwd)


@partial(jax.custom_vjp, nondiff_argnums=(0, 1))
def in_q(compute_dtype, q_dtype, inp, scale, amax_history):
    """``(inp quantized to q_dtype at the updated scale, that scale)``.

    Backward: no cotangent for ``inp``; the updated scale and history are the cotangents
    of ``scale`` and ``amax_history``.
    """
    return in_q_fwd(compute_dtype, q_dtype, inp, scale, amax_history)[0]


def in_q_fwd(compute_dtype, q_dtype, inp, scale, amax_history):
    """Forward rule of :func:`in_q`."""
    new_scale, new_history = update_fp8_meta(inp, q_dtype, scale, amax_history)
    quantized = quantize(inp, q_dtype, new_scale, compute_dtype)
    return (quantized, new_scale), (new_scale, new_history)


def in_q_bwd(compute_dtype, q_dtype, res, g):
    """Backward rule of :func:`in_q`."""
    new_scale, new_history = res
    return None, new_scale, new_history


in_q.defvjp(in_q_fwd, in_q_bwd)


@partial(jax.custom_vjp, nondiff_argnums=(0,))
def out_dq(dq_type, lhs_scale, rhs_scale, out):
    """``out`` cast to ``dq_type`` times both scales; the cotangent passes to ``out``."""
    return dequantize(out, dq_type, lhs_scale * rhs_scale)


def out_dq_fwd(dq_type, lhs_scale, rhs_scale, out):
    """Forward rule of :func:`out_dq`."""
    return out_dq(dq_type, lhs_scale, rhs_scale, out), None


def out_dq_bwd(dq_type, res, g):
    """Backward rule of :func:`out_dq`."""
    return None, None, g


out_dq.defvjp(out_dq_fwd, out_dq_bwd)


# ----------------------------------------------------------------------------- fp8 dot


@partial(jax.custom_vjp, nondiff_argnums=(8, 9))
def quantized_dot(
    lhs,
    q_lhs,
    lhs_scale,
    rhs,
    q_rhs,
    rhs_scale,
    out_grad_scale,
    out_grad_amax_history,
    dimension_numbers,
    preferred_element_type=None,
):
    """``dot_general`` of the fp8 operands; backward quantizes the cotangent to e5m2.

    The cotangents of ``lhs`` and ``rhs`` are the fp8 products of the quantized
    cotangent with the other quantized operand, dequantized; ``out_grad_scale`` and
    ``out_grad_amax_history`` get their updated values as cotangents.
    """
    return _fp8_product(q_lhs, q_rhs, dimension_numbers, preferred_element_type)


def _fp8_product(q_lhs, q_rhs, dimension_numbers, preferred_element_type):
    return lax.dot_general(
        q_lhs,
        q_rhs,
        dimension_numbers,
        preferred_element_type=preferred_element_type,
        precision=lax.Precision.DEFAULT,
    )


def quantized_dot_fwd(
    lhs,
    q_lhs,
    lhs_scale,
    rhs,
    q_rhs,
    rhs_scale,
    out_grad_scale,
    out_grad_amax_history,
    dimension_numbers,
    preferred_element_type,
):
    """Forward rule of :func:`quantized_dot`."""
    out = _fp8_product(q_lhs, q_rhs, dimension_numbers, preferred_element_type)
    return out, (
        lhs,
        q_lhs,
        lhs_scale,
        rhs,
        q_rhs,
        rhs_scale,
        out_grad_scale,
        out_grad_amax_history,
    )


def quantized_dot_bwd(dimension_numbers, preferred_element_type, res, g):
    """Backward rule of :func:`quantized_dot`."""
    lhs, q_lhs, lhs_scale, rhs, q_rhs, rhs_scale, grad_scale, grad_history = res
    new_grad_scale, new_grad_history = update_fp8_meta(g, jnp.float8_e5m2, grad_scale, grad_history)
    q_g = quantize(g, jnp.float8_e5m2, new_grad_scale, preferred_element_type)
    transpose = {
        'dimension_numbers': dimension_numbers,
        'precision': lax.Precision.HIGHEST,
        'preferred_element_type': preferred_element_type,
    }
    grad_lhs = dot_general_transpose_lhs(q_g, lhs, q_rhs, **transpose)
    grad_lhs = dequantize(grad_lhs, preferred_element_type, rhs_scale * new_grad_scale)
    grad_rhs = dot_general_transpose_rhs(q_g, q_lhs, rhs, **transpose)
    grad_rhs = dequantize(grad_rhs, preferred_element_type, lhs_scale * new_grad_scale)
    return grad_lhs, None, None, grad_rhs, None, None, new_grad_scale, new_grad_history


quantized_dot.defvjp(quantized_dot_fwd, quantized_dot_bwd)


def fp8_scaled_dot_general(
    lhs,
    rhs,
    dimension_numbers,
    precision=None,
    preferred_element_type=None,
    *,
    lhs_scale=None,
    rhs_scale=None,
    grad_scale=None,
    lhs_amax_history=None,
    rhs_amax_history=None,
    grad_amax_history=None,
    quantize_compute_type: Any = jnp.float32,
):
    """A ``dot_general`` computed in fp8: both operands quantized to e4m3, the product
    dequantized by both scales, the cotangent quantized to e5m2 on the way back.

    ``precision`` is fixed by the fp8 computation; passing one warns, as in Flax.
    """
    if precision is not None:
        warnings.warn(
            'The function fp8_scaled_dot_general will set the "precision" and disregard any '
            'provided "precision" argument.',
            stacklevel=2,
        )
    q_lhs, new_lhs_scale = in_q(
        quantize_compute_type, jnp.float8_e4m3fn, lhs, lhs_scale, lhs_amax_history
    )
    q_rhs, new_rhs_scale = in_q(
        quantize_compute_type, jnp.float8_e4m3fn, rhs, rhs_scale, rhs_amax_history
    )
    out = quantized_dot(
        lhs,
        q_lhs,
        new_lhs_scale,
        rhs,
        q_rhs,
        new_rhs_scale,
        grad_scale,
        grad_amax_history,
        dimension_numbers,
        preferred_element_type,
    )
    return out_dq(preferred_element_type, new_lhs_scale, new_rhs_scale, out)


@partial(jax.custom_jvp, nondiff_argnums=(2, 3, 4))
def dot_general_with_precision(
    lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None
):
    """``dot_general`` at default precision forward and highest precision for the tangents.

    ``precision`` and ``preferred_element_type`` are fixed; passing either warns, as in Flax.
    """
    if precision is not None or preferred_element_type is not None:
        warnings.warn(
            'The function dot_general_with_precision will set the precision/'
            'preferred_element_type and disregard any provided values.',
            stacklevel=2,
        )
    return lax.dot_general(lhs, rhs, dimension_numbers, precision=lax.Precision.DEFAULT)


@dot_general_with_precision.defjvp
def dot_general_with_precision_jvp(
    dimension_numbers, precision, preferred_element_type, primals, tangents
):
    """Tangent rule of :func:`dot_general_with_precision`."""
    lhs, rhs = primals
    lhs_dot, rhs_dot = tangents
    out = lax.dot_general(lhs, rhs, dimension_numbers, precision=lax.Precision.DEFAULT)
    highest = partial(
        lax.dot_general, dimension_numbers=dimension_numbers, precision=lax.Precision.HIGHEST
    )
    return out, highest(lhs_dot, rhs) + highest(lhs, rhs_dot)
