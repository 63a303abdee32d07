"""Recurrent cells, the ``RNN`` wrapper that scans a cell over time, and ``Bidirectional``.

A cell maps ``(carry, inputs) -> (new_carry, outputs)`` for one time step and builds its
initial carry with ``initialize_carry(rng, input_shape)``. ``RNN`` lifts the cell with
``linen.transforms.scan``: parameters are broadcast (shared by every step) and the carry
threads through the loop.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp

from linen.core.errors import LinenError
from linen.core.frozen_dict import FrozenDict
from linen.layers._linear import Conv, Dense
from linen.layers.dtypes import promote_dtype
from linen.module import Module, compact, nowrap

Array = Any
PRNGKey = Any
Dtype = Any
Carry = Any

_default_kernel_init = jax.nn.initializers.lecun_normal()
_default_recurrent_init = jax.nn.initializers.orthogonal()
_zeros_init = jax.nn.initializers.zeros
_ones_init = jax.nn.initializers.ones


# ----------------------------------------------------------------------------- errors


def _where(module) -> str:
    scope = getattr(module, 'scope', None)
    path = getattr(scope, 'path', None) if scope is not None else None
    if path:
        return f'{type(module).__name__} at "/{"/".join(path)}"'
    return f'{type(module).__name__} {module.name!r}' if module.name else type(module).__name__


class RNNCarryShapeError(LinenError, ValueError):
    """A cell got a carry whose feature size is not the cell's ``features``.

    >>> nn.LSTMCell(8).apply(variables, (c4, h4), x)  # doctest: +SKIP
    """

    def __init__(self, where: str, features: int, got):
        super().__init__(
            f'{where}: the carry has shape {tuple(got)}, but the cell has features='
            f'{features}, so its last axis should be {features}. Build the carry with '
            '`cell.initialize_carry(rng, input_shape)`.'
        )


class RNNInputShapeError(LinenError, ValueError):
    """``RNN`` inputs have no time axis, or ``seq_lengths`` does not match the batch.

    >>> nn.RNN(nn.LSTMCell(4)).init(key, jnp.ones((3,)))  # doctest: +SKIP
    """

    def __init__(self, where: str, what: str):
        super().__init__(
            f'{where}: {what}. Inputs are [batch..., time, features...] (or [time, batch..., '
            'features...] with time_major=True) where the cell has num_feature_axes feature '
            'axes; seq_lengths is an integer array of the batch shape.'
        )


# ----------------------------------------------------------------------------- cells


class RNNCellBase(Module):
    """Base class of the recurrent cells.

    Subclasses implement ``__call__(carry, inputs) -> (new_carry, outputs)``,
    ``initialize_carry(rng, input_shape)`` and the ``num_feature_axes`` property (how many
    trailing axes of the inputs are features: 1 for dense cells, ``len(kernel_size) + 1``
    for convolutional ones).
    """

    @nowrap
    def initialize_carry(self, rng: PRNGKey, input_shape: tuple[int, ...]) -> Carry:
        """The initial carry for inputs of shape ``batch_dims + feature_dims``."""
        raise NotImplementedError

    @property
    def num_feature_axes(self) -> int:
        """The number of trailing feature axes of the inputs."""
        raise NotImplementedError


def _check_carry(cell, h):
    if h.shape[-1] != cell.features:
        raise RNNCarryShapeError(_where(cell), cell.features, h.shape)


def _two_part_carry(cell, rng, input_shape, feature_axes):
    """``(c, h)`` for the LSTM cells: two draws of ``carry_init`` from split keys."""
    batch_dims = tuple(input_shape[:-feature_axes])
    signal_dims = tuple(input_shape[-feature_axes:-1])
    key_c, key_h = jax.random.split(rng)
    shape = (*batch_dims, *signal_dims, cell.features)
    return (
        cell.carry_init(key_c, shape, cell.param_dtype),
        cell.carry_init(key_h, shape, cell.param_dtype),
    )


def _one_part_carry(cell, rng, input_shape):
    shape = (*input_shape[:-1], cell.features)
    return cell.carry_init(rng, shape, cell.param_dtype)


class LSTMCell(RNNCellBase):
    r"""Long short-term memory cell.

    .. math::
        i = \sigma(W_{ii} x + W_{hi} h + b_{hi}),\;
        f = \sigma(W_{if} x + W_{hf} h + b_{hf}),\;
        g = \tanh(W_{ig} x + W_{hg} h + b_{hg}),\;
        o = \sigma(W_{io} x + W_{ho} h + b_{ho}),\;
        c' = f c + i g,\; h' = o \tanh(c')

    Parameters are :class:`Dense` children ``ii``, ``if``, ``ig``, ``io`` (input kernels,
    no bias) and ``hi``, ``hf``, ``hg``, ``ho`` (recurrent kernels with bias).

    Attributes:
      features: hidden size.
      gate_fn: gate activation (default sigmoid).
      activation_fn: cell activation (default tanh).
      kernel_init: initializer of the input kernels.
      recurrent_kernel_init: initializer of the recurrent kernels (default orthogonal).
      bias_init: initializer of the biases.
      dtype: computation dtype.
      param_dtype: dtype of the parameters and of the initial carry.
      carry_init: initializer of the carry.

    >>> cell = LSTMCell(features=4)
    >>> x = jnp.ones((2, 3))
    >>> carry = cell.initialize_carry(jax.random.key(0), x.shape)
    >>> variables = cell.init(jax.random.key(1), carry, x)
    >>> (c, h), y = cell.apply(variables, carry, x)
    >>> y.shape
    (2, 4)
    """

    features: int
    gate_fn: Callable[..., Any] = jax.nn.sigmoid
    activation_fn: Callable[..., Any] = jax.nn.tanh
    kernel_init: Callable = _default_kernel_init
    recurrent_kernel_init: Callable = _default_recurrent_init
    bias_init: Callable = _zeros_init
    dtype: Dtype | None = None
    param_dtype: Dtype = jnp.float32
    carry_init: Callable = _zeros_init

    @compact
    def __call__(self, carry, inputs):
        """One step: ``((c, h), x) -> ((c', h'), h')``."""
        c, h = carry
        _check_carry(self, h)
        dense_h = functools.partial(
            Dense,
            features=self.features,
            use_bias=True,
            kernel_init=self.recurrent_kernel_init,
            bias_init=self.bias_init,
            dtype=self.dtype,
            param_dtype=self.param_dtype,
        )
        dense_i = functools.partial(
            Dense,
            features=self.features,
            use_bias=False,
            kernel_init=self.kernel_init,
            dtype=self.dtype,
            param_dtype=self.param_dtype,
        )
        i = self.gate_fn(dense_i(name='ii')(inputs) + dense_h(name='hi')(h))
        f = self.gate_fn(dense_i(name='if')(inputs) + dense_h(name='hf')(h))
        g = self.activation_fn(dense_i(name='ig')(inputs) + dense_h(name='hg')(h))
        o = self.gate_fn(dense_i(name='io')(inputs) + dense_h(name='ho')(h))
        new_c = f * c + i * g
        new_h = o * self.activation_fn(new_c)
        return (new_c, new_h), new_h

    @nowrap
    def initialize_carry(self, rng: PRNGKey, input_shape: tuple[int, ...]):
        """``(c, h)``, each ``batch_dims + (features,)``, from ``carry_init``.

        Args:
          rng: split in two, one key for ``c`` and one for ``h``.
          input_shape: shape of one step's input, ``batch_dims + (in_features,)``.
        """
        return _two_part_carry(self, rng, input_shape, 1)

    @property
    def num_feature_axes(self) -> int:
        return 1


class _GateKernels(Module):
    """Holds one gate's kernel (and bias) under Flax's names, without computing."""

    in_features: int
    features: int
    use_bias: bool
    kernel_init: Callable
    bias_init: Callable
    param_dtype: Dtype

    @compact
    def __call__(self):
        kernel = self.param(
            'kernel', self.kernel_init, (self.in_features, self.features), self.param_dtype
        )
        if not self.use_bias:
            return kernel, None
        return kernel, self.param('bias', self.bias_init, (self.features,), self.param_dtype)


class OptimizedLSTMCell(LSTMCell):
    """An :class:`LSTMCell` that computes all four gates with two matmuls.

    Same parameter tree (``ii``...``ho`` with ``kernel``/``bias``), same initial values and,
    up to float rounding, the same outputs as :class:`LSTMCell`; the per-gate kernels are
    concatenated so the step does one input and one recurrent matmul instead of eight.

    >>> cell = OptimizedLSTMCell(features=4)
    >>> x = jnp.ones((2, 3))
    >>> carry = cell.initialize_carry(jax.random.key(0), x.shape)
    >>> (c, h), y = cell.apply(cell.init(jax.random.key(1), carry, x), carry, x)
    >>> y.shape
    (2, 4)
    """

    @compact
    def __call__(self, carry, inputs):
        """One step: ``((c, h), x) -> ((c', h'), h')``."""
        c, h = carry
        _check_carry(self, h)
        in_features = inputs.shape[-1]
        input_kernels, hidden_kernels, hidden_biases = [], [], []
        for gate in ('i', 'f', 'g', 'o'):
            kernel, _ = _GateKernels(
                in_features,
                self.features,
                False,
                self.kernel_init,
                self.bias_init,
                self.param_dtype,
                name=f'i{gate}',
            )()
            input_kernels.append(kernel)
            kernel, bias = _GateKernels(
                self.features,
                self.features,
                True,
                self.recurrent_kernel_init,
                self.bias_init,
                self.param_dtype,
                name=f'h{gate}',
            )()
            hidden_kernels.append(kernel)
            hidden_biases.append(bias)
        kernel_i = jnp.concatenate(input_kernels, axis=-1)
        kernel_h = jnp.concatenate(hidden_kernels, axis=-1)
        bias = jnp.concatenate(hidden_biases, axis=-1)
        inputs, h_in, kernel_i, kernel_h, bias = promote_dtype(
            inputs, h, kernel_i, kernel_h, bias, dtype=self.dtype
        )
        gates = inputs @ kernel_i + (h_in @ kernel_h + bias)
        i, f, g, o = jnp.split(gates, 4, axis=-1)
        i, f, o = self.gate_fn(i), self.gate_fn(f), self.gate_fn(o)
        g = self.activation_fn(g)
        new_c = f * c + i * g
        new_h = o * self.activation_fn(new_c)
        return (new_c, new_h), new_h


class GRUCell(RNNCellBase):
    r"""Gated recurrent unit cell.

    .. math::
        r = \sigma(W_{ir} x + b_{ir} + W_{hr} h),\;
        z = \sigma(W_{iz} x + b_{iz} + W_{hz} h),\;
        n = \tanh(W_{in} x + b_{in} + r (W_{hn} h + b_{hn})),\;
        h' = (1 - z) n + z h

    Parameters: :class:`Dense` children ``ir``, ``iz``, ``in`` (with bias) and ``hr``,
    ``hz`` (no bias), ``hn`` (with bias).

    Attributes are those of :class:`LSTMCell`.

    >>> cell = GRUCell(features=4)
    >>> x = jnp.ones((2, 3))
    >>> carry = cell.initialize_carry(jax.random.key(0), x.shape)
    >>> h, y = cell.apply(cell.init(jax.random.key(1), carry, x), carry, x)
    >>> y.shape
    (2, 4)
    """

    features: int
    gate_fn: Callable[..., Any] = jax.nn.sigmoid
    activation_fn: Callable[..., Any] = jax.nn.tanh
    kernel_init: Callable = _default_kernel_init
    recurrent_kernel_init: Callable = _default_recurrent_init
    bias_init: Callable = _zeros_init
    dtype: Dtype | None = None
    param_dtype: Dtype = jnp.float32
    carry_init: Callable = _zeros_init

    @compact
    def __call__(self, carry, inputs):
        """One step: ``(h, x) -> (h', h')``."""
        h = carry
        _check_carry(self, h)
        dense_h = functools.partial(
            Dense,
            features=self.features,
            use_bias=False,
            kernel_init=self.recurrent_kernel_init,
            bias_init=self.bias_init,
            dtype=self.dtype,
            param_dtype=self.param_dtype,
        )
        dense_i = functools.partial(
            Dense,
            features=self.features,
            use_bias=True,
            kernel_init=self.kernel_init,
            bias_init=self.bias_init,
            dtype=self.dtype,
            param_dtype=self.param_dtype,
        )
        r = self.gate_fn(dense_i(name='ir')(inputs) + dense_h(name='hr')(h))
        z = self.gate_fn(dense_i(name='iz')(inputs) + dense_h(name='hz')(h))
        n = self.activation_fn(
            dense_i(name='in')(inputs) + r * dense_h(name='hn', use_bias=True)(h)
        )
        new_h = (1.0 - z) * n + z * h
        return new_h, new_h

    @nowrap
    def initialize_carry(self, rng: PRNGKey, input_shape: tuple[int, ...]):
        """``h`` of shape ``batch_dims + (features,)`` from ``carry_init(rng, ...)``."""
        return _one_part_carry(self, rng, input_shape)

    @property
    def num_feature_axes(self) -> int:
        return 1


class MGUCell(RNNCellBase):
    r"""Minimal gated unit cell.

    .. math::
        f = \sigma(W_{if} x + b_{if} + W_{hf} h),\;
        n = \tanh(W_{in} x + b_{in} + f (W_{hn} h + b_{hn})),\;
        h' = (1 - f) n + f h

    With ``reset_gate=False`` the candidate ignores the gate and ``hn`` has no bias:
    :math:`n = \tanh(W_{in} x + b_{in} + W_{hn} h)`.

    Attributes:
      features: hidden size.
      gate_fn, activation_fn, kernel_init, recurrent_kernel_init, dtype, param_dtype,
        carry_init: as for :class:`LSTMCell`.
      forget_bias_init: initializer of ``if``'s bias (default ones).
      activation_bias_init: initializer of ``in``'s and ``hn``'s biases (default zeros).
      reset_gate: whether the gate also scales the recurrent term of the candidate.

    >>> cell = MGUCell(features=4)
    >>> x = jnp.ones((2, 3))
    >>> carry = cell.initialize_carry(jax.random.key(0), x.shape)
    >>> h, y = cell.apply(cell.init(jax.random.key(1), carry, x), carry, x)
    >>> y.shape
    (2, 4)
    """

    features: int
    gate_fn: Callable[..., Any] = jax.nn.sigmoid
    activation_fn: Callable[..., Any] = jax.nn.tanh
    kernel_init: Callable = _default_kernel_init
    recurrent_kernel_init: Callable = _default_recurrent_init
    forget_bias_init: Callable = _ones_init
    activation_bias_init: Callable = _zeros_init
    dtype: Dtype | None = None
    param_dtype: Dtype = jnp.float32
    carry_init: Callable = _zeros_init
    reset_gate: bool = True

    @compact
    def __call__(self, carry, inputs):
        """One step: ``(h, x) -> (h', h')``."""
        h = carry
        _check_carry(self, h)
        dense_h = functools.partial(
            Dense,
            features=self.features,
            use_bias=False,
            kernel_init=self.recurrent_kernel_init,
            dtype=self.dtype,
            param_dtype=self.param_dtype,
        )
        dense_i = functools.partial(
            Dense,
            features=self.features,
            use_bias=True,
            kernel_init=self.kernel_init,
            dtype=self.dtype,
            param_dtype=self.param_dtype,
        )
        f = self.gate_fn(
            dense_i(name='if', bias_init=self.forget_bias_init)(inputs) + dense_h(name='hf')(h)
        )
        candidate_in = dense_i(name='in', bias_init=self.activation_bias_init)(inputs)
        if self.reset_gate:
            recurrent = f * dense_h(name='hn', use_bias=True, bias_init=self.activation_bias_init)(
                h
            )
        else:
            recurrent = dense_h(name='hn')(h)
        n = self.activation_fn(candidate_in + recurrent)
        new_h = (1.0 - f) * n + f * h
        return new_h, new_h

    @nowrap
    def initialize_carry(self, rng: PRNGKey, input_shape: tuple[int, ...]):
        """``h`` of shape ``batch_dims + (features,)`` from ``carry_init(rng, ...)``."""
        return _one_part_carry(self, rng, input_shape)

    @property
    def num_feature_axes(self) -> int:
        return 1


class SimpleCell(RNNCellBase):
    r"""Elman cell: :math:`h' = \tanh(W_i x + b_i + W_h h)` (plus :math:`h` inside the
    activation when ``residual``).

    Parameters: :class:`Dense` children ``i`` (with bias) and ``h`` (no bias).

    Attributes:
      features: hidden size.
      activation_fn, kernel_init, recurrent_kernel_init, bias_init, dtype, param_dtype,
        carry_init: as for :class:`LSTMCell`.
      residual: add the previous carry to the pre-activation.

    >>> cell = SimpleCell(features=4)
    >>> x = jnp.ones((2, 3))
    >>> carry = cell.initialize_carry(jax.random.key(0), x.shape)
    >>> h, y = cell.apply(cell.init(jax.random.key(1), carry, x), carry, x)
    >>> y.shape
    (2, 4)
    """

    features: int
    activation_fn: Callable[..., Any] = jax.nn.tanh
    kernel_init: Callable = _default_kernel_init
    recurrent_kernel_init: Callable = _default_recurrent_init
    bias_init: Callable = _zeros_init
    dtype: Dtype | None = None
    param_dtype: Dtype = jnp.float32
    carry_init: Callable = _zeros_init
    residual: bool = False

    @compact
    def __call__(self, carry, inputs):
        """One step: ``(h, x) -> (h', h')``."""
        _check_carry(self, carry)
        pre = Dense(
            features=self.features,
            use_bias=True,
            kernel_init=self.kernel_init,
            bias_init=self.bias_init,
            dtype=self.dtype,
            param_dtype=self.param_dtype,
            name='i',
        )(inputs) + Dense(
            features=self.features,
            use_bias=False,
            kernel_init=self.recurrent_kernel_init,
            dtype=self.dtype,
            param_dtype=self.param_dtype,
            name='h',
        )(carry)
        if self.residual:
            pre = pre + carry
        new_carry = self.activation_fn(pre)
        return new_carry, new_carry

    @nowrap
    def initialize_carry(self, rng: PRNGKey, input_shape: tuple[int, ...]):
        """``h`` of shape ``batch_dims + (features,)`` from ``carry_init(rng, ...)``."""
        return _one_part_carry(self, rng, input_shape)

    @property
    def num_feature_axes(self) -> int:
        return 1


class ConvLSTMCell(RNNCellBase):
    r"""Convolutional LSTM cell: the LSTM's matmuls become convolutions.

    Two :class:`Conv` children, ``ih`` (inputs) and ``hh`` (hidden state), each with
    ``4 * features`` output channels split into the gates ``i, g, f, o``:

    .. math::
        c' = \sigma(f + 1) c + \sigma(i) \tanh(g),\; h' = \sigma(o) \tanh(c')

    (the ``+ 1`` biases the forget gate open).

    Attributes:
      features: number of channels of the hidden state.
      kernel_size: convolution window, e.g. ``(3, 3)``.
      strides, padding, use_bias: as for :class:`Conv`.
      dtype, param_dtype, carry_init: as for :class:`LSTMCell`.

    >>> cell = ConvLSTMCell(features=4, kernel_size=(3, 3))
    >>> x = jnp.ones((2, 8, 8, 3))
    >>> carry = cell.initialize_carry(jax.random.key(0), x.shape)
    >>> (c, h), y = cell.apply(cell.init(jax.random.key(1), carry, x), carry, x)
    >>> y.shape
    (2, 8, 8, 4)
    """

    features: int
    kernel_size: tuple[int, ...]
    strides: tuple[int, ...] | None = None
    padding: str | tuple[tuple[int, int], ...] = 'SAME'
    use_bias: bool = True
    dtype: Dtype | None = None
    param_dtype: Dtype = jnp.float32
    carry_init: Callable = _zeros_init

    @compact
    def __call__(self, carry, inputs):
        """One step: ``((c, h), x) -> ((c', h'), h')``."""
        c, h = carry
        _check_carry(self, h)
        conv = functools.partial(
            Conv,
            features=4 * self.features,
            kernel_size=self.kernel_size,
            strides=self.strides,
            padding=self.padding,
            use_bias=self.use_bias,
            dtype=self.dtype,
            param_dtype=self.param_dtype,
        )
        gates = conv(name='ih')(inputs) + conv(name='hh')(h)
        i, g, f, o = jnp.split(gates, 4, axis=-1)
        new_c = jax.nn.sigmoid(f + 1.0) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        new_h = jax.nn.sigmoid(o) * jnp.tanh(new_c)
        return (new_c, new_h), new_h

    @nowrap
    def initialize_carry(self, rng: PRNGKey, input_shape: tuple[int, ...]):
        """``(c, h)``, each ``batch_dims + spatial_dims + (features,)``.

        Args:
          rng: split in two, one key for ``c`` and one for ``h``.
          input_shape: shape of one step's input, ``batch_dims + spatial_dims +
            (in_features,)``.
        """
        return _two_part_carry(self, rng, input_shape, self.num_feature_axes)

    @property
    def num_feature_axes(self) -> int:
        return len(self.kernel_size) + 1


# ----------------------------------------------------------------------------- RNN


def flip_sequences(inputs, seq_lengths, num_batch_dims: int, time_major: bool):
    """Reverses each sequence's first ``seq_lengths`` steps along the time axis.

    Step ``t`` of sequence ``b`` reads step ``(seq_lengths[b] - 1 - t) mod T``: the valid
    part is reversed in place and the padding (reversed as well) stays at the end, so a
    second flip restores the input. Without ``seq_lengths`` the whole axis is flipped.
    """
    time_axis = 0 if time_major else num_batch_dims

    def flip(x):
        if seq_lengths is None:
            return jnp.flip(x, axis=time_axis)
        steps = x.shape[time_axis]
        lengths = jnp.asarray(seq_lengths)
        # idx has the batch shape plus the time axis, at the position time has in x.
        if time_major:
            idx = lengths[None] - 1 - jnp.arange(steps).reshape((steps,) + (1,) * lengths.ndim)
        else:
            idx = lengths[..., None] - 1 - jnp.arange(steps)
        idx = idx % steps
        idx = idx.reshape(idx.shape + (1,) * (x.ndim - idx.ndim))
        return jnp.take_along_axis(x, idx, axis=time_axis)

    return jax.tree_util.tree_map(flip, inputs)


def _select_last_carry(carries, seq_lengths):
    """Each sequence's carry after its last valid step; ``carries`` is time-stacked."""
    last = jnp.asarray(seq_lengths) - 1

    def pick(x):
        idx = last.reshape((1, *last.shape) + (1,) * (x.ndim - 1 - last.ndim))
        return jnp.take_along_axis(x, idx, axis=0)[0]

    return jax.tree_util.tree_map(pick, carries)


def _promote_carry(carry, input_dtype):
    """Widens a float carry to the inputs' float dtype (e.g. float64 inputs)."""
    if not jnp.issubdtype(input_dtype, jnp.floating):
        return carry

    def widen(c):
        dtype = jnp.promote_types(c.dtype, input_dtype)
        return c if dtype == c.dtype else c.astype(dtype)

    return jax.tree_util.tree_map(widen, carry)


def _match_dtypes(new_carry, carry):
    """Casts a step's carry back to the incoming carry's dtypes, as ``lax.scan`` needs."""
    return jax.tree_util.tree_map(
        lambda new, old: new if new.dtype == old.dtype else new.astype(old.dtype),
        new_carry,
        carry,
    )


def _first_leaf(tree):
    return jax.tree_util.tree_leaves(tree)[0]


def _concatenate(a, b):
    return jnp.concatenate([a, b], axis=-1)


class RNN(Module):
    """Runs a cell over the time axis of its inputs (a lifted ``scan``).

    The cell's parameters live under ``cell`` and are shared by all steps
    (``variable_broadcast='params'``). Without ``initial_carry`` the carry comes from
    ``cell.initialize_carry(init_key or random.key(0), one_step_input_shape)``.

    Attributes:
      cell: an :class:`RNNCellBase` instance.
      time_major: inputs are ``[time, batch..., features...]`` instead of
        ``[batch..., time, features...]``.
      return_carry: return ``(final_carry, outputs)`` instead of ``outputs``.
      reverse: run from the last step to the first (honouring ``seq_lengths``: padding
        stays at the end).
      keep_order: with ``reverse``, flip the outputs back to the input's order.
      unroll: how many steps to unroll in each iteration of the loop.
      variable_axes, variable_broadcast, variable_carry, split_rngs: passed to
        :func:`linen.transforms.scan`.

    Where Flax's ``RNN`` stops with a scan carry type error, this one adapts: the carry it
    builds itself is widened to the inputs' float dtype (float64 inputs get a float64
    carry), and a step whose new carry has another dtype than the incoming one (a cell
    with ``dtype=jnp.bfloat16`` fed a float32 carry) is cast back to the incoming dtype.

    >>> layer = RNN(LSTMCell(features=4))
    >>> x = jnp.ones((2, 5, 3))
    >>> layer.apply(layer.init(jax.random.key(0), x), x).shape
    (2, 5, 4)
    """

    cell: RNNCellBase
    time_major: bool = False
    return_carry: bool = False
    reverse: bool = False
    keep_order: bool = False
    unroll: int = 1
    variable_axes: Mapping[Any, Any] = FrozenDict()
    variable_broadcast: Any = 'params'
    variable_carry: Any = False
    split_rngs: Mapping[Any, bool] = FrozenDict({'params': False})

    def __call__(
        self,
        inputs,
        *,
        initial_carry: Carry | None = None,
        init_key: PRNGKey | None = None,
        seq_lengths: Array | None = None,
        return_carry: bool | None = None,
        time_major: bool | None = None,
        reverse: bool | None = None,
        keep_order: bool | None = None,
    ):
        """Scans the cell over time.

        Args:
          inputs: ``[batch..., time, features...]`` (or time-major).
          initial_carry: the carry at the first step.
          init_key: key for ``initialize_carry`` when ``initial_carry`` is not given.
          seq_lengths: ``[batch...]`` integer lengths; the returned carry is the one after
            each sequence's last valid step, and ``reverse`` flips only the valid steps.
          return_carry, time_major, reverse, keep_order: override the attributes.

        Returns:
          ``outputs`` (time axis as in the inputs), or ``(carry, outputs)``.
        """
        from linen.transforms import scan

        return_carry = self.return_carry if return_carry is None else return_carry
        time_major = self.time_major if time_major is None else time_major
        reverse = self.reverse if reverse is None else reverse
        keep_order = self.keep_order if keep_order is None else keep_order

        shape = _first_leaf(inputs).shape
        feature_axes = self.cell.num_feature_axes
        if len(shape) < feature_axes + 1:
            raise RNNInputShapeError(
                _where(self),
                f"inputs of shape {shape} have no time axis before the cell's "
                f'{feature_axes} feature axes',
            )
        if time_major:
            time_axis = 0
            batch_dims = shape[1 : len(shape) - feature_axes]
        else:
            time_axis = len(shape) - feature_axes - 1
            batch_dims = shape[:time_axis]
        if seq_lengths is not None and tuple(jnp.shape(seq_lengths)) != tuple(batch_dims):
            raise RNNInputShapeError(
                _where(self),
                f'seq_lengths has shape {tuple(jnp.shape(seq_lengths))} but the batch shape '
                f'of the inputs is {tuple(batch_dims)}',
            )

        if reverse:
            inputs = flip_sequences(inputs, seq_lengths, len(batch_dims), time_major)

        carry = initial_carry
        if carry is None:
            if init_key is None:
                init_key = jax.random.key(0)
            step_shape = shape[:time_axis] + shape[time_axis + 1 :]
            carry = _promote_carry(
                self.cell.initialize_carry(init_key, step_shape), _first_leaf(inputs).dtype
            )

        # With seq_lengths the carry after the last valid step is needed, not the final
        # one, so every step's carry is stacked as an extra output.
        keep_carries = seq_lengths is not None and return_carry

        def scan_fn(cell, carry, x):
            new_carry, y = cell(carry, x)
            new_carry = _match_dtypes(new_carry, carry)
            return new_carry, ((new_carry, y) if keep_carries else y)

        scanned = scan(
            scan_fn,
            in_axes=time_axis,
            out_axes=(0, time_axis) if keep_carries else time_axis,
            unroll=self.unroll,
            variable_axes=self.variable_axes,
            variable_broadcast=self.variable_broadcast,
            variable_carry=self.variable_carry,
            split_rngs=self.split_rngs,
        )
        carry, outputs = scanned(self.cell, carry, inputs)
        if keep_carries:
            carries, outputs = outputs
            carry = _select_last_carry(carries, seq_lengths)

        if reverse and keep_order:
            outputs = flip_sequences(outputs, seq_lengths, len(batch_dims), time_major)
        return (carry, outputs) if return_carry else outputs


class Bidirectional(Module):
    """Runs one RNN forward and one backward over the inputs and merges their outputs.

    The backward RNN runs with ``reverse=True, keep_order=True``, so both outputs are in
    the input's order before ``merge_fn`` (default: concatenate the last axis).

    Attributes:
      forward_rnn: an :class:`RNN` (or compatible) run forward.
      backward_rnn: an :class:`RNN` run backward.
      merge_fn: combines the two outputs.
      time_major: as for :class:`RNN`.
      return_carry: return ``((forward_carry, backward_carry), outputs)``.

    >>> layer = Bidirectional(RNN(LSTMCell(4)), RNN(GRUCell(4)))
    >>> x = jnp.ones((2, 5, 3))
    >>> layer.apply(layer.init(jax.random.key(0), x), x).shape
    (2, 5, 8)
    """

    forward_rnn: Any
    backward_rnn: Any
    merge_fn: Callable[[Array, Array], Array] = _concatenate
    time_major: bool = False
    return_carry: bool = False

    def __call__(
        self,
        inputs,
        *,
        initial_carry: Carry | None = None,
        init_key: PRNGKey | None = None,
        seq_lengths: Array | None = None,
        return_carry: bool | None = None,
        time_major: bool | None = None,
        reverse: bool | None = None,
        keep_order: bool | None = None,
    ):
        """Runs both directions; ``reverse`` and ``keep_order`` are accepted and ignored.

        Args:
          inputs: as for :class:`RNN`.
          initial_carry: ``(forward_carry, backward_carry)``.
          init_key: split in two for the two RNNs' ``initialize_carry``.
          seq_lengths: ``[batch...]`` lengths, passed to both RNNs.
          return_carry, time_major: override the attributes.
        """
        del reverse, keep_order  # the directions are fixed
        return_carry = self.return_carry if return_carry is None else return_carry
        time_major = self.time_major if time_major is None else time_major
        carry_fw, carry_bw = (None, None) if initial_carry is None else initial_carry
        key_fw, key_bw = (None, None) if init_key is None else jax.random.split(init_key)
        carry_fw, out_fw = self.forward_rnn(
            inputs,
            initial_carry=carry_fw,
            init_key=key_fw,
            seq_lengths=seq_lengths,
            return_carry=True,
            time_major=time_major,
            reverse=False,
        )
        carry_bw, out_bw = self.backward_rnn(
            inputs,
            initial_carry=carry_bw,
            init_key=key_bw,
            seq_lengths=seq_lengths,
            return_carry=True,
            time_major=time_major,
            reverse=True,
            keep_order=True,
        )
        outputs = jax.tree_util.tree_map(self.merge_fn, out_fw, out_bw)
        carry = (carry_fw, carry_bw)
        return (carry, outputs) if return_carry else outputs
