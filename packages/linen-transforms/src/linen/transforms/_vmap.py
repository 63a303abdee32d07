"""Lifted ``vmap`` over scopes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax

from linen.core import in_filter
from linen.core.lifting import Filter
from linen.transforms import _pack
from linen.transforms.errors import TransformAxisSizeError


def _infer_axis_size(args: tuple, in_axes: Any) -> int | None:
    axes = in_axes if isinstance(in_axes, (tuple, list)) else (in_axes,) * len(args)
    for arg, axis in zip(args, axes):
        if axis is None:
            continue
        leaves = jax.tree_util.tree_leaves(arg)
        if not leaves:
            continue
        if isinstance(axis, int):
            return jax.numpy.shape(leaves[0])[axis]
        # a pytree of axes
        for leaf, ax in zip(leaves, jax.tree_util.tree_leaves(axis)):
            if ax is not None:
                return jax.numpy.shape(leaf)[ax]
    return None


def vmap(
    fn: Callable,
    variable_axes: Mapping[Filter, int | None],
    split_rngs: Mapping[Filter, bool],
    in_axes: Any = 0,
    out_axes: Any = 0,
    axis_size: int | None = None,
    axis_name: str | None = None,
    spmd_axis_name: Any = None,
    metadata_params: Mapping[Any, Any] | None = None,
) -> Callable:
    """``jax.vmap`` of ``fn(scope, *args)``; collections map over ``variable_axes``.

    Collections that no filter in ``variable_axes`` names are broadcast (axis
    None). Rng streams matched by a ``split_rngs`` filter set to True get a
    different key per slice (the stream's root key is split, its path kept).
    """
    filters = tuple(variable_axes.keys())
    var_axes = tuple(variable_axes.values()) + (None,)
    split_filter = [f for f, do in split_rngs.items() if do]
    metadata_params = dict(metadata_params or {})
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)

    def wrapper(scope, *args, **kwargs):
        groups = _pack.group_variables(_pack.gather_variables(scope), filters)
        groups = tuple(
            _pack.remove_axis(g, ax, metadata_params) if ax is not None else g
            for g, ax in zip(groups, var_axes)
        )
        keys, paths = _pack.rng_keys(scope)
        split = {k: v for k, v in keys.items() if any(in_filter(f, k) for f in split_filter)}
        bcast = {k: v for k, v in keys.items() if k not in split}
        size = axis_size
        if split and size is None:
            size = _infer_axis_size(args, in_axes)
            if size is None:
                raise TransformAxisSizeError('vmap')
        if split:
            split = {k: jax.random.split(v, size) for k, v in split.items()}

        def inner(groups, split_keys, args):
            variables = {c: v for g in groups for c, v in g.items()}
            inner_scope = _pack.make_inner_scope(
                scope, variables, _pack.streams({**bcast, **split_keys}, paths)
            )
            y = fn(inner_scope, *args, **kwargs)
            return y, _pack.inner_mutated(inner_scope, filters)

        y, mutated = jax.vmap(
            inner,
            in_axes=(var_axes, 0, in_axes),
            out_axes=(out_axes, var_axes),
            axis_size=size,
            axis_name=axis_name,
            spmd_axis_name=spmd_axis_name,
        )(groups, split, args)
        # Boxes are told even without metadata_params: a Partitioned box then raises
        # PartitioningUnspecifiedError, as in Flax.
        mutated = tuple(
            _pack.add_axis(g, ax, metadata_params) if ax is not None else g
            for g, ax in zip(mutated, var_axes)
        )
        _pack.write_back(scope, mutated)
        return y

    return wrapper
