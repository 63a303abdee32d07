"""Lifted ``cond``, ``switch`` and ``while_loop`` over scopes.

Every branch sees the same variables (those the ``variables`` filter admits, with
the rng streams ``rngs`` admits); the collections a branch writes come out
of the primitive, so branches must create and update variables of the same
structure (as ``lax.cond`` requires of any output).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
from jax import lax

from linen.core.lifting import Filter
from linen.transforms import _pack


def _branches(state: _pack.ScopeTree, fns: Sequence[Callable], variables: Filter, rngs: Filter):
    """Each of ``fns`` as a branch over the inner scopes; as in Flax, a branch sees only
    the collections ``variables`` admits (and changes only those) and only the rng
    streams ``rngs`` admits."""
    visible, keys, mutable = state.admitted(variables, rngs)

    def branch(fn):
        def run(*operands):
            tree, inner = state.inner(visible, keys, mutable)
            y = fn(tree, *operands)
            return y, _pack.mutated_per_scope(inner)

        return run

    return [branch(fn) for fn in fns]


def cond(
    pred: Any,
    true_fun: Callable,
    false_fun: Callable,
    scope,
    *operands,
    variables: Filter = True,
    rngs: Filter = True,
):
    """``lax.cond`` of ``true_fun(scope, *operands)`` / ``false_fun(scope, *operands)``.

    ``scope`` may be a pytree of scopes; the branches get the inner ones alike.
    """
    state = _pack.ScopeTree(scope)
    branches = _branches(state, (true_fun, false_fun), variables, rngs)
    y, mutated = lax.cond(pred, *branches, *operands)
    state.write_back(mutated)
    return y


def switch(
    index: Any,
    branches: Sequence[Callable],
    scope,
    *operands,
    variables: Filter = True,
    rngs: Filter = True,
):
    """``lax.switch`` over ``branches``, each ``branch(scope, *operands)``."""
    state = _pack.ScopeTree(scope)
    y, mutated = lax.switch(index, _branches(state, branches, variables, rngs), *operands)
    state.write_back(mutated)
    return y


def while_loop(
    cond_fn: Callable,
    body_fn: Callable,
    scope,
    init: Any,
    carry_variables: Filter = False,
    broadcast_variables: Filter = True,
    split_rngs: Mapping[Filter, bool] | None = None,
):
    """``lax.while_loop``; ``carry_variables`` are threaded (mutable), the
    ``broadcast_variables`` read-only, and the body sees no other collection.

    As in Flax, the body sees only the rng streams ``split_rngs`` names: those set to
    True get the iteration number folded into their key. ``scope`` may be a pytree
    of scopes.
    """
    state = _pack.ScopeTree(scope)
    filters = (carry_variables, broadcast_variables)
    split_groups = [_pack.group_variables(v, filters) for v in state.variables]
    carry_vars = [c for c, _, _ in split_groups]
    bcast_vars = [b for _, b, _ in split_groups]
    split_rngs = split_rngs or {}
    mutable = carry_variables

    def keys_at(i):
        return [
            {
                k: (jax.random.fold_in(v, i) if do else v)
                for k, v in keys.items()
                if (do := _pack.split_named(k, split_rngs)) is not None
            }
            for keys in state.keys
        ]

    def make(carry_vars, i):
        variables = [{**b, **c} for b, c in zip(bcast_vars, carry_vars)]
        return state.inner(variables, keys_at(i), mutable=mutable)

    def cond(loop_state):
        carry_vars, i, c = loop_state
        return cond_fn(make(carry_vars, i)[0], c)

    def body(loop_state):
        carry_vars, i, c = loop_state
        tree, inner = make(carry_vars, i)
        c = body_fn(tree, c)
        return [_pack.inner_mutated(s, ())[0] for s in inner], i + 1, c

    carry_vars, _, out = lax.while_loop(cond, body, (carry_vars, 0, init))
    state.write_back([(c,) for c in carry_vars])
    return out
