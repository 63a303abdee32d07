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

    >>> layer = nn.DenseGeneral(3, axis=0, batch_dims=(1,))  # batch dims must lead
    >>> layer.init(jax.random.key(0), jnp.ones((2, 3, 4)))
    Traceback (most recent call last):
    ...
    LayerArgumentError: ...
    """

    def __init__(self, layer: str, problem: str, fix: str):
        self.layer = layer
        super().__init__(f'{layer}: {problem}. {fix}')


class LayerInputRankError(LinenError, ValueError):
    """An input has too few (or too many) dimensions for the layer.

    >>> nn.Conv(4, kernel_size=(3, 3)).init(jax.random.key(0), jnp.ones((8, 3)))  # needs H, W, C
    Traceback (most recent call last):
    ...
    LayerInputRankError: ...
    """

    def __init__(self, layer: str, expected: str, shape, fix: str):
        self.layer, self.shape = layer, tuple(shape)
        super().__init__(
            f'{layer} expected an input of rank {expected}, got shape {self.shape} '
            f'(rank {len(self.shape)}). {fix}'
        )


class LayerInputShapeError(LinenError, ValueError):
    """An input's dimension sizes do not fit the layer's configuration.

    >>> layer = nn.Conv(4, (3,), feature_group_count=2)  # 3 input features, 2 groups
    >>> layer.init(jax.random.key(0), jnp.ones((1, 8, 3)))
    Traceback (most recent call last):
    ...
    LayerInputShapeError: ...
    """

    def __init__(self, layer: str, problem: str, fix: str):
        self.layer = layer
        super().__init__(f'{layer}: {problem}. {fix}')


class LayerMaskShapeError(LinenError, ValueError):
    """A weight mask does not have the shape of the weights it masks.

    >>> layer = nn.Conv(4, (3,), mask=jnp.ones((2, 3, 4)))  # the kernel is (3, 3, 4)
    >>> layer.init(jax.random.key(0), jnp.ones((1, 8, 3)))
    Traceback (most recent call last):
    ...
    LayerMaskShapeError: ...
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

    >>> layer = nn.Conv(4, (3, 3), padding='CAUSAL')  # CAUSAL is for one spatial axis
    >>> layer.init(jax.random.key(0), jnp.ones((1, 8, 8, 3)))
    Traceback (most recent call last):
    ...
    LayerPaddingError: ...
    """

    def __init__(self, layer: str, padding, problem: str):
        self.layer = layer
        super().__init__(
            f'{layer}: invalid padding {padding!r}: {problem}. Use "SAME", "VALID", '
            '"CIRCULAR", "CAUSAL" (1-D convolutions only), an int, or one int or '
            '(low, high) pair per spatial dimension.'
        )


class LayerInputDtypeError(LinenError, ValueError):
    """An input has a dtype the layer cannot take (e.g. floats into ``Embed``).

    >>> nn.Embed(10, 4).init(jax.random.key(0), jnp.ones((2,)))  # ids must be integers
    Traceback (most recent call last):
    ...
    LayerInputDtypeError: ...
    """

    def __init__(self, layer: str, expected: str, dtype, fix: str):
        self.layer = layer
        super().__init__(f'{layer} expected {expected} inputs, got dtype {dtype}. {fix}')
