"""Errors of linen-transforms (they derive from ``linen.core.errors.LinenError``)."""

from __future__ import annotations

from linen.core.errors import LinenError

__all__ = [
    'TransformAxisSizeError',
    'ScanLengthError',
    'ScanCollectionError',
    'ScanCarryCreationError',
    'ScanBroadcastAxisError',
    'ScanBroadcastOutputError',
    'ScanBroadcastVariableError',
    'TransformArgumentError',
    'RematConcreteArgumentError',
    'RematStaticArgnumsError',
    'ModuleArgumentUnsupportedError',
    'ReduceAxesArgumentError',
    'InAxesListError',
    'VmapVariableAxisError',
]


class TransformAxisSizeError(LinenError, ValueError):
    """A mapped transform cannot tell its axis size, or its inputs disagree on it.

    With no ``axis_size``, ``vmap`` reads the size from the first leaf of each
    mapped argument and mapped variable collection: none (nothing mapped) or
    several different sizes stop it, with Flax's text, before JAX's ``vmap`` runs.

    >>> VmapDense = nn.vmap(
    ...     nn.Dense, in_axes=None, variable_axes={'params': 0}, split_rngs={'params': True}
    ... )
    >>> VmapDense(3).init(jax.random.key(0), jnp.ones((2,)))
    Traceback (most recent call last):
    ...
    TransformAxisSizeError: axis_size should be specified manually. ...
    """

    def __init__(self, transform: str, sizes: set | None = None):
        if sizes:
            first = f'Inconsistent batch axis sizes: {sizes}'
            hint = (
                f'{transform}: the mapped arguments and the mapped variable collections '
                'must have one size along their mapped axes.'
            )
        else:
            first = 'axis_size should be specified manually.'
            hint = (
                f'{transform} cannot infer the axis size: no argument or variable '
                f'collection is mapped. Pass `axis_size=` to nn.{transform}.'
            )
        super().__init__(f'{first} ({hint})' if sizes else f'{first} {hint}')


class ScanLengthError(LinenError, ValueError):
    """``scan`` got inputs whose scanned axes differ in length, or no length at all.

    The message starts with Flax's (JAX's ``lax.scan`` text for lengths that
    disagree, the scanned variable collections and split rng keys counted as
    Flax counts them), then says how to fix it.
    """

    def __init__(self, message: str):
        super().__init__(
            f'{message} nn.scan: every scanned input must have the same length along its '
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


class ScanBroadcastOutputError(LinenError, ValueError):
    """An ``nn.scan`` output marked ``nn.broadcast`` in ``out_axes`` depends on the
    carry or the scanned inputs.

    Such an output is computed once, before the loop, so it may depend only on the
    broadcast arguments and variables. Flax raises a ``ValueError`` with the same
    first sentence.
    """

    def __init__(self):
        super().__init__(
            'broadcasted variable has a data dependency on the scan body. (nn.scan: an '
            'output whose out_axes is nn.broadcast is computed once, before the loop, so '
            'it may depend only on broadcast arguments and variables, not on the carry '
            'or the scanned inputs; give it an integer out_axes to stack it per step.)'
        )


class ScanBroadcastVariableError(LinenError, ValueError):
    """What an ``nn.scan`` body writes to a ``variable_broadcast`` collection depends
    on the carry, the scanned inputs or variables, or the rng streams split per step.

    Broadcast variables are computed once, before the loop, and shared by every
    step. Flax raises a ``ValueError`` with the same first sentence.
    """

    def __init__(self, collections: list[str]):
        named = ', '.join(repr(c) for c in collections)
        super().__init__(
            'broadcasted variable has a data dependency on the scan body. (nn.scan: the '
            f'value written to the broadcast collection {named} depends on the carry, the '
            'scanned inputs or variables, or an rng stream split per step; broadcast '
            'variables are computed once, before the loop. Write it from broadcast '
            'arguments and variables only, or scan the collection with `variable_axes` '
            'or carry it with `variable_carry`.)'
        )


class TransformArgumentError(LinenError, ValueError):
    """A lifted transform got an argument specification it cannot use."""

    def __init__(self, msg: str):
        super().__init__(msg)


class RematConcreteArgumentError(TransformArgumentError, NotImplementedError):
    """``nn.remat(..., concrete=True)``: JAX removed concrete checkpointing.

    Flax raises ``NotImplementedError`` with the same first sentences; this error is
    one (and a ``TransformArgumentError``, as linen raised before).

    >>> nn.remat(nn.Dense, concrete=True)
    Traceback (most recent call last):
    ...
    RematConcreteArgumentError: The concrete argument is deprecated. Use static_argnums instead. ...
    """

    def __init__(self):
        super().__init__(
            'The concrete argument is deprecated. Use static_argnums instead. '
            '(linen: remat(concrete=True) is not supported, JAX removed concrete '
            'checkpointing; mark the Python-control-flow arguments static with '
            '`static_argnums=`.)'
        )


class ModuleArgumentUnsupportedError(TransformArgumentError, NotImplementedError):
    """``nn.jvp``/``nn.vjp`` got a Module among the primals, or ``nn.jvp``/``nn.vjp``/
    ``nn.custom_vjp`` lifts a module holding a Module or a Variable in a field: those
    transforms lift the module's own scope only, as in Flax, which raises
    ``NotImplementedError`` with the same first sentence."""

    def __init__(
        self, transform: str, module_name: str, field: str | None = None, held: str = 'Module'
    ):
        if field is None:
            detail = (
                f'nn.{transform} got the module {module_name} among its primals: call it '
                'inside the function through the module the transform lifts, e.g. '
                '`lambda mdl, x: mdl.child(x)`.'
            )
        else:
            detail = (
                f'nn.{transform} lifts the module {module_name}, whose field {field!r} '
                + (
                    "holds a Module; that Module's variables would not be lifted with it: "
                    'make the submodule'
                    if held == 'Module'
                    else 'holds a Variable of another module, which would not be lifted '
                    'with it: make the variable'
                )
                + f' inside {module_name} (in setup or a compact method) instead of passing '
                'it as a field.'
            )
        super().__init__(
            'This transform does not yet support Modules that include other Modules '
            f'passed as arguments. ({detail})'
        )


class InAxesListError(TransformArgumentError):
    """``nn.vmap`` or ``nn.scan`` got a list as ``in_axes``: as in Flax, whose
    transforms raise a pytree structure error (a ``ValueError``) there, ``in_axes`` is
    an axis (or ``nn.broadcast``) for every argument or a tuple with one entry per
    positional argument; ``jax.vmap`` alone reads a list as a tuple. A list inside the
    tuple, the axes of an argument that is itself a list, is fine.
    """

    def __init__(self, transform: str, in_axes: list):
        super().__init__(
            f'nn.{transform}: in_axes is the list {in_axes!r}; it must be an axis or a tuple '
            f'with one entry per positional argument: pass in_axes={tuple(in_axes)!r}.'
        )


class ReduceAxesArgumentError(TransformArgumentError, NotImplementedError):
    """``reduce_axes=`` given to ``nn.grad``, ``nn.value_and_grad`` or ``nn.vjp``: JAX
    removed the argument, and Flax raises ``NotImplementedError`` with the same first
    sentence."""

    def __init__(self, transform: str):
        super().__init__(
            f'reduce_axes argument to {transform} is deprecated (JAX removed it: sum the '
            'gradients over the named axes with `jax.lax.psum` yourself, or drop the '
            'argument).'
        )


class RematStaticArgnumsError(TransformArgumentError):
    """``nn.remat``'s ``static_argnums`` name an argument the call does not pass positionally.

    As in Flax, the indices are placed on each call (``self`` is 0) and handed to
    ``jax.checkpoint`` shifted by one, after two arguments of Flax's own, so the message
    starts with JAX's text (that of the JAX in use) and Flax's numbers; an argument
    passed by keyword has no position.

    >>> class Block(nn.Module):
    ...     @nn.compact
    ...     def __call__(self, x, train):
    ...         return nn.Dense(2)(x) * (2.0 if train else 1.0)
    >>> nn.remat(Block, static_argnums=(2,))().init(jax.random.key(0), jnp.ones((1, 2)), train=True)
    Traceback (most recent call last):
    ...
    RematStaticArgnumsError: ...
    """

    def __init__(self, jax_message: str, static_argnums: tuple, n_args: int):
        super().__init__(
            f'{jax_message.rstrip(".")}. (nn.remat: static_argnums={static_argnums} count '
            '`self` as 0, as in Flax, which hands them to jax.checkpoint shifted by one, '
            f'after two arguments of its own; this call passes {n_args} argument(s) '
            'positionally. Pass a static argument positionally, not by keyword: for '
            '`__call__(self, x, train)` called as `module(x, train)`, `train` is '
            'static_argnums=(2,).)'
        )


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
    RematConcreteArgumentError,
    RematStaticArgnumsError,
    VmapVariableAxisError,
):
    _cls.__module__ = __name__
