"""Lifted ``vjp``, ``jvp``, ``grad``, ``value_and_grad`` and ``custom_vjp`` over scopes.

Gradients with respect to variables are taken per collection: ``vjp_variables``
(default ``'params'``) receive a cotangent, returned as a ``{collection: tree}``
dict before the inputs' cotangents.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from linen.core.lifting import Filter
from linen.transforms import _pack


def _setup(scope, diff_filter: Filter):
    variables = _pack.gather_variables(scope)
    diff_vars, other_vars = _pack.group_variables(variables, (diff_filter,))
    keys, paths = _pack.rng_keys(scope)
    return diff_vars, other_vars, _pack.streams(keys, paths)


def vjp(
    fn: Callable,
    scope,
    *primals,
    has_aux: bool = False,
    reduce_axes: Sequence[Any] = (),
    vjp_variables: Filter = 'params',
    variables: Filter = True,
    rngs: Filter = True,
):
    """``(y, vjp_fn)`` (``(y, vjp_fn, aux)`` with ``has_aux``) of ``fn(scope, *primals)``.

    ``vjp_fn(ct)`` returns ``(variable_grads, *primal_grads)``.
    """
    diff_vars, other_vars, streams = _setup(scope, vjp_variables)

    def inner(diff_vars, *primals):
        inner_scope = _pack.make_inner_scope(scope, {**diff_vars, **other_vars}, streams)
        out = fn(inner_scope, *primals)
        y, aux = out if has_aux else (out, None)
        return y, (aux, _pack.inner_mutated(inner_scope, ())[0])

    y, vjp_fn, (aux, mutated) = jax.vjp(inner, diff_vars, *primals, has_aux=True)
    _pack.write_back(scope, (mutated,))
    return (y, vjp_fn, aux) if has_aux else (y, vjp_fn)


def value_and_grad(
    fn: Callable,
    scope,
    *primals,
    has_aux: bool = False,
    reduce_axes: Sequence[Any] = (),
    variables: Filter = True,
    rngs: Filter = True,
):
    """``(value, primal_grads)`` (``((value, aux), grads)`` with ``has_aux``); ``fn`` is scalar."""
    out = vjp(fn, scope, *primals, has_aux=has_aux, vjp_variables=False)
    y, vjp_fn = out[0], out[1]
    grads = vjp_fn(jnp.ones_like(y))[1:]
    value = (y, out[2]) if has_aux else y
    return value, grads


def grad(
    fn: Callable,
    scope,
    *primals,
    has_aux: bool = False,
    reduce_axes: Sequence[Any] = (),
    variables: Filter = True,
    rngs: Filter = True,
):
    """Gradients of scalar ``fn(scope, *primals)`` with respect to the primals (not variables)."""
    value, grads = value_and_grad(fn, scope, *primals, has_aux=has_aux)
    return (grads, value[1]) if has_aux else grads


def jvp(
    fn: Callable,
    scope,
    primals: Sequence[Any],
    tangents: Sequence[Any],
    variable_tangents: Mapping[str, Any],
    variables: Filter = True,
    rngs: Filter = True,
):
    """``(y, y_tangent)`` of ``fn(scope, *primals)``; variables get ``variable_tangents``."""
    cols = tuple(variable_tangents.keys())
    diff_vars, other_vars, streams = _setup(scope, cols)
    var_tangents = {
        col: variable_tangents[col]
        if col in variable_tangents
        else jax.tree_util.tree_map(jnp.zeros_like, tree)
        for col, tree in diff_vars.items()
    }

    def inner(diff_vars, *primals):
        inner_scope = _pack.make_inner_scope(scope, {**diff_vars, **other_vars}, streams)
        y = fn(inner_scope, *primals)
        return y, _pack.inner_mutated(inner_scope, ())[0]

    (y, mutated), (y_t, _) = jax.jvp(inner, (diff_vars, *primals), (var_tangents, *tangents))
    _pack.write_back(scope, (mutated,))
    return y, y_t


def custom_vjp(
    fn: Callable,
    forward_fn: Callable,
    backward_fn: Callable,
    grad_vars: Filter = 'params',
    nondiff_argnums: Sequence[int] = (),
) -> Callable:
    """A version of ``fn(scope, *args)`` whose vjp is ``forward_fn``/``backward_fn``.

    ``backward_fn(*nondiff_args, residuals, y_t)`` returns
    ``(variable_grads, *input_grads)``. While ``grad_vars`` are being created (init)
    ``fn`` runs as is.
    """

    def wrapper(scope, *args):
        diff_vars, other_vars, streams = _setup(scope, grad_vars)
        if any(scope.is_mutable_collection(c) for c in _finite(grad_vars, diff_vars)):
            return fn(scope, *args)

        def run(f, diff_vars, args):
            inner_scope = _pack.make_inner_scope(scope, {**diff_vars, **other_vars}, streams)
            return f(inner_scope, *args)

        nondiff = tuple(i + 1 for i in nondiff_argnums)

        @functools.partial(jax.custom_vjp, nondiff_argnums=nondiff)
        def f(diff_vars, *args):
            return run(fn, diff_vars, args)

        def f_fwd(diff_vars, *args):
            return run(forward_fn, diff_vars, args)

        def f_bwd(*rest):
            *nondiff_args, residuals, y_t = rest
            return tuple(backward_fn(*nondiff_args, residuals, y_t))

        f.defvjp(f_fwd, f_bwd)
        return f(diff_vars, *args)

    return wrapper


def _finite(filter_like: Filter, present: Mapping[str, Any]) -> tuple[str, ...]:
    if isinstance(filter_like, str):
        return (filter_like,)
    if isinstance(filter_like, (list, tuple, set, frozenset)):
        return tuple(filter_like)
    return tuple(present) or ('params',)
