"""Lifted ``cond``, ``switch`` and ``while_loop`` over scopes.

Every branch sees the same variables; the collections a branch writes come out
of the primitive, so branches must create and update variables of the same
structure (as ``lax.cond`` requires of any output).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
from jax import lax

from linen.core import in_filter
from linen.core.lifting import Filter
from linen.transforms import _pack


def _branch(scope, variables, streams, fn):
    def run(*operands):
        inner = _pack.make_inner_scope(scope, variables, streams)
        y = fn(inner, *operands)
        return y, _pack.inner_mutated(inner, ())[0]

    return run


def _state(scope):
    keys, paths = _pack.rng_keys(scope)
    return _pack.gather_variables(scope), _pack.streams(keys, paths)


def cond(
    pred: Any,
    true_fun: Callable,
    false_fun: Callable,
    scope,
    *operands,
    variables: Filter = True,
    rngs: Filter = True,
):
    """``lax.cond`` of ``true_fun(scope, *operands)`` / ``false_fun(scope, *operands)``."""
    variables_, streams = _state(scope)
    y, mutated = lax.cond(
        pred,
        _branch(scope, variables_, streams, true_fun),
        _branch(scope, variables_, streams, false_fun),
        *operands,
    )
    _pack.write_back(scope, (mutated,))
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
    variables_, streams = _state(scope)
    y, mutated = lax.switch(
        index, [_branch(scope, variables_, streams, b) for b in branches], *operands
    )
    _pack.write_back(scope, (mutated,))
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
    """``lax.while_loop``; ``carry_variables`` are threaded (mutable), the rest read-only.

    Split rng streams get the iteration number folded into their key.
    """
    variables_ = _pack.gather_variables(scope)
    carry_vars, bcast_vars = _pack.group_variables(variables_, (carry_variables,))
    keys, paths = _pack.rng_keys(scope)
    split = [f for f, do in (split_rngs or {}).items() if do]
    mutable = carry_variables

    def streams_at(i):
        return _pack.streams(
            {
                k: (jax.random.fold_in(v, i) if any(in_filter(f, k) for f in split) else v)
                for k, v in keys.items()
            },
            paths,
        )

    def make(carry_vars, i):
        return _pack.make_inner_scope(
            scope, {**bcast_vars, **carry_vars}, streams_at(i), mutable=mutable
        )

    def cond(state):
        carry_vars, i, c = state
        return cond_fn(make(carry_vars, i), c)

    def body(state):
        carry_vars, i, c = state
        inner = make(carry_vars, i)
        c = body_fn(inner, c)
        return _pack.inner_mutated(inner, ())[0], i + 1, c

    carry_vars, _, out = lax.while_loop(cond, body, (carry_vars, 0, init))
    _pack.write_back(scope, (carry_vars,))
    return out
