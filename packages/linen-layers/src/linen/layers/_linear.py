"""Linear layers: Dense, DenseGeneral, Einsum, Embed (the convolutions are in ``_conv``).

Parameter names, shapes, initializers and the order in which parameters are
created follow ``flax.linen``, so that a Flax checkpoint loads unchanged and the
same PRNG key gives the same initial values. Computation happens in the dtype
chosen by :func:`linen.layers.dtypes.promote_dtype` from the inputs and the
parameters (or in ``dtype`` when given); parameters are stored in ``param_dtype``.
"""

from __future__ import annotations

import functools
import string
from collections.abc import Callable, Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.core import Tracer

from linen.core.lifting import cacheable
from linen.core.meta import Partitioned
from linen.layers import initializers
from linen.layers._dtypes import promote_dtype
from linen.layers._explicit import (
    contraction_out_sharding,
    dense_out_sharding,
    dot_general_out_sharding,
    explicit_mesh,
    inferable_dot_general_operands,
    match_trailing,
)
from linen.layers._staged import (
    STAGING_TRACER,
    is_staged,
    nested_derivative,
    one_op_exact,
    staged,
)
from linen.layers._types import shape_of
from linen.layers._typing import Array, Dtype
from linen.layers.errors import (
    EinsumKernelLabelsError,
    LayerArgumentError,
    LayerAxisRangeError,
    LayerInputDtypeError,
    LayerInputRankError,
    LayerInputShapeError,
    describe_layer,
)
from linen.module import Module, compact, merge_param

__all__ = [
    'Dense',
    'DenseGeneral',
    'Einsum',
    'Embed',
]

default_kernel_init = initializers.lecun_normal()
# Flax's embedding init: normal with variance 1 / features (the fan is the feature axis).
default_embed_init = initializers.variance_scaling(1.0, 'fan_in', 'normal', out_axis=0)


def _boxed_reshape(value, shape):
    """Reshapes an initializer's result, keeping partitioning metadata if it is boxed."""
    if isinstance(value, Partitioned):
        # No sharding constraint on the flat value: its rank is not the names' rank.
        return value.replace_boxed(jnp.reshape(value.unbox(apply_constraint=False), shape))
    if hasattr(value, 'unbox') and hasattr(value, 'replace_boxed'):
        return value.replace_boxed(jnp.reshape(value.unbox(), shape))
    return jnp.reshape(value, shape)


def _dot(inputs, kernel, dimension_numbers, precision):
    return lax.dot_general(inputs, kernel, dimension_numbers, precision=precision)


# Dense's and DenseGeneral's default product on concrete values: a one-operation
# staged call (see `_staged.py`).
_one_dot = staged(_dot, static_argnums=(2, 3))


def _pick_dot_general(module):
    if module.dot_general_cls is not None:
        return module.dot_general_cls()
    if module.dot_general is not None:
        return module.dot_general
    return lax.dot_general


def _add_bias(y, bias):
    """Adds a bias over the trailing dims of ``y``.

    The bias gets ``y``'s rank first, so the add is legal under
    ``jax_numpy_rank_promotion='raise'`` (the reshape costs nothing in XLA).
    """
    if bias is None:
        return y
    if explicit_mesh(bias, y) is None:
        if type(y) is not STAGING_TRACER and isinstance(y, Tracer) and nested_derivative(y, bias):
            return _bias_add(y, bias)  # no staged call under a gradient of a gradient (F36)
        # (the usual case: one cached call, see _dense_bias_add)
        return _dense_bias_add(y, bias)
    return y + match_trailing(_with_rank(bias, y.ndim), y)


def _with_rank(x, ndim: int):
    """``x`` with leading unit axes up to rank ``ndim`` (explicit broadcasting)."""
    missing = ndim - x.ndim
    # (lax.reshape: the equation jnp.reshape makes, without its argument handling)
    return x if missing <= 0 else lax.reshape(x, (1,) * missing + tuple(x.shape))


def _bias_add(y, bias):
    return y + _with_rank(bias, y.ndim)


# Staged once per shape: traced, its two equations (reshape, add) are inlined, the
# ones a direct call emits, for a third of the Python; eagerly, one compiled call.
_inlined_bias_add = staged(_bias_add)


def _reshaped_bias_add(y, bias, shape: tuple):
    return y + lax.reshape(bias, shape)


_inlined_reshaped_bias_add = staged(_reshaped_bias_add, static_argnums=2)


def _dense_bias_add(y, bias):
    """``y + bias`` over ``y``'s trailing axis, as one cached call.

    Traced, its equations are inlined (see ``_staged.py``): the program is the one
    pure JAX writes. Eagerly, the reshape alone would be a dispatch of its own,
    slower than the matmul it follows; the one compiled call does both. Either way,
    and under eager vmap or grad, the numbers are those of the direct operations:
    the reshape is exact and the add is the only operation on values.
    """
    return y if bias is None else _inlined_bias_add(y, bias)


def _last_axis_numbers(ndim: int) -> tuple:
    """``dot_general`` dimension numbers contracting the last input axis with the kernel's first."""
    return (((ndim - 1,), (0,)), ((), ()))


def _dense_body(inputs, kernel, bias, precision):
    y = lax.dot_general(inputs, kernel, _last_axis_numbers(inputs.ndim), precision=precision)
    return y if bias is None else _bias_add(y, bias)


def _dense_general_body(inputs, kernel, bias, dimension_numbers, precision, bias_out_shape):
    out = lax.dot_general(inputs, kernel, dimension_numbers, precision=precision)
    return out if bias is None else _reshaped_bias_add(out, bias, bias_out_shape)


# A whole layer's operations staged at once under a staging trace (one cached call
# for the product and the bias add: the equations of the direct calls, so the same
# program and labels). Only there: under eager vmap or grad a compiled run could
# round differently from the op-by-op one a Flax user gets.
_staged_dense = staged(_dense_body, static_argnums=3)
_staged_dense_general = staged(_dense_general_body, static_argnums=(3, 4, 5))


def _static_ok(precision) -> bool:
    """Whether ``precision`` can be a static argument of a staged run: hashable
    (``lax.dot_general`` also takes a list; ``jnp.matmul`` and ``jnp.einsum`` do not)."""
    if precision is None:
        return True
    try:
        hash(precision)
    except TypeError:  # a list of precisions: run directly
        return False
    return True


# --------------------------------------------------------------------------- dense


class Dense(Module):
    """A linear map over the last axis: ``y = x @ kernel + bias``.

    Attributes:
      features: the number of output features.
      use_bias: whether to add a bias (param ``bias`` of shape ``(features,)``).
      dtype: the dtype of the computation (default: inferred from inputs and params).
      param_dtype: the dtype of the parameters.
      precision: numerical precision of the computation (see ``jax.lax.Precision``).
      kernel_init: initializer of ``kernel``, shape ``(in_features, features)``.
      bias_init: initializer of ``bias``.
      promote_dtype: function that casts ``(inputs, kernel, bias)`` to one dtype.
      dot_general: replaces ``lax.dot_general`` (e.g. a quantized dot).
      dot_general_cls: a class whose instances replace ``lax.dot_general``; wins
        over ``dot_general``.

    >>> import jax, jax.numpy as jnp
    >>> layer = Dense(features=3)
    >>> variables = layer.init(jax.random.key(0), jnp.ones((2, 4)))
    >>> jax.tree_util.tree_map(jnp.shape, variables['params'])
    {'bias': (3,), 'kernel': (4, 3)}
    """

    features: int
    use_bias: bool = True
    dtype: Dtype | None = None
    param_dtype: Dtype = jnp.float32
    precision: Any = None
    kernel_init: Callable = default_kernel_init
    bias_init: Callable = initializers.zeros_init()
    promote_dtype: Callable = promote_dtype
    dot_general: Callable | None = None
    dot_general_cls: Any = None

    @compact
    def __call__(self, inputs: Array) -> Array:
        shape = shape_of(inputs)
        if not shape:
            raise LayerAxisRangeError(
                describe_layer(self), '>= 1', (), 'Give the features on the last axis.'
            )
        kernel = self.param(
            'kernel', self.kernel_init, (shape[-1], self.features), self.param_dtype
        )
        bias = (
            self.param('bias', self.bias_init, (self.features,), self.param_dtype)
            if self.use_bias
            else None
        )
        inputs, kernel, bias = self.promote_dtype(inputs, kernel, bias, dtype=self.dtype)
        if self.dot_general is None and self.dot_general_cls is None:
            if explicit_mesh(inputs, kernel, bias) is None:
                # No operand typed with Explicit mesh axes (the usual case, asked
                # once): no output sharding to choose, no bias to reshard. Flax's
                # operations: `lax.dot_general` over the last axis, then the bias.
                # (is_staged inline: the eager path pays no call for the test)
                precision = self.precision
                hashable = precision is None or _static_ok(precision)
                staging_in = type(inputs) is STAGING_TRACER
                if staging_in or type(kernel) is STAGING_TRACER:
                    # One operand differentiated (a gradient's trace): staged unless
                    # a gradient of a gradient would regroup its sums (F36).
                    if hashable and (
                        (staging_in and type(kernel) is STAGING_TRACER)
                        or not nested_derivative(inputs, kernel, bias)
                    ):
                        return _staged_dense(inputs, kernel, bias, precision)
                numbers = (((len(shape) - 1,), (0,)), ((), ()))  # _last_axis_numbers, inline
                if hashable and one_op_exact(inputs, kernel):
                    y = _one_dot(inputs, kernel, numbers, precision)
                    return _dense_bias_add(y, bias)
                y = lax.dot_general(inputs, kernel, numbers, precision=precision)
                return _add_bias(y, bias)
            # Explicit mesh axes: Flax's `lax.dot_general`, given an output sharding
            # only where both sides of the contraction are sharded (Flax raises
            # there). Not `jnp.matmul`: under an eager grad its one compiled backward
            # can round the kernel's gradient differently from Flax's op-by-op one.
            numbers = (((len(shape) - 1,), (0,)), ((), ()))
            y = lax.dot_general(
                inputs,
                kernel,
                numbers,
                precision=self.precision,
                out_sharding=dense_out_sharding(inputs, kernel),
            )
        else:
            dimension_numbers = _last_axis_numbers(inputs.ndim)
            # A user's dot_general need not take out_sharding: under explicit mesh
            # axes its operands are resharded so JAX can infer the output.
            inputs, kernel = inferable_dot_general_operands(inputs, kernel, dimension_numbers)
            y = _pick_dot_general(self)(inputs, kernel, dimension_numbers, precision=self.precision)
        return _add_bias(y, bias)


# DenseGeneral's per-shape plans (see DenseGeneral.__call__)
_DENSE_GENERAL_PLANS: dict[tuple, tuple] = {}


def _normalize_axes(axes: tuple[int, ...], ndim: int) -> tuple[int, ...]:
    return tuple(sorted(ax if ax >= 0 else ndim + ax for ax in axes))


def _as_tuple(x) -> tuple:
    return tuple(x) if isinstance(x, Sequence) else (x,)


def _flat_initialize(init, n_in, n_out, rng, shape, dtype=jnp.float32):
    """``init`` on the 2-D (fan_in, fan_out) view of ``shape``, reshaped back."""
    fan_in = int(np.prod(shape[:n_in]))
    fan_out = int(np.prod(shape[-n_out:])) if n_out else int(np.prod(shape[n_in:]))
    # A kernel is always viewed as a matrix (fan_in 1 when nothing is contracted, as in
    # Flax); the bias (n_out None) as a vector.
    flat = init(rng, (fan_in, fan_out) if n_out is not None else (fan_out,), dtype)
    return _boxed_reshape(flat, shape)


@functools.lru_cache(maxsize=512)
def _flat_cached(init, n_in, n_out):
    return functools.partial(_flat_initialize, init, n_in, n_out)


def _flat_init(init, n_in: int, n_out: int | None):
    """The same initializer object for the same arguments (the shape-check cache keys on it)."""
    if init is initializers.zeros or init is initializers.ones:
        # A constant has no fan to respect: reshaping the flat one gives the same array,
        # and the bare initializer lets the scope skip deriving a key it would ignore.
        return init
    if cacheable(init):
        return _flat_cached(init, n_in, n_out)
    # A bound method, say: the cache would keep its Module (and its scope's trace) alive.
    return functools.partial(_flat_initialize, init, n_in, n_out)


class DenseGeneral(Module):
    """A linear map over any set of axes, with optional batch (shared) axes.

    The kernel has shape ``batch_shape + contracted_shape + features``; with
    ``batch_dims`` each batch position gets its own kernel.

    Attributes:
      features: int or tuple of output feature sizes.
      axis: int or tuple of input axes to contract.
      batch_dims: leading input axes (``0 .. k-1``) treated as independent batches.
      use_bias: as in :class:`Dense`. So are `dtype`, `param_dtype`, `kernel_init`, `bias_init`, `precision`, `promote_dtype`, `dot_general`, `dot_general_cls`.

    >>> import jax, jax.numpy as jnp
    >>> layer = DenseGeneral(features=(2, 5), axis=(-2, -1))
    >>> variables = layer.init(jax.random.key(0), jnp.ones((7, 3, 4)))
    >>> variables['params']['kernel'].shape
    (3, 4, 2, 5)
    """

    features: int | Sequence[int]
    axis: int | Sequence[int] = -1
    batch_dims: Sequence[int] = ()
    use_bias: bool = True
    dtype: Dtype | None = None
    param_dtype: Dtype = jnp.float32
    kernel_init: Callable = default_kernel_init
    bias_init: Callable = initializers.zeros_init()
    precision: Any = None
    promote_dtype: Callable = promote_dtype
    dot_general: Callable | None = None
    dot_general_cls: Any = None

    @compact
    def __call__(self, inputs: Array) -> Array:
        # The shapes and dimension numbers depend only on the fields and the input's
        # shape: worked out (and checked) once, then one dict lookup per call.
        shape = shape_of(inputs)
        try:
            key = (
                self.features,
                self.axis,
                self.batch_dims,
                shape,
                self.kernel_init,
                self.bias_init,
            )
            plan = _DENSE_GENERAL_PLANS.get(key)
        except TypeError:  # a list field or an unhashable initializer
            key = plan = None
        if plan is None:
            plan = _dense_general_plan(self, shape)
            if key is not None and cacheable((self.kernel_init, self.bias_init)):
                if len(_DENSE_GENERAL_PLANS) >= 1024:
                    _DENSE_GENERAL_PLANS.clear()
                _DENSE_GENERAL_PLANS[key] = plan
        kernel_init, kernel_shape, bias_init, bias_shape, dimension_numbers, bias_out_shape = plan

        kernel = self.param('kernel', kernel_init, kernel_shape, self.param_dtype)
        bias = (
            self.param('bias', bias_init, bias_shape, self.param_dtype) if self.use_bias else None
        )

        inputs, kernel, bias = self.promote_dtype(inputs, kernel, bias, dtype=self.dtype)
        sharding = {}
        # Explicit mesh axes on some operand (asked once; None in the usual case).
        explicit = explicit_mesh(inputs, kernel, bias) is not None
        if (
            not explicit
            and self.dot_general is None
            and self.dot_general_cls is None
            and (is_staged(inputs) or is_staged(kernel))
            and _static_ok(self.precision)
            and (
                (type(inputs) is STAGING_TRACER and type(kernel) is STAGING_TRACER)
                or not nested_derivative(inputs, kernel, bias)
            )
        ):
            return _staged_dense_general(
                inputs, kernel, bias, dimension_numbers, self.precision, bias_out_shape
            )
        default_dot = self.dot_general is None and self.dot_general_cls is None
        if (
            default_dot
            and not explicit
            and _static_ok(self.precision)
            and one_op_exact(inputs, kernel)
        ):
            out = _one_dot(inputs, kernel, dimension_numbers, self.precision)
        else:
            if default_dot:
                # Explicit mesh axes sharding the contraction ambiguously (None elsewhere).
                if explicit:
                    out_sharding = dot_general_out_sharding(inputs, kernel, dimension_numbers)
                    if out_sharding is not None:
                        sharding['out_sharding'] = out_sharding
            elif explicit:  # a user's dot_general need not take out_sharding: reshard its operands
                inputs, kernel = inferable_dot_general_operands(inputs, kernel, dimension_numbers)
            out = _pick_dot_general(self)(
                inputs, kernel, dimension_numbers, precision=self.precision, **sharding
            )
        if bias is not None:
            # Output layout: batch axes, free input axes, features; the bias gets
            # the output's rank (strict rank promotion forbids implicit broadcasting).
            if explicit:
                out = out + match_trailing(lax.reshape(bias, bias_out_shape), out)
            elif (
                type(out) is not STAGING_TRACER
                and isinstance(out, Tracer)
                and nested_derivative(out, bias)
            ):
                out = _reshaped_bias_add(out, bias, bias_out_shape)  # (F36)
            else:
                # (one operation on values: staged, traced or not; see `_staged.py`)
                out = _inlined_reshaped_bias_add(out, bias, bias_out_shape)
        return out


def _dense_general_plan(layer: DenseGeneral, shape: tuple) -> tuple:
    """``(kernel init, kernel shape, bias init, bias shape, dimension numbers, the
    bias's shape on the output)`` of ``layer`` for an input of ``shape``.

    Checks the axes (raising the layer's typed errors).
    """
    features = _as_tuple(layer.features)
    ndim = len(shape)
    axis, batch_dims = _as_tuple(layer.axis), _as_tuple(layer.batch_dims)
    # As Flax: the batch dims as given (never negative, so never counted from the end)
    # must be the leading axes 0..k-1, in any order; checked before the input's rank.
    if batch_dims and set(batch_dims) != set(range(max(batch_dims) + 1)):
        raise LayerArgumentError(
            describe_layer(layer),
            f'batch_dims={layer.batch_dims} are not the leading axes 0..{len(batch_dims) - 1}',
            'Move the batch axes to the front (jnp.moveaxis) before the layer; batch_dims '
            'count from the front, never from the end.',
            flax_text=f'batch_dims {batch_dims} must be consecutive leading dimensions '
            'starting from 0.',
        )
    for ax in (*axis, *batch_dims):
        if not -ndim <= ax < ndim:
            raise LayerAxisRangeError(
                describe_layer(layer),
                f'> {max(ax, -ax - 1)} to contract over axis={layer.axis} with '
                f'batch_dims={layer.batch_dims}',
                shape,
                'Pass an input with those axes, or change `axis`/`batch_dims`.',
            )
    axis, batch_dims = _normalize_axes(axis, ndim), _normalize_axes(batch_dims, ndim)
    n_batch, n_axis, n_features = len(batch_dims), len(axis), len(features)
    if batch_dims != tuple(range(n_batch)):
        raise LayerArgumentError(
            describe_layer(layer),
            f'batch_dims={layer.batch_dims} are not the leading axes 0..{n_batch - 1}',
            'Move the batch axes to the front (jnp.moveaxis) before the layer.',
            flax_text=f'batch_dims {batch_dims} must be consecutive leading dimensions '
            'starting from 0.',
        )
    if set(axis) & set(batch_dims):
        raise LayerArgumentError(
            describe_layer(layer),
            f'axis={layer.axis} overlaps batch_dims={layer.batch_dims}',
            'An axis is either contracted or a batch axis, not both.',
        )
    batch_shape = tuple(shape[ax] for ax in batch_dims)
    contracted_shape = tuple(shape[ax] for ax in axis)
    kernel_batch = tuple(range(n_batch))
    kernel_contract = tuple(range(n_batch, n_batch + n_axis))
    n_free = ndim - n_axis - n_batch
    # Initialize as a 2-D (fan_in, fan_out) matrix and reshape, so that
    # fan-based initializers see the true fan-in/fan-out of the map, as in Flax.
    return (
        _flat_init(layer.kernel_init, n_batch + n_axis, n_features),
        batch_shape + contracted_shape + features,
        _flat_init(layer.bias_init, 0, None),
        batch_shape + features,
        ((axis, kernel_contract), (batch_dims, kernel_batch)),
        batch_shape + (1,) * n_free + features,
    )


def _flax_einsum_text(einsum_str: str) -> str | None:
    """Flax's sentence for a malformed equation (its checks, in its order)."""
    if '->' not in einsum_str:
        return '`einsum_str` equation must be explicit and include "->".'
    if einsum_str.count(',') != 1:
        return (
            '`einsum_str` equation must have exactly two operands and therefore, exactly '
            f'one comma character, instead of {einsum_str.count(",")}'
        )
    if einsum_str.count('->') > 1:
        # Flax passes this on to jnp.einsum, whose parser says so.
        return "Subscripts can only contain one '->'."
    return None


class Einsum(Module):
    """A linear map written as an einsum ``'<inputs>,<kernel>-><output>'``.

    The kernel has shape ``shape``. The bias covers the output axes whose label
    comes from the kernel, in output order.

    Attributes:
      shape: the kernel's shape.
      einsum_str: the equation (``...`` stands for leading axes, as in numpy); may be
        given at call time instead.
      use_bias: as in :class:`Dense`; so are ``dtype``, ``param_dtype``, ``precision``,
        ``kernel_init``, ``bias_init`` and ``promote_dtype``.
      preferred_element_type: accumulation dtype passed to ``jnp.einsum``.

    >>> import jax, jax.numpy as jnp
    >>> layer = Einsum((5, 6, 7), 'abc,cde->abde')
    >>> variables = layer.init(jax.random.key(0), jnp.ones((3, 4, 5)))
    >>> jax.tree_util.tree_map(jnp.shape, variables['params'])
    {'bias': (6, 7), 'kernel': (5, 6, 7)}
    >>> layer = Einsum((5, 2), '...c,cd->...d')
    >>> layer.init_with_output(jax.random.key(0), jnp.ones((2, 3, 5)))[0].shape
    (2, 3, 2)
    """

    shape: Sequence[int]
    einsum_str: str | None = None
    use_bias: bool = True
    dtype: Dtype | None = None
    param_dtype: Dtype = jnp.float32
    precision: Any = None
    kernel_init: Callable = default_kernel_init
    bias_init: Callable = initializers.zeros_init()
    promote_dtype: Callable = promote_dtype
    preferred_element_type: Dtype | None = None

    @compact
    def __call__(self, inputs: Array, einsum_str: str | None = None) -> Array:
        einsum_str = merge_param('einsum_str', self.einsum_str, einsum_str).replace(' ', '')
        operands, arrow, output = einsum_str.partition('->')
        lhs, comma, rhs = operands.partition(',')
        if not arrow or not comma or ',' in rhs or not _einsum_labels_ok(einsum_str):
            raise LayerArgumentError(
                describe_layer(self),
                f'einsum_str {einsum_str!r} is not of the form "<inputs>,<kernel>-><output>"',
                'Write exactly two operands and an explicit output, e.g. "bd,dk->bk" or '
                '"...d,dk->...k"; "..." may appear at most once per term.',
                flax_text=_flax_einsum_text(einsum_str),
            )
        written_lhs = lhs
        lhs, rhs, output = _expand_ellipses(lhs, rhs, output, inputs.ndim, len(self.shape))
        if lhs is None or len(lhs) != inputs.ndim:
            explicit = len(written_lhs.replace('...', ''))
            expected = f'>= {explicit}' if '...' in written_lhs else str(explicit)
            raise LayerInputRankError(
                describe_layer(self),
                f'{expected} (from {written_lhs!r} in {einsum_str!r})',
                inputs.shape,
                'Match the equation to the input.',
            )
        if rhs is None or len(rhs) != len(self.shape):
            raise EinsumKernelLabelsError(
                describe_layer(self),
                f'the kernel labels of {einsum_str!r} do not match shape={tuple(self.shape)}',
                'Give one label per kernel dimension.',
            )

        kernel = self.param('kernel', self.kernel_init, tuple(self.shape), self.param_dtype)
        if self.use_bias:
            size = dict(zip(rhs, self.shape))
            bias_shape = tuple(size[c] for c in output if c in size)
            broadcast_shape = tuple(size.get(c, 1) for c in output)
            bias = self.param('bias', self.bias_init, bias_shape, self.param_dtype)
        else:
            bias = None

        inputs, kernel, bias = self.promote_dtype(inputs, kernel, bias, dtype=self.dtype)
        sharding = {}
        # Explicit mesh axes sharding the contraction ambiguously (None elsewhere).
        out_sharding = contraction_out_sharding(inputs, kernel, lhs, rhs, output)
        if out_sharding is not None:
            sharding['out_sharding'] = out_sharding
        y = jnp.einsum(
            einsum_str,
            inputs,
            kernel,
            precision=self.precision,
            preferred_element_type=self.preferred_element_type,
            **sharding,
        )
        if bias is not None:
            y = y + match_trailing(jnp.reshape(bias, broadcast_shape), y)
        return y


def _einsum_labels_ok(equation: str) -> bool:
    """One comma, one arrow and at most one ``...`` per term; any other character is a
    label, as ``jnp.einsum`` (under Flax too) reads it."""
    operands, _, output = equation.partition('->')
    for term in (*operands.split(','), output):
        rest = term.replace('...', '', 1)
        if any(c in '.,->' for c in rest):
            return False
    return True


def _expand_ellipses(lhs: str, rhs: str, output: str, lhs_ndim: int, rhs_ndim: int):
    """Spells each ``...`` out in fresh letters, as numpy reads it.

    The axes an ellipsis stands for are right-aligned across the operands and share
    labels (numpy's broadcasting rule), and the output's ellipsis is the longest of
    them. Returns ``(None, ...)``/``(.., None, ..)`` for an operand whose explicit
    labels outnumber its axes, so the caller can say which operand is wrong.
    """
    if '...' not in lhs + rhs + output:
        return lhs, rhs, output
    used = set(lhs + rhs + output)
    counts = []
    for term, ndim in ((lhs, lhs_ndim), (rhs, rhs_ndim)):
        explicit = len(term.replace('...', ''))
        counts.append(ndim - explicit if '...' in term else 0)
    if min(counts) < 0:
        return (None if counts[0] < 0 else lhs), (None if counts[1] < 0 else rhs), output
    fresh = [c for c in string.ascii_letters if c not in used][: max(counts)]
    spelled = []
    for term, count in zip((lhs, rhs), counts):
        spelled.append(term.replace('...', ''.join(fresh[len(fresh) - count :])))
    return spelled[0], spelled[1], output.replace('...', ''.join(fresh))


# --------------------------------------------------------------------------- embed


class Embed(Module):
    """A lookup table from integer ids to ``features``-dimensional vectors.

    The table is the parameter ``embedding`` of shape ``(num_embeddings, features)``,
    created in ``setup`` so that :meth:`attend` works without a prior call.
    Ids out of range give NaN rows (except with a single row, which every id gets,
    as in Flax).

    Attributes:
      num_embeddings: the number of rows (vocabulary size).
      features: the size of each vector.
      dtype: the dtype of the output (default: ``param_dtype``).
      param_dtype: the dtype of the table.
      embedding_init: initializer of the table (normal, variance ``1 / features``).
      promote_dtype: as in :class:`Dense`.

    >>> import jax, jax.numpy as jnp
    >>> layer = Embed(num_embeddings=10, features=3)
    >>> variables = layer.init(jax.random.key(0), jnp.array([1, 2]))
    >>> layer.apply(variables, jnp.array([[0, 9]])).shape
    (1, 2, 3)
    """

    num_embeddings: int
    features: int
    dtype: Dtype | None = None
    param_dtype: Dtype = jnp.float32
    embedding_init: Callable = default_embed_init
    promote_dtype: Callable = promote_dtype

    def setup(self):
        self.embedding = self.param(
            'embedding',
            self.embedding_init,
            (self.num_embeddings, self.features),
            self.param_dtype,
        )

    def __call__(self, inputs: Array) -> Array:
        """Looks up the rows of ``inputs`` (any shape of integer ids)."""
        if not jnp.issubdtype(jnp.result_type(inputs), jnp.integer):
            raise LayerInputDtypeError(
                describe_layer(self),
                'integer (token id)',
                jnp.result_type(inputs),
                'Cast the ids with `.astype(jnp.int32)`.',
                flax_text='Input type must be an integer or unsigned integer.',
            )
        (embedding,) = self.promote_dtype(self.embedding, dtype=self.dtype, inexact=False)
        if self.num_embeddings == 1:
            # Flax answers every id with the single row here (no NaN for ids >= 1).
            return jnp.broadcast_to(embedding[0], (*jnp.shape(inputs), self.features))
        return jnp.take(embedding, inputs, axis=0)

    def attend(self, query: Array) -> Array:
        """Scores ``query`` against every row: ``query @ embedding.T``.

        Used to share the table between input embedding and output logits.
        """
        if jnp.ndim(query) and jnp.shape(query)[-1:] != (self.features,):
            raise LayerInputShapeError(
                describe_layer(self),
                f'attend() query has shape {jnp.shape(query)} but the table has '
                f'{self.features} features',
                'Give a query whose last axis is `features`.',
            )
        query, embedding = self.promote_dtype(query, self.embedding, dtype=self.dtype)
        return jnp.dot(query, embedding.T)
