"""Lifted ``vmap`` over scopes."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import jax

from linen.core import Scope, intersect_filters, union_filters
from linen.core.lifting import Filter
from linen.transforms import _pack
from linen.transforms._axis_markers import SplitAxes
from linen.transforms.errors import InAxesListError, TransformAxisSizeError, VmapVariableAxisError


def _check_mapped_axes(groups, axes, scope: Scope) -> None:
    """Every variable of a group mapped along ``axis`` has that axis (else a typed error)."""
    for group, axis in zip(groups, axes):
        if not isinstance(axis, int):
            continue
        for collection, tree in group.items():
            for keys, leaf in jax.tree_util.tree_leaves_with_path(tree):
                shape = getattr(leaf, 'shape', None)
                if shape is not None and not -len(shape) <= axis < len(shape):
                    name = '/'.join(str(getattr(k, 'key', k)) for k in keys)
                    raise VmapVariableAxisError(
                        collection, name, shape, axis, '/'.join(map(str, scope.path))
                    )


def _first_leaf_size(tree: Any, axis: int, sizes: set) -> None:
    leaves = jax.tree_util.tree_leaves(tree)
    if leaves:
        shape = jax.numpy.shape(leaves[0])
        if -len(shape) <= axis < len(shape):  # else JAX's vmap says what is wrong
            sizes.add(shape[axis])


def _is_none(x: Any) -> bool:
    return x is None


def _mapped_sizes(groups_per_scope: list, group_axes: tuple, args: tuple, in_axes: Any) -> set:
    """The sizes Flax reads the axis size from: the first leaf of each mapped variable
    group, then of each argument subtree an entry of ``in_axes`` maps."""
    sizes: set = set()
    for groups in groups_per_scope:
        for group, axis in zip(groups, group_axes):
            if axis is not None:
                _first_leaf_size(group, axis, sizes)
    jax.tree_util.tree_map(
        lambda axis, sub: None if axis is None else _first_leaf_size(sub, axis, sizes),
        in_axes,
        args,
        is_leaf=_is_none,
    )
    return sizes


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

    As in Flax, only the collections a filter of ``variable_axes`` names enter
    the transform: the others are neither visible nor writable inside (a ``sow``
    there records nothing, a variable there is missing). Rng streams matched by a
    ``split_rngs`` filter set to True get a different key per slice (the stream's root
    key is split, its path kept), those matched by one set to False the same key; as in
    Flax, a stream no filter names is not in the body (``has_rng`` is False there).
    """
    directions = SplitAxes(variable_axes)
    # Collections marked `Out` are grouped on the way in only to be left out; those
    # marked `In` are read-only inside.
    in_filters = tuple(directions.inputs) + directions.out_only
    in_axes_of_groups = tuple(directions.inputs.values())
    in_axes_of_groups += (None,) * len(directions.out_only) + (None,)
    filters = tuple(directions.outputs)
    var_axes = tuple(directions.outputs.values()) + (None,)
    # What the body may write: the collections lifted as output (not `In`, not unnamed).
    writable = functools.reduce(union_filters, directions.outputs, False)
    metadata_params = dict(metadata_params or {})
    out_only_groups = range(len(directions.inputs), len(in_filters))

    def wrapper(scope_or_scopes, *args, **kwargs):
        if isinstance(in_axes, list):  # at the call, where Flax's pytree error comes
            raise InAxesListError('vmap', in_axes)
        kwargs = _pack.drop_kwargs('vmap', kwargs)
        # Flax's multi-scope form: a pytree of scopes (tuple, list, dict) is lifted
        # together and ``fn`` receives the inner scopes in the same structure.
        tree = _pack.ScopeTree(scope_or_scopes)
        multi = not isinstance(scope_or_scopes, Scope)
        scopes = tuple(tree.scopes)
        all_groups, all_split, all_bcast, all_paths = [], [], [], []
        for scope in scopes:
            groups = _pack.group_variables(_pack.gather_variables(scope), in_filters)
            all_groups.append(
                tuple(
                    {}
                    if i in out_only_groups or i == len(in_filters)  # Out, and unnamed
                    else _pack.remove_axis(g, ax, metadata_params)
                    if ax is not None
                    else g
                    for i, (g, ax) in enumerate(zip(groups, in_axes_of_groups))
                )
            )
            # (after remove_axis: a metadata box may make the mapped axis there)
            _check_mapped_axes(all_groups[-1], in_axes_of_groups, scope)
            keys, paths = _pack.rng_keys(scope)
            split, shared = _pack.split_and_shared(keys, split_rngs)
            all_split.append(split)
            all_bcast.append(shared)
            all_paths.append(paths)
        size = axis_size
        if size is None:
            # As Flax, before JAX's vmap: the split rng keys need the size.
            sizes = _mapped_sizes(all_groups, in_axes_of_groups, args, in_axes)
            if len(sizes) != 1:
                raise TransformAxisSizeError('vmap', sizes if sizes else None)
            (size,) = sizes
        all_split = [_pack.split_keys(sp, size) for sp in all_split]

        def inner(groups_per_scope, split_per_scope, args):
            inner_scopes, mutated = [], []
            for scope, groups, split_keys, bcast, paths in zip(
                scopes, groups_per_scope, split_per_scope, all_bcast, all_paths
            ):
                variables = {c: v for g in groups for c, v in g.items()}
                inner_scopes.append(
                    _pack.make_inner_scope(
                        scope,
                        variables,
                        _pack.streams({**bcast, **split_keys}, paths),
                        mutable=intersect_filters(scope.mutable, writable),
                    )
                )
            if multi:
                y = fn(tree.unflatten(inner_scopes), *args, **kwargs)
            else:
                y = fn(inner_scopes[0], *args, **kwargs)
            mutated = tuple(_pack.inner_mutated(s, filters) for s in inner_scopes)
            return y, mutated

        y, mutated = jax.vmap(
            inner,
            in_axes=((in_axes_of_groups,) * len(scopes), 0, in_axes),
            out_axes=(out_axes, (var_axes,) * len(scopes)),
            axis_size=axis_size,  # the caller's: JAX's errors then read as under Flax
            axis_name=axis_name,
            spmd_axis_name=spmd_axis_name,
        )(tuple(all_groups), tuple(all_split), args)
        for scope, groups in zip(scopes, mutated):
            # Boxes are told even without metadata_params: a Partitioned box then
            # raises PartitioningUnspecifiedError, as in Flax.
            groups = tuple(
                _pack.add_axis(g, ax, metadata_params) if ax is not None else g
                for g, ax in zip(groups, var_axes)
            )
            _pack.write_back(scope, groups)
        return y

    return wrapper
