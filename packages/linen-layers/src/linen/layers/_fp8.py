"""fp8 dot-general modules: drop-in ``dot_general``s that keep delayed-scaling state.

Each module owns six variables in the ``_overwrite_with_gradient`` collection: a scale
(``(1,)``, ones) and an amax history (``(amax_history_length,)``, zeros) for the input,
the kernel and the output gradient. They are handed to a layer as its
``dot_general_cls`` (``nn.Dense(4, dot_general_cls=nn.Fp8DotGeneral)``); the layer calls
the module like ``lax.dot_general``. The updated scales and histories come back as the
gradients of those variables, to be written over them (see :mod:`linen.layers.fp8_ops`).
"""

from __future__ import annotations

import warnings
from functools import partial
from typing import Any

import jax.numpy as jnp

from linen.layers import _fp8_ops as ops
from linen.layers.errors import Fp8ArgumentError
from linen.module import Module

__all__ = [
    'Fp8DirectDotGeneralOp',
    'Fp8DotGeneral',
    'Fp8DotGeneralBase',
    'Fp8DotGeneralOp',
    'Fp8Einsum',
    'NANOOFp8DotGeneralOp',
]

DType = Any


def _ones(shape):
    return jnp.ones(shape, jnp.float32)


def _zeros(shape):
    return jnp.zeros(shape, jnp.float32)


class Fp8DotGeneralBase(Module):
    """The delayed-scaling state shared by the fp8 dot-general modules.

    Attributes:
      amax_history_length: how many steps of absolute maxima the scales are taken over.
      e4m3_dtype: the fp8 type of the forward operands.
      e5m2_dtype: the fp8 type of the output gradient.
    """

    amax_history_length: int = 1024
    e4m3_dtype: DType = jnp.float8_e4m3fn
    e5m2_dtype: DType = jnp.float8_e5m2

    def setup(self) -> None:
        # Creation order is Flax's, so the collection's key order matches too.
        history = (self.amax_history_length,)
        for operand in ('input', 'kernel', 'output_grad'):
            setattr(
                self,
                f'{operand}_amax_history',
                self.variable(
                    ops.OVERWRITE_WITH_GRADIENT, f'{operand}_amax_history', _zeros, history
                ),
            )
        for operand in ('input', 'kernel', 'output_grad'):
            setattr(
                self,
                f'{operand}_scale',
                self.variable(ops.OVERWRITE_WITH_GRADIENT, f'{operand}_scale', _ones, (1,)),
            )

    def _scaling_state(self) -> dict:
        return {
            'lhs_scale': self.input_scale.value,
            'rhs_scale': self.kernel_scale.value,
            'grad_scale': self.output_grad_scale.value,
            'lhs_amax_history': self.input_amax_history.value,
            'rhs_amax_history': self.kernel_amax_history.value,
            'grad_amax_history': self.output_grad_amax_history.value,
        }


def _operands(module, args, kwargs):
    """``(x, kernel, dimension_numbers, compute dtype)`` from a ``dot_general``-style call.

    The kernel's dtype is the layer's computation dtype (the layer promoted it), so the
    input is cast to it. ``precision`` and other keywords are ignored: fp8 fixes them.
    """
    if len(args) != 3:
        raise Fp8ArgumentError(
            type(module).__name__,
            f'called with {len(args)} positional arguments',
            'Call it as lax.dot_general is called: (lhs, rhs, dimension_numbers, **kwargs); '
            'layers do so when it is given as dot_general_cls.',
        )
    x, kernel, dimension_numbers = args
    compute_dtype = kernel.dtype
    return jnp.asarray(x, compute_dtype), kernel, dimension_numbers, compute_dtype


class Fp8DotGeneralOp(Fp8DotGeneralBase):
    """fp8 by quantize-dequantize: operands rounded through e4m3, the output gradient
    through e5m2, the product itself computed in the layer's dtype.

    Deprecated in Flax in favour of :class:`Fp8DirectDotGeneralOp`; constructing it warns
    with the same ``DeprecationWarning``.
    """

    def __post_init__(self):
        super().__post_init__()
        if type(self) is Fp8DotGeneralOp:
            warnings.warn(
                'The Fp8DotGeneralOp is deprecated. Use Fp8DirectDotGeneralOp or Fp8Einsum '
                'instead.',
                DeprecationWarning,
                stacklevel=2,
            )

    def __call__(self, *args, **kwargs):
        x, kernel, dimension_numbers, compute_dtype = _operands(self, args, kwargs)
        x = ops.in_qdq(
            compute_dtype,
            self.e4m3_dtype,
            x,
            self.input_scale.value,
            self.input_amax_history.value,
        )
        kernel = ops.in_qdq(
            compute_dtype,
            self.e4m3_dtype,
            kernel,
            self.kernel_scale.value,
            self.kernel_amax_history.value,
        )
        y = ops.dot_general_with_precision(x, kernel, dimension_numbers)
        return ops.out_qdq(
            compute_dtype,
            self.e5m2_dtype,
            y,
            self.output_grad_scale.value,
            self.output_grad_amax_history.value,
        )


class Fp8DirectDotGeneralOp(Fp8DotGeneralBase):
    """fp8 for real: the product is a ``dot_general`` of e4m3 operands (see
    :func:`~linen.layers.fp8_ops.fp8_scaled_dot_general`). ``nn.Fp8DotGeneral`` is this class.

    >>> import jax, jax.numpy as jnp
    >>> from linen.layers import Dense
    >>> layer = Dense(4, dot_general_cls=Fp8DirectDotGeneralOp)
    >>> variables = layer.init(jax.random.key(0), jnp.ones((2, 3)))
    >>> sorted(variables['_overwrite_with_gradient']['Fp8DirectDotGeneralOp_0'])[:2]
    ['input_amax_history', 'input_scale']
    """

    def __call__(self, *args, **kwargs):
        x, kernel, dimension_numbers, compute_dtype = _operands(self, args, kwargs)
        return ops.fp8_scaled_dot_general(
            x,
            kernel,
            dimension_numbers,
            preferred_element_type=x.dtype,
            quantize_compute_type=compute_dtype,
            **self._scaling_state(),
        )


class NANOOFp8DotGeneralOp(Fp8DotGeneralOp):
    """:class:`Fp8DotGeneralOp` with the ``fnuz`` fp8 types (no negative zero, no infinities)
    of AMD and Graphcore hardware."""

    e4m3_dtype: DType = jnp.float8_e4m3fnuz
    e5m2_dtype: DType = jnp.float8_e5m2fnuz


class Fp8Einsum(Fp8DotGeneralBase):
    """``jnp.einsum(eqn, lhs, rhs)`` with its contraction computed in fp8.

    ``rhs`` is the weight: its dtype is the computation dtype and ``lhs`` is cast to it.
    """

    def __call__(self, eqn, lhs, rhs, precision=None, preferred_element_type=None):
        compute_dtype = rhs.dtype
        lhs = lhs.astype(compute_dtype)
        dot_general = partial(
            ops.fp8_scaled_dot_general, quantize_compute_type=compute_dtype, **self._scaling_state()
        )
        # jnp.einsum's `_dot_general` keyword is how einsum takes a custom contraction; it
        # exists in every supported JAX (the version tests pin it).
        return jnp.einsum(
            eqn,
            lhs,
            rhs,
            precision=precision,
            preferred_element_type=preferred_element_type,
            _dot_general=dot_general,
        )


Fp8DotGeneral = Fp8DirectDotGeneralOp
