"""The functional ``lift.checkpoint`` (``lift.remat``) with Flax's signature.

``checkpoint(fn, variables, rngs, concrete, prevent_cse, static_argnums, policy)``
in Flax's positional order; the lifted function takes a scope or any pytree of
scopes (``fn`` receives the inner scopes in the same structure).
``static_argnums`` count the arguments after the scope from 0, as Flax's
``lift.checkpoint`` does (``fn(scope, x, n)``: ``n`` is 1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax

from linen.transforms import _pack
from linen.transforms._remat import check_concrete, merge_static, split_static
from linen.transforms.errors import TransformArgumentError


def checkpoint(
    fn: Callable,
    variables: Any = True,
    rngs: Any = True,
    concrete: bool = False,
    prevent_cse: bool = True,
    static_argnums: int | Sequence[int] = (),
    policy: Callable | None = None,
) -> Callable:
    """``jax.checkpoint`` of ``fn(scope, *args)``: activations are recomputed on the backward pass.

    As in Flax, ``fn`` sees (and changes) only the collections ``variables`` admits and
    only the rng streams ``rngs`` admits.
    """
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)
    static_argnums = tuple(static_argnums)
    check_concrete(concrete)

    def wrapper(scope_tree, *args, **kwargs):
        state = _pack.ScopeTree(scope_tree)
        bad = [i for i in static_argnums if not -len(args) <= i < len(args)]
        if bad:
            raise TransformArgumentError(
                f'lift.checkpoint(static_argnums={static_argnums}): the call passes '
                f'{len(args)} argument(s) after the scope, counted from 0, so {bad[0]} '
                'is out of range.'
            )
        dynamic, static = split_static(args, static_argnums)
        visible, keys, mutable = state.admitted(variables, rngs)

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


remat = checkpoint
