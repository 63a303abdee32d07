"""Lifts that change how a function sees its variables or rngs, without a JAX transform:
``map_variables``, ``fold_rngs`` and ``add_metadata_axis``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from linen.core import in_filter, intersect_filters, subtract_filters, union_filters
from linen.core.lifting import Filter, RngStream, thaw
from linen.core.scope import is_filter_empty
from linen.transforms import _pack


def map_variables(
    fn: Callable,
    mapped_collections: Filter = True,
    map_in_fn: Callable = lambda x: x,
    map_out_fn: Callable = lambda x: x,
    init: bool = False,
    mutable: bool = False,
    rngs: Filter = True,
    variables: Filter = True,
    *,
    trans_in_fn: Callable | None = None,
    trans_out_fn: Callable | None = None,
) -> Callable:
    """Run ``fn(scope, ...)`` on ``map_in_fn(variables)`` of ``mapped_collections``.

    Flax's signature and meaning. The mapped collections are writable inside only
    when ``mutable`` or ``init``; what is written goes back through ``map_out_fn``.
    With ``init`` (and anything mutable) ``fn`` first runs on the untransformed
    variables so they exist; what it created is stored as ``map_out_fn`` of it, and
    the real run sees ``map_in_fn`` of that. ``scope`` may be a pytree of scopes. As in
    Flax, the function sees (and may change) only the mapped collections and the others
    ``variables`` admits, and only the rng streams ``rngs`` admits.
    ``trans_in_fn``/``trans_out_fn`` are linen's older names of the two functions.
    """
    if trans_in_fn is not None:
        map_in_fn = trans_in_fn
    if trans_out_fn is not None:
        map_out_fn = trans_out_fn
    writable = mutable or init
    # As in Flax, the function sees the mapped collections and the others `variables`
    # admits (the rest are absent inside), and changes only those of them the caller
    # may change; the mapped ones only when writable.
    seen = union_filters(mapped_collections, variables)
    changeable = seen if writable else subtract_filters(variables, mapped_collections)

    def wrapper(scope_tree, *args, **kwargs):
        state = _pack.ScopeTree(scope_tree)
        # As in Flax, the function sees only the rng streams `rngs` admits.
        keys = state.admitted_keys(rngs) or state.keys
        split = [_pack.group_variables(v, (mapped_collections, variables)) for v in state.variables]
        mapped = [m for m, _, _ in split]
        other = [o for _, o, _ in split]

        def scopes(variables, admitted):
            return [
                _pack.make_inner_scope(
                    s, v, _pack.streams(k, t), mutable=intersect_filters(s.mutable, admitted)
                )
                for s, v, k, t in zip(state.scopes, variables, keys, state.templates)
            ]

        if init and any(
            not is_filter_empty(intersect_filters(s.mutable, seen)) for s in state.scopes
        ):
            # Create the variables with a first run, so that map_in_fn (which may
            # create variables of its own, e.g. SpectralNorm's statistics) sees real
            # values; the second run below uses the mapped ones. As in Flax, only
            # where the function may change something it sees.
            first = scopes([{**m, **o} for m, o in zip(mapped, other)], seen)
            fn(state.unflatten(first), *args, **kwargs)
            created = [_pack.inner_mutated(s, (mapped_collections,))[0] for s in first]
            # As in Flax, the real run sees what the first run may write back: the
            # mapped collections the caller made mutable (a read-only one comes out
            # empty, so `init=True` in an apply that mutates another collection
            # fails as in Flax; `init=self.is_initializing()` is the documented use).
            mapped = [
                map_out_fn({c: t for c, t in {**m, **n}.items() if s.is_mutable_collection(c)})
                for s, m, n in zip(state.scopes, mapped, created)
            ]
        inner = scopes([{**map_in_fn(thaw(m)), **o} for m, o in zip(mapped, other)], changeable)
        y = fn(state.unflatten(inner), *args, **kwargs)
        out = []
        for s in inner:
            out_mapped, out_other = _pack.inner_mutated(s, (mapped_collections,))
            if writable and out_mapped:
                out_mapped = map_out_fn(out_mapped)
            out.append((out_mapped, out_other))
        state.write_back(out)
        return y

    return wrapper


def fold_rngs(fn: Callable, variables: Filter = True, rngs: Filter = True) -> Callable:
    """Flax's functional ``fold_rngs``: ``fold_rngs(fn)(scope, hash_key, *args)``.

    As in Flax, the lifted function takes a hashable ``hash_key`` after the scope
    (Flax's module transforms pass the module's fingerprint there) and hands it to
    ``fn(scope, hash_key, *args)``. Inside, each rng stream restarts at its key
    with the scope's path dropped (Flax's ``LazyRng.clear_suffix``), so the keys
    drawn inside do not depend on where the scope sits; counters carry on. As in Flax,
    ``fn`` sees (and changes) only the collections ``variables`` admits and only the
    rng streams ``rngs`` admits.
    """

    def wrapper(scope_tree, hash_key, *args, **kwargs):
        state = _pack.ScopeTree(scope_tree)
        visible, keys, mutable = state.admitted(variables, rngs)
        tree, inner = state.inner(visible, keys, mutable, clear_paths=True)
        y = fn(tree, hash_key, *args, **kwargs)
        state.write_back(_pack.mutated_per_scope(inner))
        return y

    return wrapper


def fold_rngs_module(fn: Callable, variables: Filter = True, rngs: Filter = True) -> Callable:
    """``nn.fold_rngs``' lift: each stream ``rngs`` admits consumes one ``make_rng`` of
    the outer scope; inside, keys derive from that key, so the inner randomness no
    longer depends on the outer path. As in Flax, the target sees (and changes) only
    the collections ``variables`` admits and only those streams."""

    def wrapper(scope, *args, **kwargs):
        state = _pack.ScopeTree(scope)
        visible, _, mutable = state.admitted(variables, rngs)
        streams = {
            name: RngStream(scope.make_rng(name)) for name in scope.rngs if in_filter(rngs, name)
        }
        inner = _pack.make_inner_scope(scope, visible[0], streams, mutable)
        y = fn(inner, *args, **kwargs)
        _pack.write_back(scope, _pack.inner_mutated(inner, ()))
        return y

    return wrapper


def add_metadata_axis(
    fn: Callable,
    variable_axes: Mapping[Filter, int] | None = None,
    metadata_params: Mapping[Any, Any] | None = None,
) -> Callable:
    """Run ``fn``; boxed variables of the ``variable_axes`` collections gain that axis in
    their metadata on the way out and lose it on the way in (as a vmap over them would)."""
    variable_axes = dict(variable_axes or {})
    filters = tuple(variable_axes)
    axes = tuple(variable_axes.values())
    params = dict(metadata_params or {})

    def wrapper(scope, *args, **kwargs):
        groups = _pack.group_variables(_pack.gather_variables(scope), filters)
        groups = (
            tuple(_pack.remove_axis(g, ax, params) for g, ax in zip(groups, axes))
            + groups[len(axes) :]
        )
        keys, paths = _pack.rng_keys(scope)
        inner = _pack.make_inner_scope(
            scope, {c: v for g in groups for c, v in g.items()}, _pack.streams(keys, paths)
        )
        y = fn(inner, *args, **kwargs)
        out = _pack.inner_mutated(inner, filters)
        out = tuple(_pack.add_axis(g, ax, params) for g, ax in zip(out, axes)) + out[len(axes) :]
        _pack.write_back(scope, out)
        return y

    return wrapper
