"""Typed errors raised by the layers on bad input or bad configuration.

Every class derives from :class:`linen.core.errors.LinenError` and from the
builtin exception Flax raises in the same situation (``ValueError`` or
``TypeError``), so ``except ValueError`` clauses written for Flax keep working.
Each message names the layer and its module path, what was expected, what came
in, and how to fix it.
"""

from __future__ import annotations

import jax

from linen.core.errors import LinenError

__all__ = [
    'AttentionInputShapeError',
    'AttentionInputsConflictError',
    'AttentionMaskShapeError',
    'AutoregressiveCacheShapeError',
    'AxisMetadataArgumentError',
    'CombineMasksRankError',
    'ConvTransposeArgumentError',
    'ConvTransposeInputRankError',
    'DropoutBroadcastDimsError',
    'EinsumKernelLabelsError',
    'Fp8ArgumentError',
    'GroupNormScalarInputError',
    'GroupSizeZeroError',
    'InvalidFeatureAxesError',
    'InvalidGroupsError',
    'InvalidMaskShapeError',
    'LayerArgumentError',
    'LayerAxisRangeError',
    'LayerFeatureGroupError',
    'LayerInputDtypeError',
    'LayerInputRankError',
    'LayerInputShapeError',
    'LayerMaskShapeError',
    'LayerPaddingError',
    'LayerPaddingStringError',
    'LocalConvFeatureGroupError',
    'MissingUseRunningAverageError',
    'PoolArgumentError',
    'PoolInputRankError',
    'PoolPaddingError',
    'QkvFeaturesNotDivisibleError',
    'RNNCarryShapeError',
    'RNNInputShapeError',
    'SpectralNormNonMatrixError',
    'describe_layer',
]


def _lead(flax_text: str | None, message: str) -> str:
    # Flax's sentence for the same case comes first, so that `match=` patterns and
    # log searches written against Flax keep working; ours (where, how to fix) follows.
    if not flax_text:
        return message
    return f'{flax_text} {message}' if flax_text.endswith('.') else f'{flax_text}. {message}'


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

    def __init__(self, layer: str, problem: str, fix: str, *, flax_text: str | None = None):
        self.layer = layer
        super().__init__(_lead(flax_text, f'{layer}: {problem}. {fix}'))


class AxisMetadataArgumentError(LayerArgumentError, AssertionError, IndexError):
    """Also an ``AssertionError`` and an ``IndexError``: Flax asserts that ``param_with_axes``
    runs in a module, and indexes axis names shorter than a transform's axis position.

    >>> nn.partitioning.param_with_axes('w', nn.initializers.zeros, (2,), axes=('embed',))
    Traceback (most recent call last):
    ...
    AxisMetadataArgumentError: ...
    """


class Fp8ArgumentError(LayerArgumentError, AssertionError):
    """Also an ``AssertionError``: Flax's fp8 ops assert their arguments (three positional
    operands of ``dot_general``; an fp8 dtype for ``get_fp8_max``).

    >>> nn.fp8_ops.get_fp8_max(jnp.float16, jnp.float32)
    Traceback (most recent call last):
    ...
    Fp8ArgumentError: ...
    """


class PoolArgumentError(LayerArgumentError, AssertionError):
    """Also an ``AssertionError``: Flax's ``pool`` asserts one stride per window dimension.

    >>> nn.max_pool(jnp.ones((1, 8, 8, 3)), (2, 2), strides=(2,))
    Traceback (most recent call last):
    ...
    PoolArgumentError: ...
    """


class EinsumKernelLabelsError(LayerArgumentError, AssertionError):
    """Also an ``AssertionError``, as Flax's ``Einsum`` asserts one label per kernel dimension.

    >>> nn.Einsum((3, 4), 'ab,bcd->acd').init(jax.random.key(0), jnp.ones((2, 3)))
    Traceback (most recent call last):
    ...
    EinsumKernelLabelsError: ...
    """


class ConvTransposeArgumentError(LayerArgumentError, TypeError):
    """Also a ``TypeError``, what Flax meets in ``lax.conv_transpose`` for too few strides.

    ``ConvTranspose``'s ``strides`` or ``kernel_dilation`` do not give one entry per
    spatial dimension.

    >>> layer = nn.ConvTranspose(4, (3, 3), strides=(2,))
    >>> layer.init(jax.random.key(0), jnp.ones((1, 8, 8, 3)))
    Traceback (most recent call last):
    ...
    ConvTransposeArgumentError: ...
    """


class LayerInputRankError(LinenError, ValueError):
    """An input has too few (or too many) dimensions for the layer.

    >>> nn.Conv(4, kernel_size=(3, 3)).init(jax.random.key(0), jnp.ones((8, 3)))  # needs H, W, C
    Traceback (most recent call last):
    ...
    LayerInputRankError: ...
    """

    def __init__(self, layer: str, expected: str, shape, fix: str, *, flax_text: str | None = None):
        self.layer, self.shape = layer, tuple(shape)
        super().__init__(
            _lead(
                flax_text,
                f'{layer} expected an input of rank {expected}, got shape {self.shape} '
                f'(rank {len(self.shape)}). {fix}',
            )
        )


class DropoutBroadcastDimsError(LayerInputRankError, IndexError):
    """Also an ``IndexError``: Flax indexes the input's shape with each broadcast dim.

    >>> layer = nn.Dropout(0.5, broadcast_dims=(2,), deterministic=False)
    >>> layer.apply({}, jnp.ones((2, 3)), rngs={'dropout': jax.random.key(0)})
    Traceback (most recent call last):
    ...
    DropoutBroadcastDimsError: ...
    """


class PoolInputRankError(LayerInputRankError, AssertionError):
    """Also an ``AssertionError``: Flax's ``pool`` asserts the input's rank.

    >>> nn.max_pool(jnp.ones((8, 8)), (2, 2))  # needs (..., H, W, C)
    Traceback (most recent call last):
    ...
    PoolInputRankError: ...
    """


class LayerAxisRangeError(LayerInputRankError, IndexError, TypeError):
    """Also an ``IndexError`` and a ``TypeError``: Flax indexes the input's shape with an axis
    out of range (``IndexError``), or hands a negative one to ``dot_general`` (``TypeError``).

    >>> nn.DenseGeneral(3, axis=2).init(jax.random.key(0), jnp.ones((2, 3)))
    Traceback (most recent call last):
    ...
    LayerAxisRangeError: ...
    """


class ConvTransposeInputRankError(LayerInputRankError, AssertionError):
    """Also an ``AssertionError``: Flax meets ``lax.conv_transpose``'s assert on the ranks.

    >>> nn.ConvTranspose(4, (3, 3)).init(jax.random.key(0), jnp.ones((8, 3)))  # needs H, W, C
    Traceback (most recent call last):
    ...
    ConvTransposeInputRankError: ...
    """


class LayerInputShapeError(LinenError, ValueError, TypeError):
    """An input's dimension sizes do not fit the layer's configuration.

    Also a ``TypeError``: what Flax's layers meet there is JAX's shape error (a
    ``dot_general`` of mismatched sizes).

    >>> embed = nn.Embed(5, 4)  # attend() scores 4-feature queries
    >>> variables = embed.init(jax.random.key(0), jnp.ones((2,), jnp.int32))
    >>> embed.apply(variables, jnp.ones((2, 3)), method='attend')
    Traceback (most recent call last):
    ...
    LayerInputShapeError: ...
    """

    def __init__(self, layer: str, problem: str, fix: str):
        self.layer = layer
        super().__init__(f'{layer}: {problem}. {fix}')


class LayerFeatureGroupError(LayerInputShapeError, AssertionError):
    """Also an ``AssertionError``: Flax checks this with ``assert``.

    The input features are not a multiple of ``feature_group_count``.

    >>> layer = nn.Conv(4, (3,), feature_group_count=2)  # 3 input features, 2 groups
    >>> layer.init(jax.random.key(0), jnp.ones((1, 8, 3)))
    Traceback (most recent call last):
    ...
    LayerFeatureGroupError: ...
    """


class LocalConvFeatureGroupError(LayerArgumentError, NotImplementedError):
    """Also a ``NotImplementedError``, as Flax's: ``ConvLocal`` with ``feature_group_count != 1``.

    >>> layer = nn.ConvLocal(4, (3,), feature_group_count=2)
    >>> layer.init(jax.random.key(0), jnp.ones((1, 8, 4)))
    Traceback (most recent call last):
    ...
    LocalConvFeatureGroupError: ...
    """

    def __init__(self, layer: str, groups: int):
        super().__init__(
            layer,
            f'feature_group_count={groups} is not supported by a local convolution',
            'Use feature_group_count=1, or Conv.',
            flax_text=(
                '`lax.conv_general_dilated_local` does not support `feature_group_count != 1`, '
                f'got `{groups}`.'
            ),
        )


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
            # Flax's sentence first.
            'Mask needs to have the same shape as weights. Shapes are: '
            f'{tuple(mask_shape)}, {tuple(weight_shape)}. '
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

    def __init__(self, layer: str, padding, problem: str, *, flax_text: str | None = None):
        self.layer = layer
        super().__init__(
            _lead(
                flax_text,
                f'{layer}: invalid padding {padding!r}: {problem}. Use "SAME", "VALID", '
                '"CIRCULAR", "REFLECT", "CAUSAL" (1-D convolutions only), an int, or one int '
                'or (low, high) pair per spatial dimension.',
            )
        )


class PoolPaddingError(LayerPaddingError, AssertionError, TypeError):
    """Also an ``AssertionError`` and a ``TypeError``: Flax's ``pool`` asserts one
    ``(low, high)`` pair per window dimension, and meets a ``TypeError`` making a pair of an int.

    >>> nn.max_pool(jnp.ones((1, 8, 8, 3)), (2, 2), padding=((1, 1),))
    Traceback (most recent call last):
    ...
    PoolPaddingError: ...
    """


class LayerPaddingStringError(LayerPaddingError, RuntimeError):
    """Also a ``RuntimeError``: Flax passes a padding string it does not handle itself
    on to ``lax``, which raises ``RuntimeError`` for it.

    A padding string no layer knows (``'WRAP'``, or ``'circular'``: only lax's own
    ``'SAME'``, ``'SAME_LOWER'`` and ``'VALID'`` may be written in any case), or one a
    transposed convolution has no form of (``'CAUSAL'``, ``'REFLECT'``).

    >>> nn.Conv(4, (3,), padding='WRAP').init(jax.random.key(0), jnp.ones((1, 8, 3)))
    Traceback (most recent call last):
    ...
    LayerPaddingStringError: ...
    """

    def __init__(self, layer: str, padding, problem: str):
        super().__init__(
            layer,
            padding,
            problem,
            flax_text=(
                "Unrecognized padding type: expected 'VALID', 'SAME', or 'SAME_LOWER', "
                f'got {padding}.'
            ),
        )


class LayerInputDtypeError(LinenError, ValueError):
    """An input has a dtype the layer cannot take (e.g. floats into ``Embed``).

    >>> nn.Embed(10, 4).init(jax.random.key(0), jnp.ones((2,)))  # ids must be integers
    Traceback (most recent call last):
    ...
    LayerInputDtypeError: ...
    """

    def __init__(self, layer: str, expected: str, dtype, fix: str, *, flax_text: str | None = None):
        self.layer = layer
        super().__init__(
            _lead(flax_text, f'{layer} expected {expected} inputs, got dtype {dtype}. {fix}')
        )


# --------------------------------------------------------- normalization


class InvalidFeatureAxesError(LinenError, ValueError, IndexError):
    """A normalization layer's axes do not fit its input.

    Also an ``IndexError``: for an axis out of range Flax indexes the input's shape
    with it (a ``ValueError`` where Flax checks the axes first).

    >>> nn.LayerNorm(feature_axes=3).init(jax.random.key(0), jnp.ones((2, 4)))
    Traceback (most recent call last):
    ...
    InvalidFeatureAxesError: ...
    """

    def __init__(
        self, layer: str, what: str, axes, shape, fix: str, *, flax_text: str | None = None
    ):
        super().__init__(
            _lead(
                flax_text,
                f'{layer}: {what} {axes!r} do not fit an input of shape {tuple(shape)} '
                f'(rank {len(shape)}). {fix}',
            )
        )


class GroupNormScalarInputError(InvalidFeatureAxesError, ZeroDivisionError):
    """Also a ``ZeroDivisionError``: Flax takes the feature axis modulo a scalar's rank 0.

    >>> nn.GroupNorm(num_groups=1).init(jax.random.key(0), jnp.ones(()))
    Traceback (most recent call last):
    ...
    GroupNormScalarInputError: ...
    """


class InvalidGroupsError(LinenError, ValueError):
    """GroupNorm's ``num_groups``/``group_size`` do not split the feature axis.

    >>> nn.GroupNorm(num_groups=4).init(jax.random.key(0), jnp.ones((2, 6)))
    Traceback (most recent call last):
    ...
    InvalidGroupsError: ...
    """

    def __init__(self, layer: str, problem: str, fix: str, *, flax_text: str | None = None):
        super().__init__(_lead(flax_text, f'{layer}: {problem} {fix}'))


class GroupSizeZeroError(InvalidGroupsError, ZeroDivisionError):
    """Also a ``ZeroDivisionError``: Flax takes the channels modulo ``group_size=0``.

    >>> nn.GroupNorm(num_groups=None, group_size=0).init(jax.random.key(0), jnp.ones((2, 6)))
    Traceback (most recent call last):
    ...
    GroupSizeZeroError: ...
    """


class MissingUseRunningAverageError(LinenError, ValueError):
    """BatchNorm was given ``use_running_average`` neither at construction nor at call.

    >>> nn.BatchNorm().init(jax.random.key(0), jnp.ones((2, 3)))
    Traceback (most recent call last):
    ...
    MissingUseRunningAverageError: ...
    """

    def __init__(self, layer: str):
        super().__init__(
            'Parameter "use_running_average" must be passed to the constructor or at call '
            f'time. {layer}: `use_running_average` is unset, so it is unknown whether to '
            'normalize with the batch statistics (training) or the running averages in '
            '"batch_stats" (evaluation). Pass it once, either to the constructor '
            '(`BatchNorm(use_running_average=not train)`) or at call time '
            '(`bn(x, use_running_average=not train)`).'
        )


class InvalidMaskShapeError(LinenError, ValueError):
    """A normalization ``mask`` does not broadcast to the input.

    >>> v = nn.LayerNorm().init(jax.random.key(0), jnp.ones((2, 4)))
    >>> nn.LayerNorm().apply(v, jnp.ones((2, 4)), mask=jnp.ones((2, 3), bool))
    Traceback (most recent call last):
    ...
    InvalidMaskShapeError: ...
    """

    def __init__(self, layer: str, mask_shape, x_shape):
        super().__init__(
            f'{layer}: the mask of shape {tuple(mask_shape)} does not broadcast to the input '
            f'of shape {tuple(x_shape)}. Pass a boolean mask whose shape broadcasts to the '
            'input (True marks the entries that count toward the statistics).'
        )


class SpectralNormNonMatrixError(LinenError, ValueError):
    """SpectralNorm met a parameter of rank > 2 with ``error_on_non_matrix=True``.

    >>> layer = nn.SpectralNorm(nn.Conv(3, (3, 3)), error_on_non_matrix=True)
    >>> layer.init(jax.random.key(0), jnp.ones((1, 4, 4, 2)), update_stats=True)  # (3, 3, 2, 3)
    Traceback (most recent call last):
    ...
    SpectralNormNonMatrixError: ...
    """

    def __init__(self, layer: str, name: str, shape):
        super().__init__(
            f'Input is {len(shape)}D but error_on_non_matrix is True. '
            f'{layer}: parameter "{name}" has shape {tuple(shape)} (rank {len(shape)}), '
            'but error_on_non_matrix=True allows only rank <= 2. Pass '
            'error_on_non_matrix=False to normalize it reshaped to '
            '(-1, last dimension), as for convolution kernels.'
        )


# ------------------------------------------------------------- attention


class AttentionInputShapeError(LinenError, ValueError, AssertionError, IndexError):
    """Query, key and value do not agree in rank, batch shape, heads or depth.

    Also an ``AssertionError``, as Flax asserts each of these (and an ``IndexError``,
    what a query of rank below 3 meets there).

    >>> q = jnp.ones((2, 3, 2, 4))  # (batch, length, heads, depth)
    >>> nn.dot_product_attention(q, jnp.ones((2, 3, 4)), q)  # the key lacks the heads axis
    Traceback (most recent call last):
    ...
    AttentionInputShapeError: ...
    """

    def __init__(self, where: str, what: str):
        super().__init__(
            f'{where}: {what}. Query must be [batch..., q_length, num_heads, depth] and '
            'key/value [batch..., kv_length, num_heads, depth] with the same batch shape, '
            'number of heads and (for query and key) depth. Reshape the inputs, or project '
            'them with MultiHeadDotProductAttention, which splits the heads for you.'
        )


def _flax_broadcast_text(what: str, shape: tuple, weights) -> str | None:
    # JAX's error, as Flax lets it surface: from `jnp.where(mask, weights, big_neg)`
    # for a mask, from `weights + bias` for a bias, whose text depends on whether the
    # ranks differ and on the rank promotion setting. (A bias of the weights' rank that
    # does not broadcast is a TypeError in Flax; ours stays a ValueError, so no text.)
    if not isinstance(weights, tuple):
        return None
    if what == 'mask':
        return f'Incompatible shapes for broadcasting: shapes={[shape, weights, ()]}'
    if len(shape) == len(weights):
        return None
    if jax.config.jax_numpy_rank_promotion == 'raise':
        return (
            f'Operands could not be broadcast together for add on shapes {weights} {shape} '
            "and with the config option jax_numpy_rank_promotion='raise'."
        )
    return f'Incompatible shapes for broadcasting: shapes={[weights, shape]}'


class AttentionMaskShapeError(LinenError, ValueError):
    """A mask or bias does not broadcast to the attention weights' shape.

    >>> mha = nn.MultiHeadDotProductAttention(num_heads=2)
    >>> x = jnp.ones((2, 5, 4))
    >>> variables = mha.init(jax.random.key(0), x)
    >>> mha.apply(variables, x, mask=jnp.ones((2, 7)))
    Traceback (most recent call last):
    ...
    AttentionMaskShapeError: ...
    """

    def __init__(self, where: str, what: str, shape, expected):
        shape = tuple(shape)
        flax_text = _flax_broadcast_text(what, shape, expected)
        super().__init__(
            _lead(
                flax_text,
                f'{where}: the attention {what} has shape {shape}, which does not '
                f"broadcast to {expected}. Masks and biases broadcast to the attention weights' "
                'shape [batch..., num_heads, q_length, kv_length]; build masks with '
                '`make_attention_mask(query_input, key_input)` or `make_causal_mask(x)`, which '
                'give [batch..., 1, q_length, kv_length].',
            )
        )


class CombineMasksRankError(AttentionMaskShapeError, AssertionError):
    """Also an ``AssertionError``: Flax asserts that the masks to combine share one rank.

    >>> nn.combine_masks(jnp.ones((2, 3)), jnp.ones((3,)))
    Traceback (most recent call last):
    ...
    CombineMasksRankError: ...
    """


class QkvFeaturesNotDivisibleError(LinenError, ValueError, AssertionError):
    """Also an ``AssertionError``: Flax checks this with ``assert``.

    ``qkv_features`` is not a multiple of ``num_heads``.

    >>> x = jnp.ones((1, 5, 4))
    >>> nn.MultiHeadDotProductAttention(num_heads=3, qkv_features=8).init(jax.random.key(0), x)
    Traceback (most recent call last):
    ...
    QkvFeaturesNotDivisibleError: ...
    """

    def __init__(self, where: str, qkv_features: int, num_heads: int):
        super().__init__(
            f'Memory dimension ({qkv_features}) must be divisible by number of heads '
            f'({num_heads}). '
            f'{where}: qkv_features ({qkv_features}) must be divisible by num_heads '
            f'({num_heads}), since each head gets qkv_features // num_heads features. '
            'Pick qkv_features as a multiple of num_heads (qkv_features defaults to the '
            'last dimension of inputs_q).'
        )


class AutoregressiveCacheShapeError(LinenError, ValueError):
    """In ``decode`` mode, the query does not fit the cache made at init.

    >>> mha = nn.MultiHeadDotProductAttention(num_heads=2, decode=True)
    >>> x = jnp.ones((1, 5, 4))
    >>> variables = mha.init(jax.random.key(0), x)
    >>> mha.apply(variables, x, mutable=['cache'])  # decode takes one step at a time
    Traceback (most recent call last):
    ...
    AutoregressiveCacheShapeError: ...
    """

    def __init__(self, where: str, expected, got):
        super().__init__(
            f'Autoregressive cache shape error, expected query shape {tuple(expected)} '
            f'instead got {tuple(got)}. {where}: in decode mode, init with the '
            'full-length input to size the cache, then apply one step at a time '
            '(inputs of length 1) with mutable=["cache"].'
        )


class AttentionInputsConflictError(LinenError, ValueError):
    """The key/value inputs were given inconsistently.

    >>> mha = nn.MultiHeadDotProductAttention(num_heads=2)
    >>> x = jnp.ones((1, 5, 4))
    >>> variables = mha.init(jax.random.key(0), x)
    >>> mha.apply(variables, x, x, inputs_kv=x)
    Traceback (most recent call last):
    ...
    AttentionInputsConflictError: ...
    """

    def __init__(self, where: str, what: str, *, flax_text: str | None = None):
        super().__init__(
            _lead(
                flax_text,
                f'{where}: {what}. Pass `inputs_k` (and optionally `inputs_v`, which '
                'defaults to `inputs_k`); `inputs_kv` is deprecated.',
            )
        )


# ------------------------------------------------------------- recurrent


class RNNCarryShapeError(LinenError, ValueError, TypeError):
    """A cell got a carry whose parts disagree on the hidden size.

    Also a ``TypeError``, JAX's broadcasting error that Flax's ``ConvLSTMCell`` meets
    there (for ``LSTMCell`` Flax's error is a parameter shape error instead).

    As in Flax, the dense cells take their hidden size from the carry (``features``
    only sizes ``initialize_carry``), so a carry of any size works; what has no
    meaning is an LSTM carry whose ``c`` and ``h`` differ in size, or a
    ``ConvLSTMCell`` cell state whose channels are not ``features``.

    >>> x = jnp.ones((1, 3))
    >>> cell = nn.LSTMCell(8)
    >>> variables = cell.init(jax.random.key(0), cell.initialize_carry(jax.random.key(0), x.shape), x)
    >>> cell.apply(variables, (jnp.zeros((1, 4)), jnp.zeros((1, 5))), x)  # c and h differ
    Traceback (most recent call last):
    ...
    RNNCarryShapeError: ...
    """

    def __init__(self, where: str, what: str):
        self.where, self.what = where, what
        super().__init__(
            f'{where}: {what}. Build the carry with `cell.initialize_carry(rng, input_shape)`.'
        )

    def __reduce__(self):
        return type(self), (self.where, self.what)


class RNNInputShapeError(LinenError, ValueError, IndexError):
    """``RNN`` inputs have no time axis before the cell's feature axes.

    Also an ``IndexError``, what Flax meets for inputs with no time axis.

    >>> nn.RNN(nn.LSTMCell(4)).init(jax.random.key(0), jnp.ones((3,)))  # no time axis
    Traceback (most recent call last):
    ...
    RNNInputShapeError: ...
    """

    def __init__(self, where: str, what: str):
        super().__init__(
            f'{where}: {what}. Inputs are [batch..., time, features...] (or [time, batch..., '
            'features...] with time_major=True) where the cell has num_feature_axes feature '
            'axes; seq_lengths is an integer array of the batch shape.'
        )
