"""Typed errors raised by the layers on bad input or bad configuration.

Every class derives from :class:`linen.core.errors.LinenError` and from the
builtin exception Flax raises in the same situation (``ValueError`` or
``TypeError``), so ``except ValueError`` clauses written for Flax keep working.
Each message names the layer and its module path, what was expected, what came
in, and how to fix it.
"""

from __future__ import annotations

from linen.core.errors import LinenError

__all__ = [
    'LayerArgumentError',
    'LayerInputDtypeError',
    'LayerInputRankError',
    'LayerInputShapeError',
    'LayerMaskShapeError',
    'LayerPaddingError',
    'RNNCarryShapeError',
    'RNNInputShapeError',
    'describe_layer',
]


def describe_layer(module) -> str:
    """``'Conv at "/encoder/Conv_0"'`` for a bound module, ``'Conv'`` otherwise."""
    name = type(module).__name__
    try:
        path = module.scope.path
    except Exception:  # an unbound module has no scope; the class name must do
        path = None
    if path:
        return f'{name} at "/{"/".join(str(p) for p in path)}"'
    return name


class LayerArgumentError(LinenError, ValueError):
    """A layer was configured with arguments that cannot work together.

    >>> nn.DenseGeneral(3, batch_dims=(1,))(x)  # batch dims must lead # doctest: +SKIP
    """

    def __init__(self, layer: str, problem: str, fix: str):
        self.layer = layer
        super().__init__(f'{layer}: {problem}. {fix}')


class LayerInputRankError(LinenError, ValueError):
    """An input has too few (or too many) dimensions for the layer.

    >>> nn.Conv(4, kernel_size=(3, 3))(jnp.ones((8, 3)))  # needs (..., H, W, C) # doctest: +SKIP
    """

    def __init__(self, layer: str, expected: str, shape, fix: str):
        self.layer, self.shape = layer, tuple(shape)
        super().__init__(
            f'{layer} expected an input of rank {expected}, got shape {self.shape} '
            f'(rank {len(self.shape)}). {fix}'
        )


class LayerInputShapeError(LinenError, ValueError):
    """An input's dimension sizes do not fit the layer's configuration.

    >>> nn.Conv(4, (3,), feature_group_count=2)(jnp.ones((1, 8, 3)))  # 3 % 2 # doctest: +SKIP
    """

    def __init__(self, layer: str, problem: str, fix: str):
        self.layer = layer
        super().__init__(f'{layer}: {problem}. {fix}')


class LayerMaskShapeError(LinenError, ValueError):
    """A weight mask does not have the shape of the weights it masks.

    >>> nn.Conv(4, (3,), mask=jnp.ones((2, 3, 4)))(jnp.ones((1, 8, 3))) # doctest: +SKIP
    """

    def __init__(self, layer: str, mask_shape, weight_shape):
        self.layer = layer
        super().__init__(
            f'{layer}: the mask has shape {tuple(mask_shape)} but the kernel it masks has '
            f'shape {tuple(weight_shape)}; they must be equal. Build the mask with the '
            "kernel's shape (kernel_size + (in_features // feature_group_count, features))."
        )


class LayerPaddingError(LinenError, ValueError):
    """A ``padding`` argument is not one the layer understands.

    >>> nn.Conv(4, (3, 3), padding='CAUSAL')(jnp.ones((1, 8, 8, 3))) # doctest: +SKIP
    """

    def __init__(self, layer: str, padding, problem: str):
        self.layer = layer
        super().__init__(
            f'{layer}: invalid padding {padding!r}: {problem}. Use "SAME", "VALID", '
            '"CIRCULAR", "REFLECT", "CAUSAL" (1-D convolutions only), an int, or one int or '
            '(low, high) pair per spatial dimension.'
        )


class LayerInputDtypeError(LinenError, ValueError):
    """An input has a dtype the layer cannot take (e.g. floats into ``Embed``).

    >>> nn.Embed(10, 4)(jnp.ones((2,)))  # ids must be integers # doctest: +SKIP
    """

    def __init__(self, layer: str, expected: str, dtype, fix: str):
        self.layer = layer
        super().__init__(f'{layer} expected {expected} inputs, got dtype {dtype}. {fix}')


class RNNCarryShapeError(LinenError, ValueError):
    """A cell got a carry whose parts disagree on the hidden size.

    As in Flax, the dense cells take their hidden size from the carry (``features``
    only sizes ``initialize_carry``), so a carry of any size works; what has no
    meaning is an LSTM carry whose ``c`` and ``h`` differ in size, or a
    ``ConvLSTMCell`` cell state whose channels are not ``features``.

    >>> nn.LSTMCell(8).apply(variables, (c4, h5), x)  # doctest: +SKIP
    """

    def __init__(self, where: str, what: str):
        self.where, self.what = where, what
        super().__init__(
            f'{where}: {what}. Build the carry with `cell.initialize_carry(rng, input_shape)`.'
        )

    def __reduce__(self):
        return type(self), (self.where, self.what)


class RNNInputShapeError(LinenError, ValueError):
    """``RNN`` inputs have no time axis, or ``seq_lengths`` does not match the batch.

    >>> nn.RNN(nn.LSTMCell(4)).init(key, jnp.ones((3,)))  # doctest: +SKIP
    """

    def __init__(self, where: str, what: str):
        self.where, self.what = where, what
        super().__init__(
            f'{where}: {what}. Inputs are [batch..., time, features...] (or [time, batch..., '
            'features...] with time_major=True) where the cell has num_feature_axes feature '
            'axes; seq_lengths is an integer array of the batch shape.'
        )

    def __reduce__(self):
        return type(self), (self.where, self.what)
