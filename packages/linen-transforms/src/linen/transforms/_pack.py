"""Moving a scope's state across a JAX transform boundary.

A lifted transform takes the variables below a scope and its rng streams out as
plain pytrees, applies the JAX transform to a function that rebuilds an inner
scope from them (same path, same rng counters), and writes the mutated
collections back. Collections are split into groups by filters; each group
travels as one dict, so a transform's axis specification is a tuple with one
entry per group, known before tracing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax

from linen.core import meta
from linen.core._filters import Filter, in_filter
from linen.core._scope import Scope, _Root, _thaw

__all__ = [
    'gather_variables',
    'group_variables',
    'make_inner_scope',
    'inner_mutated',
    'write_back',
    'rng_keys',
]


def gather_variables(scope: Scope) -> dict[str, Any]:
    """``{collection: subtree}`` below ``scope`` (absent collections are omitted)."""
    out = {}
    for col in scope._root.variables:
        d = scope._collection(col)
        if d is not None:
            out[col] = d
    return out


def group_variables(
    variables: dict[str, Any], filters: Sequence[Filter]
) -> tuple[dict[str, Any], ...]:
    """Split collections by ``filters`` (first match wins); the last group takes the rest."""
    groups: list[dict[str, Any]] = [{} for _ in range(len(filters) + 1)]
    for col, value in variables.items():
        for i, f in enumerate(filters):
            if in_filter(f, col):
                groups[i][col] = value
                break
        else:
            groups[-1][col] = value
    return tuple(groups)


def make_inner_scope(
    outer: Scope,
    variables: dict[str, Any],
    rngs: dict[str, Any],
    mutable: Filter | None = None,
) -> Scope:
    """A root scope standing for ``outer`` inside a transform."""
    mutable = outer._root.mutable if mutable is None else mutable
    own = {col: (_thaw(v) if in_filter(mutable, col) else v) for col, v in variables.items()}
    root = _Root(own, mutable, offset=len(outer.path))
    inner = Scope(
        root, name=outer.name, rngs=rngs, rng_counters=outer.rng_counters, flags=outer.flags
    )
    inner.path = outer.path
    return inner


def inner_mutated(inner: Scope, filters: Sequence[Filter]) -> tuple[dict[str, Any], ...]:
    """The mutable collections of an inner scope, grouped like the inputs."""
    mutable = inner._root.mutable
    out = {c: v for c, v in inner._root.variables.items() if in_filter(mutable, c)}
    return group_variables(out, filters)


def write_back(outer: Scope, groups: Sequence[dict[str, Any]]) -> None:
    """Replace the outer scope's mutable subtrees with the transform's results."""
    for group in groups:
        for col, tree in group.items():
            if not outer.is_mutable_collection(col):
                continue
            if not tree and outer._collection(col) is None:
                continue
            d = outer._mutable_collection(col)
            d.clear()
            d.update(tree)


def rng_keys(scope: Scope) -> tuple[dict[str, Any], dict[str, Any]]:
    """The raw keys of a scope's streams, and the streams as templates.

    A transform passes the keys through (split or not) and rebuilds streams of
    the same kind around them with :func:`streams`.
    """
    rngs = scope.rngs
    return {n: r.key for n, r in rngs.items()}, dict(rngs)


def streams(keys: dict[str, Any], templates: dict[str, Any]) -> dict[str, Any]:
    """Streams like ``templates`` (same path, same derivation) around ``keys``."""
    return {n: templates[n].with_key(k) for n, k in keys.items()}


# ------------------------------------------------------------- boxed metadata


def _is_box(x: Any) -> bool:
    return isinstance(x, meta.AxisMetadata)


def remove_axis(tree: Any, axis: int, params: dict) -> Any:
    """Boxed leaves lose the transform's axis on the way in."""
    return jax.tree_util.tree_map(
        lambda x: x.remove_axis(axis, params) if _is_box(x) else x, tree, is_leaf=_is_box
    )


def add_axis(tree: Any, axis: int, params: dict) -> Any:
    """Boxed leaves gain the transform's axis on the way out."""
    return jax.tree_util.tree_map(
        lambda x: x.add_axis(axis, params) if _is_box(x) else x, tree, is_leaf=_is_box
    )
