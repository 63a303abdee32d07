"""Lifts that change how a function sees its variables or rngs, without a JAX transform:
``map_variables``, ``fold_rngs`` and ``add_metadata_axis``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from linen.core import intersect_filters, subtract_filters, union_filters
from linen.core.lifting import Filter, RngStream
from linen.transforms import _pack


def map_variables(
    fn: Callable,
    mapped_collections: Filter = True,
    trans_in_fn: Callable = lambda x: x,
    trans_out_fn: Callable = lambda x: x,
    init: bool = False,
    mutable: bool = False,
    rngs: Filter = True,
    variables: Filter = True,
) -> Callable:
    """Run ``fn(scope, ...)`` on ``trans_in_fn(variables)`` of ``mapped_collections``.

    The mapped collections are writable inside only when ``mutable`` (or ``init``,
    while initialising); what is written goes back through ``trans_out_fn``.
    """

    def wrapper(scope, *args, **kwargs):
        mapped, other = _pack.group_variables(_pack.gather_variables(scope), (mapped_collections,))
        outer_mutable = scope.mutable
        writable = mutable or (init and bool(scope.flags.get('initializing', False)))
        inner_mutable = subtract_filters(outer_mutable, mapped_collections)
        if writable:
            inner_mutable = union_filters(
                inner_mutable, intersect_filters(outer_mutable, mapped_collections)
            )
        keys, paths = _pack.rng_keys(scope)
        if writable and init:
            # Initialising: create the variables with a first run, so that
            # trans_in_fn (which may create variables of its own, e.g.
            # SpectralNorm's statistics) sees real values; the second run below
            # then uses the mapped ones, and what is stored is their image.
            first = _pack.make_inner_scope(
                scope, {**mapped, **other}, _pack.streams(keys, paths), mutable=inner_mutable
            )
            fn(first, *args, **kwargs)
            mapped = _pack.inner_mutated(first, (mapped_collections,))[0] or mapped
        inner = _pack.make_inner_scope(
            scope,
            {**trans_in_fn(mapped), **other},
            _pack.streams(keys, paths),
            mutable=inner_mutable,
        )
        y = fn(inner, *args, **kwargs)
        out_mapped, out_other = _pack.inner_mutated(inner, (mapped_collections,))
        if writable and out_mapped:
            out_mapped = trans_out_fn(out_mapped)
        _pack.write_back(scope, (out_mapped, out_other))
        return y

    return wrapper


def fold_rngs(fn: Callable, variables: Filter = True, rngs: Filter = True) -> Callable:
    """Run ``fn(scope, ...)`` with each rng stream replaced by one fresh key of it.

    Each stream consumes one ``make_rng`` of the outer scope; inside, keys derive
    from that key, so the inner function's randomness no longer depends on the
    outer path.
    """

    def wrapper(scope, *args, **kwargs):
        streams = {name: RngStream(scope.make_rng(name)) for name in scope.rngs}
        inner = _pack.make_inner_scope(scope, _pack.gather_variables(scope), streams)
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
