"""Moving a scope's state across a JAX transform boundary.

A lifted transform takes the variables below a scope and its rng streams out as
plain pytrees, applies the JAX transform to a function that rebuilds an inner
scope from them (same path, same rng counters), and writes the mutated
collections back. Collections are split into groups by filters; each group
travels as one dict, so a transform's axis specification is a tuple with one
entry per group, known before tracing.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import jax

from linen.core import Scope, in_filter, intersect_filters, meta, union_filters
from linen.core.lifting import (
    Filter,
    RngStream,
    binding_variables,
    detached_scope,
    scope_collection,
    writable_scope_collection,
)
from linen.transforms.errors import TransformArgumentError

__all__ = [
    'gather_variables',
    'group_variables',
    'make_inner_scope',
    'inner_mutated',
    'write_back',
    'rng_keys',
    'ScopeTree',
    'mutated_per_scope',
    'drop_kwargs',
    'copy_counters',
]


def drop_kwargs(transform_name: str, kwargs: Mapping[str, Any]) -> dict:
    """No keyword arguments: Flax's ``vmap``, ``scan`` and ``custom_vjp`` drop them, warning.

    The lifted function then runs with its defaults, as under Flax, and the
    ``RuntimeWarning`` carries Flax's text (a warnings filter written for Flax
    matches). Pass such values positionally (or bind them with ``functools.partial``).
    """
    if kwargs:
        names = ', '.join(kwargs)
        warnings.warn(
            f'kwargs are not supported in {transform_name}, so "{names}" is(are) ignored',
            RuntimeWarning,
            stacklevel=3,
        )
    return {}


def copy_counters(counters: Any) -> Any:
    """A copy of rng counters (nested dicts of ints, or a tuple of them), keys kept as they are.

    Not ``copy.deepcopy``: that would copy the core's child-entry marker keys into
    new objects, so the copied counters would never compare equal again (and
    ``nn.jit``, whose compile key holds them, would retrace).
    """
    if type(counters) is dict:
        return {k: copy_counters(v) for k, v in counters.items()}
    if type(counters) in (tuple, list):
        return type(counters)(copy_counters(c) for c in counters)
    return counters


def gather_variables(scope: Scope) -> dict[str, Any]:
    """``{collection: subtree}`` below ``scope`` (absent collections are omitted)."""
    out = {}
    for col in binding_variables(scope):
        d = scope_collection(scope, col)
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
    return detached_scope(
        name=outer.name,
        path=outer.path,
        variables=variables,
        mutable=outer.mutable if mutable is None else mutable,
        rngs=rngs,
        rng_counters=outer.rng_counters,
        flags=outer.flags,
    )


def copy_reservations(reservations: dict, inner: Scope) -> None:
    """Give ``inner`` the names of ``reservations`` it does not hold yet (sets copied:
    ``inner`` adds to them)."""
    own = inner.reservations
    for name, cols in reservations.items():
        if name not in own:
            own[name] = set(cols)


def inner_mutated(inner: Scope, filters: Sequence[Filter]) -> tuple[dict[str, Any], ...]:
    """The mutable collections of an inner scope, grouped like the inputs."""
    mutable = inner.mutable
    out = {c: v for c, v in binding_variables(inner).items() if in_filter(mutable, c)}
    return group_variables(out, filters)


def write_back(outer: Scope, groups: Sequence[dict[str, Any]]) -> None:
    """Replace the outer scope's mutable subtrees with the transform's results.

    As in Flax, a variable the outer scope holds keeps its place, and the ones the
    transform made are added in pytree order (sorted keys), as a trip through a JAX
    transform leaves them: Flax's lifted transforms all add them so, even those
    that make no JAX transform (``map_variables``, ``fold_rngs``) and ``scan``'s
    broadcast collections, made before its loop.
    """
    for group in groups:
        for col, tree in group.items():
            if not outer.is_mutable_collection(col):
                continue
            if not tree and scope_collection(outer, col) is None:
                continue
            _replace_in_place(writable_scope_collection(outer, col), tree)


def _replace_in_place(old: dict, new: Any) -> None:
    """Make ``old`` hold ``new``, keeping ``old``'s nested dicts (their identity) and
    the order of its keys; keys new to ``old`` follow in pytree order.

    Child scopes cache their collection dicts: a submodule that ran before the
    transform (or is lifted next to its parent as a Module argument) must see, and
    write into, the dicts the binding holds after the write-back.
    """
    if old is new:
        return
    for k in [k for k in old if k not in new]:
        del old[k]
    added = []
    for k, v in new.items():
        if k not in old:
            added.append(k)
            continue
        current = old[k]
        if type(current) is dict and type(v) is dict:
            _replace_in_place(current, v)
        else:
            old[k] = v
    for k in _pytree_order(added):
        old[k] = in_pytree_order(new[k])


def _pytree_order(keys: list) -> list:
    try:
        return sorted(keys)
    except TypeError:  # keys of mixed types: JAX would refuse to flatten them anyway
        return keys


def in_pytree_order(tree: Any) -> Any:
    """``tree`` with the keys of its (nested) dicts sorted, as a JAX pytree round trip
    leaves them; dicts already in order are returned as they are."""
    if type(tree) is not dict:
        return tree
    keys = list(tree)
    order = _pytree_order(keys)
    items = [(k, in_pytree_order(tree[k])) for k in order]
    if order == keys and all(v is tree[k] for k, v in items):
        return tree
    return dict(items)


def rng_keys(scope: Scope) -> tuple[dict[str, Any], dict[str, Any]]:
    """The raw keys of a scope's streams, and the streams as templates.

    A transform passes the keys through (split or not) and rebuilds streams of
    the same kind around them with :func:`streams`.
    """
    rngs = scope.rngs
    return {n: r.key for n, r in rngs.items()}, dict(rngs)


def split_named(name: str, split_rngs: Mapping[Filter, bool]) -> bool | None:
    """Whether ``split_rngs`` splits the stream ``name``: the first filter, in the
    mapping's order, that names it decides, as Flax groups streams by its filters
    (``{'dropout': False, True: True}`` shares ``dropout`` and splits the rest).
    ``None``: no filter names it."""
    for f, do in split_rngs.items():
        if in_filter(f, name):
            return bool(do)
    return None


def split_and_shared(
    keys: dict[str, Any], split_rngs: Mapping[Filter, bool]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``keys`` by ``split_rngs`` (``vmap``'s and ``scan``'s): the streams it splits,
    and those it shares (:func:`split_named`). As in Flax, a stream no filter names is
    in neither: the body does not see it."""
    split, shared = {}, {}
    for name, key in keys.items():
        do = split_named(name, split_rngs)
        if do:
            split[name] = key
        elif do is not None:
            shared[name] = key
    return split, shared


def split_keys(keys: dict[str, Any], n: int) -> dict[str, Any]:
    """Each key split ``n`` ways, for the ``n`` steps or lanes of a transform.

    The split reads a ``jax.random.clone`` of the key, as Flax's ``scan`` and
    ``vmap`` do: the scope keeps its key unconsumed for JAX's key reuse checker
    (``jax_debug_key_reuse``), which would otherwise refuse a second lifted call
    in the same scope and the user's key after ``init``. Same bits as a plain split.
    """
    return {k: jax.random.split(jax.random.clone(v), n) for k, v in keys.items()}


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


# ------------------------------------------------------------ trees of scopes


def admitted_collections(per_scope: Sequence[dict[str, Any]], variables: Filter) -> list:
    """Per scope, the collections the filter ``variables`` admits (what a lifted body
    with that filter sees, as in Flax)."""
    return [{c: v for c, v in cols.items() if in_filter(variables, c)} for cols in per_scope]


def admitted_streams(per_scope: Sequence[dict[str, Any]], rngs: Filter) -> list:
    """Per scope, the rng keys of the streams the filter ``rngs`` admits."""
    return [{n: k for n, k in keys.items() if in_filter(rngs, n)} for keys in per_scope]


def _is_scope(x: Any) -> bool:
    return isinstance(x, Scope)


class ScopeTree:
    """The state of a pytree of scopes (one scope, a tuple of scopes, a dict, ...).

    Flax's lifted transforms accept any pytree of scopes where they take a scope
    and hand ``fn`` the inner scopes in the same structure; each scope's
    variables and rng keys travel as one entry of a list.
    """

    __slots__ = ('scopes', 'treedef', 'variables', 'keys', 'templates')

    def __init__(self, scope_tree: Any):
        self.scopes, self.treedef = jax.tree_util.tree_flatten(scope_tree, is_leaf=_is_scope)
        for scope in self.scopes:
            if not isinstance(scope, Scope):
                raise TransformArgumentError(
                    f'a lifted transform got {type(scope).__name__} where a Scope (or a '
                    'tuple, list or dict of Scopes) was expected; pass the scope first.'
                )
        self.variables = [gather_variables(s) for s in self.scopes]
        pairs = [rng_keys(s) for s in self.scopes]
        self.keys = [k for k, _ in pairs]
        self.templates = [t for _, t in pairs]

    def unflatten(self, leaves: Sequence[Any]) -> Any:
        """``leaves`` (one per scope) in the structure of the scope tree."""
        return jax.tree_util.tree_unflatten(self.treedef, list(leaves))

    def flatten_like(self, tree: Any) -> list[Any]:
        """The per-scope entries of ``tree``, which has the scope tree's structure."""
        return self.treedef.flatten_up_to(tree)

    def admitted_keys(self, rngs: Filter) -> list[dict[str, Any]] | None:
        """Per scope: the rng keys of the streams ``rngs`` admits (None: all of them)."""
        if rngs is True:
            return None
        return admitted_streams(self.keys, rngs)

    def admitted(
        self, variables: Filter, rngs: Filter
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None, Filter | None]:
        """What a body under the filters ``variables`` and ``rngs`` gets, as Flax's lifts
        give it: per scope, the collections ``variables`` admits; per scope, the keys of
        the streams ``rngs`` admits (None: all of them); what may change inside (None:
        the outer scope's mutable collections)."""
        visible = (
            self.variables if variables is True else admitted_collections(self.variables, variables)
        )
        return visible, self.admitted_keys(rngs), self.mutable_seen(variables)

    def mutable_seen(self, *seen: Filter) -> Filter | None:
        """What a body seeing the collections ``seen`` admits may change: the outer
        mutable collections among them (None: the outer scope's, when one filter
        admits every collection)."""
        if any(f is True for f in seen):
            return None
        return intersect_filters(self.scopes[0].mutable, functools.reduce(union_filters, seen))

    def inner(
        self,
        variables: Sequence[dict[str, Any]],
        keys: Sequence[dict[str, Any]] | None = None,
        mutable: Filter | None = None,
        clear_paths: bool = False,
    ) -> tuple[Any, list[Scope]]:
        """Inner root scopes over ``variables`` (and ``keys``), as a tree and as a list.

        ``clear_paths``: the streams restart at the keys, their pending path dropped
        (Flax's ``LazyRng.clear_suffix``, what its ``jit`` and ``fold_rngs`` do).
        """
        keys = self.keys if keys is None else keys
        inner = [
            make_inner_scope(
                s,
                v,
                {n: RngStream(key) for n, key in k.items()} if clear_paths else streams(k, t),
                mutable=mutable,
            )
            for s, v, k, t in zip(self.scopes, variables, keys, self.templates)
        ]
        return self.unflatten(inner), inner

    def write_back(self, groups_per_scope: Sequence[Sequence[dict[str, Any]]]) -> None:
        for scope, groups in zip(self.scopes, groups_per_scope):
            write_back(scope, groups)


def mutated_per_scope(inner: Sequence[Scope], filters: Sequence[Filter] = ()) -> list[tuple]:
    """:func:`inner_mutated` of each inner scope."""
    return [inner_mutated(s, filters) for s in inner]
