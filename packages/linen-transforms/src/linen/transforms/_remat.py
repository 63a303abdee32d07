"""The lifted-``checkpoint`` engine (``checkpoint_over_scopes``) under ``nn.remat``, and ``remat_scan``."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import jax

from linen.transforms import _pack
from linen.transforms.errors import (
    RematConcreteArgumentError,
    RematStaticArgnumsError,
    TransformArgumentError,
)


def split_static(args: tuple, static_argnums: Sequence[int]) -> tuple[tuple, dict[int, Any]]:
    """``(dynamic args, {index: static arg})``; negative indices count from the end."""
    n = len(args)
    static_idx = {i % n for i in static_argnums if -n <= i < n} if n else set()
    dynamic = tuple(a for i, a in enumerate(args) if i not in static_idx)
    return dynamic, {i: args[i] for i in static_idx}


def merge_static(dynamic: tuple, static: dict[int, Any]) -> tuple:
    out, it = [], iter(dynamic)
    for i in range(len(dynamic) + len(static)):
        out.append(static[i] if i in static else next(it))
    return tuple(out)


def flax_argnums(static_argnums: int | Sequence[int]) -> tuple[int, ...]:
    """``nn.remat``'s ``static_argnums`` as a tuple, still counted as Flax counts them
    (``self`` is 0); :func:`resolve_flax_argnums` places them on a call."""
    if isinstance(static_argnums, int):
        return (static_argnums,)
    return tuple(static_argnums)


def resolve_flax_argnums(flax_argnums: tuple[int, ...], n_args: int) -> tuple[int, ...]:
    """Flax-counted ``static_argnums`` as indices of a call passing ``n_args`` positionally.

    Flax hands them to ``jax.checkpoint`` shifted by one, over its two own arguments
    and the call's: ``i`` is position ``i + 1`` of ``n_args + 2``. So ``i > 0`` is
    argument ``i - 1`` of the call, ``-2`` its last, ``-3`` the one before; ``0``,
    ``-1``, ``-n_args - 2`` and ``-n_args - 3`` land on Flax's own two arguments and
    mark nothing. A position outside that range raises JAX's ``ValueError`` there,
    with JAX's text (an argument passed by keyword has no position: the call is
    shorter, as in Flax); so does it here, at the call, with a hint after it.
    """
    n_jax = n_args + 2
    out = []
    for i in flax_argnums:
        position = i + 1
        if not -n_jax <= position < n_jax:
            got = tuple(j + 1 for j in flax_argnums)
            raise RematStaticArgnumsError(_jax_argnums_message(got, n_jax), flax_argnums, n_args)
        call_index = position - 2 if position >= 0 else n_args + position
        if 0 <= call_index < n_args:
            out.append(call_index)
    return tuple(out)


def _jax_argnums_message(static_argnums: tuple[int, ...], n_args: int) -> str:
    """What ``jax.checkpoint`` says of ``static_argnums`` past ``n_args`` arguments: its
    text differs between JAX versions (and by the sign of the index), so JAX is asked."""
    try:
        jax.checkpoint(lambda *args: 0, static_argnums=static_argnums)(*[None] * n_args)
    except ValueError as error:
        return str(error)
    return (  # this JAX accepts them: say it in the words of the supported versions
        'the `static_argnums` argument to `jax.checkpoint` / `jax.remat` can only take '
        'integer values greater than or equal to `-len(args)` and less than `len(args)`, '
        f'but got {static_argnums}, while `len(args)` = {n_args}'
    )


def check_concrete(concrete: bool) -> None:
    """``concrete=True`` is refused where the transform is declared, not at first call."""
    if concrete:
        raise RematConcreteArgumentError()


def check_static_argnums(call_argnums: Sequence[int], method: Callable) -> None:
    """Refuse, where the transform is declared, an index past the method's arguments.

    ``call_argnums`` are ``static_call_argnums``, counted as the caller writes the
    call (``self`` excluded); Flax-counted ``static_argnums`` are checked at the call,
    as Flax's are (:func:`resolve_flax_argnums`). A
    method taking ``*args`` accepts any index; an index of an argument the caller
    leaves at its default is allowed (that argument is simply not static then).
    """
    try:
        params = list(inspect.signature(method).parameters.values())[1:]
    except (TypeError, ValueError):  # no introspectable signature (a builtin, a C function)
        return
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    n = len(positional)
    bad = [i for i in call_argnums if not -n <= i < n]
    if bad:
        name = getattr(method, '__qualname__', getattr(method, '__name__', repr(method)))
        raise TransformArgumentError(
            f'nn.remat: static_call_argnums {bad[0]} (counted as the caller writes the call, '
            f'`self` excluded) is past the arguments of {name}({", ".join(positional)}), '
            f'which takes {n} positional argument(s) after self: call indices must lie in '
            f'range({-n}, {n}). static_call_argnums count as the caller writes '
            '`module(x, train)` (`train` is 1); static_argnums count `self` as 0 as in Flax '
            '(for `__call__(self, x, train)`, `train` is 2).'
        )


def checkpoint_over_scopes(
    fn: Callable,
    prevent_cse: bool = True,
    static_argnums: int | Sequence[int] = (),
    policy: Callable | None = None,
    concrete: bool = False,
    *,
    flax_static_argnums: tuple[int, ...] = (),
    variables: Any = True,
    rngs: Any = True,
) -> Callable:
    """``jax.checkpoint`` of ``fn(scope, *args)``: activations are recomputed on the backward pass.

    ``static_argnums`` index the arguments after the scope (as a module's caller
    sees them: ``module(x, train)`` -> ``train`` is 1). ``flax_static_argnums``
    count as ``nn.remat``'s (``self`` is 0) and are placed on each call
    (:func:`resolve_flax_argnums`). As in Flax, ``fn`` sees (and changes) only the
    collections ``variables`` admits and only the rng streams ``rngs`` admits.
    """
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)
    check_concrete(concrete)

    def wrapper(scope_or_scopes, *args, **kwargs):
        # A tuple (or list) of scopes is lifted together (Module arguments, as in Flax).
        state = _pack.ScopeTree(scope_or_scopes)
        visible, keys, mutable = state.admitted(variables, rngs)
        argnums = static_argnums
        if flax_static_argnums:
            argnums = (*argnums, *resolve_flax_argnums(flax_static_argnums, len(args)))
        dynamic, static = split_static(args, argnums)

        def inner(visible, keys, dynamic):
            tree, scopes = state.inner(visible, keys, mutable)
            y = fn(tree, *merge_static(dynamic, static), **kwargs)
            return y, _pack.mutated_per_scope(scopes)

        y, mutated = jax.checkpoint(inner, prevent_cse=prevent_cse, policy=policy)(
            visible, state.keys if keys is None else keys, dynamic
        )
        state.write_back(mutated)
        return y

    return wrapper


def remat_scan(
    body_fn: Callable,
    lengths: Sequence[int],
    policy: Callable | None = None,
    variable_broadcast: Any = False,
    variable_carry: Any = False,
    variable_axes: Any = None,
    split_rngs: Any = None,
) -> Callable:
    """``body_fn(scope, x) -> x`` looped ``prod(lengths)`` times: a ``scan`` of ``remat``
    nested once per entry of ``lengths`` (Flax's ``lift.remat_scan``).

    Variables of the ``variable_axes`` collections gain one leading axis per entry.
    """
    from linen.transforms import _scan

    variable_axes = {True: 0} if variable_axes is None else variable_axes
    split_rngs = {True: True} if split_rngs is None else split_rngs

    def step(scope, carry):
        return body_fn(scope, carry), None

    fn = step
    for length in reversed(tuple(lengths)):
        fn = _scan.scan(
            _carry_only(checkpoint_over_scopes(fn, policy=policy)),
            variable_axes,
            variable_broadcast,
            variable_carry,
            split_rngs,
            length=length,
        )

    def wrapper(scope, x):
        return fn(scope, x)[0]

    return wrapper


def _carry_only(fn: Callable) -> Callable:
    def run(scope, carry):
        return fn(scope, carry)

    return run
