"""Lifted ``vjp``, ``jvp``, ``grad``, ``value_and_grad`` and ``custom_vjp`` over scopes.

Gradients with respect to variables are taken per collection: ``vjp_variables``
(default ``'params'``) receive a cotangent, returned as a ``{collection: tree}``
dict before the inputs' cotangents. As in Flax, the function sees only the
collections differentiated and those ``variables`` admits, and only the rng streams
``rngs`` admits (a body reaching another raises as an absent one does).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from linen.core.lifting import Filter, derivatives, nested_derivative
from linen.transforms import _pack
from linen.transforms.errors import ReduceAxesArgumentError


def _split(state: _pack.ScopeTree, diff_filter: Filter, variables: Filter = True):
    """Per scope: the ``diff_filter`` collections, and the others ``variables`` admits."""
    groups = [_pack.group_variables(v, (diff_filter, variables)) for v in state.variables]
    return [d for d, _, _ in groups], [o for _, o, _ in groups]


def _carries_derivative(*trees) -> bool:
    """Whether a leaf of ``trees`` is differentiated already (a ``jvp``/``grad`` tracer
    in its chain, through ``vmap``'s): the lifted derivative then runs under another."""
    return any(derivatives(x) for x in jax.tree_util.tree_leaves(trees))


def _differentiate(transform: Callable, *trees) -> Any:
    """``transform()``, under ``linen.core.lifting.nested_derivative`` when ``trees``
    already carry a derivative: a gradient of a gradient, whose layers then emit their
    operations one by one, as Flax's, for JAX to sum cotangents in Flax's order (F36)."""
    if _carries_derivative(*trees):
        with nested_derivative():
            return transform()
    return transform()


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

    ``vjp_fn(ct)`` returns ``(variable_grads, *primal_grads)``; ``variable_grads``
    has the structure of ``scope`` (a pytree of scopes), a ``{collection: tree}``
    of the ``vjp_variables`` collections per scope.
    """
    if reduce_axes:  # as Flax's lift (JAX removed the argument)
        raise ReduceAxesArgumentError('vjp')
    state = _pack.ScopeTree(scope)
    diff_vars, other_vars = _split(state, vjp_variables, variables)
    keys, mutable = state.admitted_keys(rngs), state.mutable_seen(vjp_variables, variables)

    def inner(diff_vars, *primals):
        visible = [{**d, **o} for d, o in zip(diff_vars, other_vars)]
        tree, scopes = state.inner(visible, keys, mutable)
        out = fn(tree, *primals)
        y, aux = out if has_aux else (out, None)
        return y, (aux, _pack.mutated_per_scope(scopes))

    y, vjp_list, (aux, mutated) = _differentiate(
        lambda: jax.vjp(inner, diff_vars, *primals, has_aux=True), diff_vars, other_vars, primals
    )
    state.write_back(mutated)

    # A pytree (as jax.vjp's own), so it can be a custom_vjp residual.
    vjp_fn = jax.tree_util.Partial(functools.partial(_tree_vjp, state.treedef), vjp_list)
    return (y, vjp_fn, aux) if has_aux else (y, vjp_fn)


def _tree_vjp(treedef, vjp_list, y_t):
    var_grads, *primal_grads = vjp_list(y_t)
    return (jax.tree_util.tree_unflatten(treedef, var_grads), *primal_grads)


def value_and_grad(
    fn: Callable,
    scope,
    *primals,
    has_aux: bool = False,
    reduce_axes: Sequence[Any] = (),
    variables: Filter = True,
    rngs: Filter = True,
):
    """``(value, primal_grads)``, or ``(value, aux, primal_grads)`` with ``has_aux`` (Flax's
    order); ``fn`` returns a scalar. Gradients are taken for the primals only."""
    if reduce_axes:
        raise ReduceAxesArgumentError('value_and_grad')
    out = vjp(
        fn, scope, *primals, has_aux=has_aux, vjp_variables=False, variables=variables, rngs=rngs
    )
    y, vjp_fn = out[0], out[1]
    grads = tuple(vjp_fn(jnp.ones_like(y))[1:])
    return (y, out[2], grads) if has_aux else (y, grads)


def grad(
    fn: Callable,
    scope,
    *primals,
    has_aux: bool = False,
    reduce_axes: Sequence[Any] = (),
    variables: Filter = True,
    rngs: Filter = True,
):
    """Gradients of scalar ``fn(scope, *primals)`` with respect to the primals (not variables).

    ``(grads, aux)`` with ``has_aux``.
    """
    if reduce_axes:
        raise ReduceAxesArgumentError('grad')
    out = value_and_grad(fn, scope, *primals, has_aux=has_aux, variables=variables, rngs=rngs)
    return (out[2], out[1]) if has_aux else out[1]


def jvp(
    fn: Callable,
    scope,
    primals: Sequence[Any],
    tangents: Sequence[Any],
    variable_tangents: Any,
    variables: Filter = True,
    rngs: Filter = True,
):
    """``(y, y_tangent)`` of ``fn(scope, *primals)``; variables get ``variable_tangents``.

    ``variable_tangents`` has the structure of ``scope`` (a pytree of scopes): a
    ``{collection: tree}`` per scope; collections it leaves out get zero tangents.
    """
    state = _pack.ScopeTree(scope)
    per_scope = state.flatten_like(variable_tangents)
    keys = state.admitted_keys(rngs)
    diff_vars, other_vars, var_tangents = [], [], []
    for v, t in zip(state.variables, per_scope):
        cols = tuple(t.keys())
        d, o, _ = _pack.group_variables(v, (cols, variables))
        diff_vars.append(d)
        other_vars.append(o)
        var_tangents.append(
            {
                col: t[col] if col in t else jax.tree_util.tree_map(jnp.zeros_like, tree)
                for col, tree in d.items()
            }
        )

    differentiated = tuple(sorted({c for t in per_scope for c in t}))
    mutable = state.mutable_seen(differentiated, variables)

    def inner(diff_vars, *primals):
        visible = [{**d, **o} for d, o in zip(diff_vars, other_vars)]
        tree, scopes = state.inner(visible, keys, mutable)
        y = fn(tree, *primals)
        return y, _pack.mutated_per_scope(scopes)

    (y, mutated), (y_t, _) = _differentiate(
        lambda: jax.jvp(inner, (diff_vars, *primals), (var_tangents, *tangents)),
        diff_vars,
        other_vars,
        primals,
    )
    state.write_back(mutated)
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
    ``(variable_grads, *input_grads)`` (``variable_grads`` in the structure of the
    scope tree). While ``grad_vars`` are being created (init) ``fn`` runs as is.
    ``nondiff_argnums`` count the scope as argument 0 (Flax's counting).
    """

    def wrapper(scope, *args, **kwargs):
        _pack.drop_kwargs('custom_vjp', kwargs)
        state = _pack.ScopeTree(scope)
        diff_vars, other_vars = _split(state, grad_vars)

        def run(f, diff_vars, args):
            tree, scopes = state.inner([{**d, **o} for d, o in zip(diff_vars, other_vars)])
            return f(tree, *args), _pack.mutated_per_scope(scopes)

        if any(
            s.is_mutable_collection(c)
            for s, d in zip(state.scopes, diff_vars)
            for c in _finite(grad_vars, d)
        ):
            # While the grad vars are made, fn runs as is (through inner scopes, so
            # what it makes comes back in Flax's order).
            y, mutated = run(fn, diff_vars, args)
            state.write_back(mutated)
            return y

        # As in Flax, positions count the scope (or module) as argument 0.
        nondiff = tuple(nondiff_argnums)

        # The collections the call changes (intermediates, batch statistics) are an
        # output too, as in Flax; their cotangents are dropped.
        @functools.partial(jax.custom_vjp, nondiff_argnums=nondiff)
        def f(diff_vars, *args):
            return run(fn, diff_vars, args)

        def f_fwd(diff_vars, *args):
            (y, residuals), mutated = run(forward_fn, diff_vars, args)
            return (y, mutated), residuals

        def f_bwd(*rest):
            *nondiff_args, residuals, (y_t, _) = rest
            var_grads, *input_grads = backward_fn(*nondiff_args, residuals, y_t)
            return (state.flatten_like(var_grads), *input_grads)

        f.defvjp(f_fwd, f_bwd)
        y, mutated = f(diff_vars, *args)
        state.write_back(mutated)
        return y

    return wrapper


def _finite(filter_like: Filter, present: Mapping[str, Any]) -> tuple[str, ...]:
    if isinstance(filter_like, str):
        return (filter_like,)
    if isinstance(filter_like, (list, tuple, set, frozenset)):
        return tuple(filter_like)
    return tuple(present) or ('params',)
