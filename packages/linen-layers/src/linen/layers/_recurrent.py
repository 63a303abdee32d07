"""Recurrent cells.

A cell maps ``(carry, inputs) -> (new_carry, outputs)`` for one time step and builds its
initial carry with ``initialize_carry(rng, input_shape)``. The ``RNN`` wrapper that scans a
cell over time, and ``Bidirectional``, live in ``_rnn``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from linen.layers._conv import Conv
from linen.layers._dtypes import promote_dtype
from linen.layers._linear import Dense, _with_rank
from linen.layers.errors import RNNCarryShapeError as RNNCarryShapeError
from linen.layers.errors import RNNInputShapeError as RNNInputShapeError
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


def _lstm_hidden_size(cell, c, h) -> int:
    """The hidden size an LSTM step runs at: the carry's, as in Flax."""
    c_last, h_last = jnp.shape(c)[-1:], jnp.shape(h)[-1:]
    # Flax broadcasts c against the gates (of h's size): a size of 1 on either side runs.
    if c_last != h_last and (1,) not in (c_last, h_last) and c_last and h_last:
        raise RNNCarryShapeError(
            _where(cell),
            f'the carry (c, h) has shapes {tuple(jnp.shape(c))} and {tuple(jnp.shape(h))}; '
            'c and h must have the same last (hidden) axis',
        )
    return jnp.shape(h)[-1]


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
      features: hidden size of `initialize_carry`; a step runs at the size of the carry it
        is given (as in Flax).
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
        # Flax sizes the step from the carry; `features` only sizes initialize_carry.
        hidden_features = _lstm_hidden_size(self, c, h)
        dense_h = functools.partial(
            Dense,
            features=hidden_features,
            use_bias=True,
            kernel_init=self.recurrent_kernel_init,
            bias_init=self.bias_init,
            dtype=self.dtype,
            param_dtype=self.param_dtype,
        )
        dense_i = functools.partial(
            Dense,
            features=hidden_features,
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
        hidden_features = _lstm_hidden_size(self, c, h)
        in_features = inputs.shape[-1]
        input_kernels, hidden_kernels, hidden_biases = [], [], []
        for gate in ('i', 'f', 'g', 'o'):
            kernel, _ = _GateKernels(
                in_features,
                hidden_features,
                False,
                self.kernel_init,
                self.bias_init,
                self.param_dtype,
                name=f'i{gate}',
            )()
            input_kernels.append(kernel)
            kernel, bias = _GateKernels(
                hidden_features,
                hidden_features,
                True,
                self.recurrent_kernel_init,
                self.bias_init,
                self.param_dtype,
                name=f'h{gate}',
            )()
            hidden_kernels.append(kernel)
            hidden_biases.append(bias)
        # Flax's operations in Flax's order: each product (its operands promoted on
        # their own) split per gate, then the recurrent part (bias included) plus the
        # input part, gate by gate. One add over all gates before the split is the
        # same sum, but XLA may fuse it otherwise and round differently (JAX 0.10,
        # fuzz finding F23).
        kernel_h = jnp.concatenate(hidden_kernels, axis=-1)
        bias = jnp.concatenate(hidden_biases, axis=-1)
        h_in, kernel_h, bias = promote_dtype(h, kernel_h, bias, dtype=self.dtype)
        recurrent = jnp.split(h_in @ kernel_h + _with_rank(bias, h_in.ndim), 4, axis=-1)
        kernel_i = jnp.concatenate(input_kernels, axis=-1)
        inputs, kernel_i = promote_dtype(inputs, kernel_i, dtype=self.dtype)
        given = jnp.split(inputs @ kernel_i, 4, axis=-1)
        i = self.gate_fn(recurrent[0] + given[0])
        f = self.gate_fn(recurrent[1] + given[1])
        g = self.activation_fn(recurrent[2] + given[2])
        o = self.gate_fn(recurrent[3] + given[3])
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
        hidden_features = jnp.shape(h)[-1]  # as in Flax: the carry sets the hidden size
        dense_h = functools.partial(
            Dense,
            features=hidden_features,
            use_bias=False,
            kernel_init=self.recurrent_kernel_init,
            bias_init=self.bias_init,
            dtype=self.dtype,
            param_dtype=self.param_dtype,
        )
        dense_i = functools.partial(
            Dense,
            features=hidden_features,
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
      features: hidden size of `initialize_carry`; a step runs at the size of the carry it
        is given (as in Flax).
      gate_fn: as for :class:`LSTMCell`; so are `activation_fn`, `kernel_init`, `recurrent_kernel_init`, `dtype`, `param_dtype`, `carry_init`.
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
        hidden_features = jnp.shape(h)[-1]  # as in Flax: the carry sets the hidden size
        dense_h = functools.partial(
            Dense,
            features=hidden_features,
            use_bias=False,
            kernel_init=self.recurrent_kernel_init,
            dtype=self.dtype,
            param_dtype=self.param_dtype,
        )
        dense_i = functools.partial(
            Dense,
            features=hidden_features,
            use_bias=True,
            kernel_init=self.kernel_init,
            dtype=self.dtype,
            param_dtype=self.param_dtype,
        )
        f = self.gate_fn(
            dense_i(name='if', bias_init=self.forget_bias_init)(inputs) + dense_h(name='hf')(h)
        )
        # (Flax's order: the recurrent part, then the input part; the gradient sums
        # in the order of the operands)
        if self.reset_gate:
            recurrent = (
                dense_h(name='hn', use_bias=True, bias_init=self.activation_bias_init)(h) * f
            )
        else:
            recurrent = dense_h(name='hn')(h)
        candidate_in = dense_i(name='in', bias_init=self.activation_bias_init)(inputs)
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
      features: hidden size of `initialize_carry`; a step runs at the size of the carry it
        is given (as in Flax).
      activation_fn: as for :class:`LSTMCell`; so are `kernel_init`, `recurrent_kernel_init`, `bias_init`, `dtype`, `param_dtype`, `carry_init`.
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
        hidden_features = jnp.shape(carry)[-1]  # as in Flax: the carry sets the hidden size
        pre = Dense(
            features=hidden_features,
            use_bias=True,
            kernel_init=self.kernel_init,
            bias_init=self.bias_init,
            dtype=self.dtype,
            param_dtype=self.param_dtype,
            name='i',
        )(inputs) + Dense(
            features=hidden_features,
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
        # The gates have `features` channels whatever h has (Flax too), so only the cell
        # state must match them; Flax would fail later, in a broadcast.
        if jnp.shape(c)[-1:] not in ((self.features,), (1,), ()):  # c broadcasts, as in Flax
            raise RNNCarryShapeError(
                _where(self),
                f'the cell state c has shape {tuple(jnp.shape(c))}, but the cell has '
                f'features={self.features}, so its last axis should be {self.features}',
            )
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
