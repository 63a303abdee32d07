"""Errors of linen-transforms (they derive from ``linen.core.errors.LinenError``)."""

from __future__ import annotations

from linen.core.errors import LinenError

__all__ = [
    'TransformAxisSizeError',
    'ScanLengthError',
    'ScanCollectionError',
    'ScanCarryCreationError',
    'ScanBroadcastAxisError',
    'TransformArgumentError',
    'VmapVariableAxisError',
]


class TransformAxisSizeError(LinenError, ValueError):
    """A mapped transform cannot tell its axis size (needed to split rng streams).

    >>> VmapDense = nn.vmap(
    ...     nn.Dense, in_axes=None, variable_axes={'params': 0}, split_rngs={'params': True}
    ... )
    >>> VmapDense(3).init(jax.random.key(0), jnp.ones((2,)))
    Traceback (most recent call last):
    ...
    TransformAxisSizeError: ...
    """

    def __init__(self, transform: str):
        super().__init__(
            f'{transform} cannot infer the axis size: no argument is mapped, yet rng streams '
            f'must be split per slice. Pass `axis_size=` to nn.{transform}.'
        )


class ScanLengthError(LinenError, ValueError):
    """``scan`` got inputs whose scanned axes differ in length, or no length at all."""

    def __init__(self, detail: str):
        super().__init__(
            f'scan: {detail}. Every scanned input must have the same length along its '
            '`in_axes` axis; pass `length=` when nothing is scanned.'
        )


class ScanCollectionError(LinenError, ValueError):
    """The body of ``nn.scan`` writes a collection that no scan rule covers.

    Raised only with ``linen_strict_scan_collections`` on; otherwise such a
    collection is read-only in the body, as in Flax (``sow`` returns False).

    >>> from linen.core import config
    >>> class Block(nn.Module):
    ...     @nn.compact
    ...     def __call__(self, carry, x):
    ...         self.sow('intermediates', 'x', x)
    ...         return carry + x, None
    >>> Loop = nn.scan(Block, variable_broadcast='params', split_rngs={'params': False})
    >>> Loop().apply({}, 0.0, jnp.ones(3), mutable=['intermediates'])
    ((Array(3., dtype=float32), None), {})
    >>> config.update('linen_strict_scan_collections', True)
    >>> Loop().apply({}, 0.0, jnp.ones(3), mutable=['intermediates'])
    Traceback (most recent call last):
    ...
    ScanCollectionError: ...
    >>> config.update('linen_strict_scan_collections', False)
    """

    def __init__(self, collections, path: str):
        names = ', '.join(f'"{c}"' for c in collections)
        first = collections[0]
        super().__init__(
            f'nn.scan at "/{path}": the loop body writes collection(s) {names}, which '
            'none of variable_broadcast, variable_carry or variable_axes names, so the '
            f'writes would be lost. Add e.g. `variable_axes={{"{first}": 0}}` (one slice per '
            f'step) or `variable_carry="{first}"` (threaded through the steps).'
        )


class ScanCarryCreationError(LinenError, TypeError, AssertionError):
    """The body of ``nn.scan`` creates variables in a ``variable_carry`` collection.

    A carried collection goes round the loop, so it must exist before the loop starts.
    Flax stops there on JAX's ``TypeError`` (the carry changes structure) or, for some
    programs, on an ``AssertionError``: this error is both, so handlers written for
    Flax catch it.
    """

    def __init__(self, collections, path: str):
        names = ', '.join(f'"{c}"' for c in collections)
        super().__init__(
            f'nn.scan at "/{path}": the loop body creates variables in the variable_carry '
            f'collection(s) {names}; a carried collection must exist before the loop. '
            'Create them outside the scan (pass them to init/apply in the variables, or '
            'initialise them with a call that does not scan), or make the collection '
            'per step with `variable_axes` instead.'
        )


class ScanBroadcastAxisError(LinenError, AssertionError):
    """``nn.scan(..., variable_axes={'params': nn.broadcast})``: a collection is shared
    across the steps with ``variable_broadcast``, not with a ``variable_axes`` entry
    (Flax stops there on an ``AssertionError``, hence the base class)."""

    def __init__(self, collections):
        names = ', '.join(repr(c) for c in collections)
        first = collections[0]
        super().__init__(
            f'nn.scan: variable_axes maps {names} to nn.broadcast, which scan does not '
            f'support; share the collection across the steps with '
            f'`variable_broadcast={first!r}` (and `split_rngs={{{first!r}: False}}`) instead.'
        )


class TransformArgumentError(LinenError, ValueError):
    """A lifted transform got an argument specification it cannot use."""

    def __init__(self, msg: str):
        super().__init__(msg)


class VmapVariableAxisError(LinenError, IndexError, ValueError):
    """``nn.vmap`` maps a collection along an axis one of its variables does not have.

    The usual cause: the variable was made outside the vmapped call, say in the
    ``setup`` of a module that ``nn.jit`` also runs outside its compiled function, so
    it has no mapped axis. Flax fails there with an ``IndexError``, JAX's ``vmap``
    with a ``ValueError``: this error is both, and names the variable.
    """

    def __init__(self, collection: str, name: str, shape: tuple, axis: int, path: str):
        super().__init__(
            f'nn.vmap maps collection {collection!r} along axis {axis}, but variable '
            f'{collection}/{name} in scope "/{path}" has shape {tuple(shape)}, with no such '
            'axis: it was made outside the vmapped call (a `setup` that nn.jit runs outside '
            'its compiled function does), or with too few axes. Make it inside the vmapped '
            f'call (in a compact method), or map {collection!r} with `variable_axes` None.'
        )


for _cls in (
    TransformAxisSizeError,
    ScanLengthError,
    ScanCollectionError,
    ScanCarryCreationError,
    ScanBroadcastAxisError,
    TransformArgumentError,
    VmapVariableAxisError,
):
    _cls.__module__ = __name__
