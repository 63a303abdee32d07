"""The legacy (T5X-era) partitioning API, as ``flax.linen.partitioning``.

Before boxed metadata (``nn.with_logical_partitioning``), Linen code recorded the
logical axes of a parameter beside it: ``param_with_axes`` stores the value in
``params`` and an :class:`AxisMetadata` in ``params_axes`` under ``<name>_axes``;
``get_axis_names`` turns that collection into logical ``PartitionSpec`` s, which
``logical_to_mesh_axes`` maps to mesh axes with the rules of ``axis_rules``.
``scan_with_axes`` and ``vmap_with_axes`` add the stacked axis to that metadata.

>>> import jax, jax.numpy as jnp
>>> import linen.nn as nn
>>> from linen.nn import partitioning as nn_partitioning
>>> class Dense(nn.Module):
...     @nn.compact
...     def __call__(self, x):
...         w = nn_partitioning.param_with_axes(
...             'kernel', nn.initializers.zeros, (x.shape[-1], 3), axes=('embed', 'mlp'))
...         return x @ w
>>> variables = Dense().init(jax.random.key(0), jnp.ones((2, 4)))
>>> dict(nn_partitioning.get_axis_names(variables['params_axes']))
{'kernel': P('embed', 'mlp')}
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import jax
from jax.sharding import PartitionSpec

from linen.core import freeze, struct, unfreeze, union_filters
from linen.core.scope import CollectionFilter as CollectionFilter
from linen.core.spmd import LogicalRules as LogicalRules
from linen.core.spmd import (
    RulesFallback,
    logical_to_mesh,
    logical_to_mesh_axes,
    with_logical_constraint,
)
from linen.core.spmd import get_logical_axis_rules as get_axis_rules
from linen.core.spmd import logical_axis_rules as axis_rules
from linen.core.spmd import set_logical_axis_rules as set_axis_rules
from linen.core.traverse_util import flatten_dict as flatten_dict
from linen.core.traverse_util import unflatten_dict as unflatten_dict
from linen.layers._typing import Array as Array
from linen.layers._typing import ArrayPytree as ArrayPytree
from linen.layers._typing import LogicalPartitionSpec as LogicalPartitionSpec
from linen.layers._typing import LogicalPartitionSpecPytree as LogicalPartitionSpecPytree
from linen.layers._typing import PartitionSpecPytree as PartitionSpecPytree
from linen.layers.errors import AxisMetadataArgumentError, LayerArgumentError
from linen.module import Module, Variable, module_stack
from linen.transforms import In as ScanIn
from linen.transforms import Out as ScanOut
from linen.transforms import lift, lift_transform, map_variables, scan, vmap

# Some imports above are not in `__all__`: the typing aliases and helpers
# flax.linen.partitioning has through its own imports, kept for Flax code that reaches
# them through this module (`from flax.linen.partitioning import LogicalRules`).
__all__ = [
    'AxisMetadata',
    'PartitionedVariable',
    'RulesFallback',
    'ScanIn',
    'ScanOut',
    'axis_rules',
    'core_remat_static',
    'get_axis_names',
    'get_axis_rules',
    'logical_to_mesh',
    'logical_to_mesh_axes',
    'param_with_axes',
    'remat',
    'scan_with_axes',
    'set_axis_rules',
    'variable_with_axes',
    'vmap_with_axes',
    'with_sharding_constraint',
]

# Flax's name for the logical constraint in this module.
with_sharding_constraint = with_logical_constraint


class AxisMetadata(struct.PyTreeNode):
    """The logical axis names of one variable, kept in ``<collection>_axes``.

    Unlike :class:`linen.core.meta.AxisMetadata` this is not a box around the value:
    it has no pytree children, so transforms carry it as static structure.
    """

    names: Any = struct.field(pytree_node=False)


def _current_module(module: Module | None, what: str) -> Module:
    if module is not None:
        return module
    stack = module_stack()
    if not stack or stack[-1] is None:
        raise AxisMetadataArgumentError(
            what,
            'was called outside a Module method and without module=',
            'Call it inside a @compact method or setup, or pass module=self.',
        )
    return stack[-1]


def _merge_axes(existing: Any, new: AxisMetadata) -> AxisMetadata:
    # sow's reduce: the first call stores the names; a later call (the module called
    # twice) must repeat the same names.
    if isinstance(existing, AxisMetadata) and existing != new:
        raise LayerArgumentError(
            'param_with_axes',
            f'the axis names were sown twice and differ: {existing.names} then {new.names}',
            'Declare each parameter with one set of logical axes.',
        )
    return new


def _path_of(module: Module, name: str) -> str:
    return '/'.join((*module.path, name))


def _check_axes_rank(module: Module, name: str, value: Any, axes: tuple, what: str) -> None:
    # Fewer names than dimensions is a PartitionSpec prefix (the rest replicated), which
    # Flax accepts, down to `axes=()`; more names can never shard the value.
    shape = getattr(value, 'shape', None)
    if shape is not None and len(axes) > len(shape):
        raise LayerArgumentError(
            f'{what} "{_path_of(module, name)}"',
            f'axes {tuple(axes)} name {len(axes)} dimensions but the value has shape '
            f'{tuple(shape)}',
            'Give at most one logical name (or None) per dimension.',
        )


def _full_rank(axes: Any, value: Any) -> Any:
    """``axes`` padded with ``None`` to the value's rank: the same sharding (a spec
    prefix replicates the rest), stated in full so the constraint has nothing to flag."""
    ndim = getattr(value, 'ndim', None)
    if axes is None or ndim is None or len(axes) >= ndim:
        return axes
    return (*axes, *(None,) * (ndim - len(axes)))


def param_with_axes(
    name: str,
    init_fn: Callable[..., Any],
    *init_args,
    axes: tuple[str, ...] | None = None,
    module: Module | None = None,
    **init_kwargs,
) -> Any:
    """Declares a parameter and records its logical ``axes`` in ``params_axes``.

    Args:
        name: the parameter name.
        init_fn: ``init_fn(rng, *init_args, **init_kwargs)`` gives the initial value.
        axes: one logical name (or ``None``) per leading dimension of the parameter
            (fewer names than dimensions leave the rest replicated, as in Flax).
        module: the module to declare it in; default the one whose method runs.

    Returns:
        The parameter's value, sharding-constrained to ``axes`` under rules and a mesh.

    Raises:
        LayerArgumentError: ``axes`` has more entries than the parameter has dimensions.
    """
    module = _current_module(module, 'param_with_axes')
    value = module.param(name, init_fn, *init_args, **init_kwargs)
    if axes is not None:
        if _is_names_tree(axes, value):
            # A pytree-valued parameter: one names tuple per array, stored as given (Flax).
            value = with_logical_constraint(value, _names_to_spec(axes))
            stored = axes
        else:
            _check_axes_rank(module, name, value, axes, 'param_with_axes')
            value = with_logical_constraint(value, PartitionSpec(*_full_rank(axes, value)))
            stored = tuple(axes)
        module.sow('params_axes', f'{name}_axes', AxisMetadata(stored), reduce_fn=_merge_axes)
    return value


class PartitionedVariable(Variable):
    """A :class:`~linen.module.Variable` whose reads and writes are constrained to ``axes``."""

    __slots__ = ('axes', 'fallback')

    def __init__(
        self, scope, collection, name, axes=None, fallback=RulesFallback.AXIS_IS_UNSHARDED
    ):
        super().__init__(scope, collection, name)
        self.axes = axes
        self.fallback = fallback

    @property
    def value(self):
        value = Variable.value.fget(self)
        if self.axes is not None:
            value = with_logical_constraint(
                value, _full_rank(self.axes, value), fallback=self.fallback
            )
        return value

    @value.setter
    def value(self, value):
        if self.axes is not None:
            value = with_logical_constraint(
                value, _full_rank(self.axes, value), fallback=self.fallback
            )
        Variable.value.fset(self, value)


def variable_with_axes(
    collection: str,
    name: str,
    init_fn: Callable[..., Any] | None = None,
    *init_args,
    axes: tuple[str, ...] | None = None,
    module: Module | None = None,
    fallback: RulesFallback = RulesFallback.AXIS_IS_UNSHARDED,
    **init_kwargs,
) -> PartitionedVariable:
    """Declares a variable and records its logical ``axes`` in ``<collection>_axes``.

    Args:
        collection: the variable's collection (e.g. ``'cache'``).
        name: the variable name.
        init_fn: ``init_fn(*init_args, **init_kwargs)`` gives the initial value.
        axes: one logical name (or ``None``) per dimension.
        module: the module to declare it in; default the one whose method runs.
        fallback: what constraints do with a logical name no rule assigns.

    Returns:
        A :class:`PartitionedVariable` whose ``.value`` reads and writes are constrained.
    """
    module = _current_module(module, 'variable_with_axes')
    plain = module.variable(collection, name, init_fn, *init_args, **init_kwargs)
    if axes is not None:
        if module.scope.has_variable(collection, name):
            _check_axes_rank(module, name, plain.value, axes, 'variable_with_axes')
        if plain.is_mutable():
            # The stored initial value is constrained too, as Flax does at creation.
            plain.value = with_logical_constraint(
                plain.value, _full_rank(axes, plain.value), fallback=fallback
            )
        module.sow(
            f'{collection}_axes', f'{name}_axes', AxisMetadata(tuple(axes)), reduce_fn=_merge_axes
        )
    return PartitionedVariable(plain.scope, collection, name, axes, fallback)


def _is_spec(x: Any) -> bool:
    """A names tuple of one array: names, ``None`` s and tuples of names, at least one
    name or ``None`` (``()`` too); a tuple of tuples only is a tuple of names tuples."""
    if not isinstance(x, (tuple, list)):
        return False
    if not x:
        return True
    if not all(
        e is None
        or isinstance(e, str)
        or (isinstance(e, tuple) and all(isinstance(i, str) for i in e))
        for e in x
    ):
        return False
    return any(e is None or isinstance(e, str) for e in x)


def _is_names_tree(axes: Any, value: Any) -> bool:
    """Whether ``axes`` gives names per array of a pytree ``value`` (not of one array)."""
    return not hasattr(value, 'shape') and not _is_spec(axes)


def _names_to_spec(names: Any) -> Any:
    """``PartitionSpec`` s from a names tuple, or from a pytree of them (dicts, tuples)."""

    def leaf(x):
        return None if x is None else PartitionSpec(*x)

    return jax.tree_util.tree_map(leaf, names, is_leaf=lambda x: x is None or _is_spec(x))


def get_axis_names(axes_metadata: Mapping[str, Any]) -> Any:
    """Logical ``PartitionSpec`` s from one ``<collection>_axes`` collection.

    ``{'Dense_0': {'kernel_axes': AxisMetadata(('embed', 'mlp'))}}`` becomes
    ``{'Dense_0': {'kernel': P('embed', 'mlp')}}``, matching the ``params`` tree.
    """

    def rename(tree):
        out = {}
        for key, value in tree.items():
            if isinstance(value, Mapping):
                out[key] = rename(value)
            else:
                out[re.sub(r'_axes$', '', key)] = _names_to_spec(value.names)
        return out

    return freeze(rename(unfreeze(axes_metadata)))


def _map_axis_metadata(fn: Callable[[Any], Any], tree: Any) -> Any:
    return jax.tree_util.tree_map(
        lambda x: x.replace(names=fn(x.names)) if isinstance(x, AxisMetadata) else x,
        tree,
        is_leaf=lambda x: isinstance(x, AxisMetadata),
    )


def _add_axis_to_metadata(target: Any, axis_pos: Any, axis_name: str, axis_col: str) -> Any:
    """Wraps ``target`` so the ``axis_col`` metadata gains ``axis_name`` at ``axis_pos``."""
    axis_pos = getattr(axis_pos, 'axis', axis_pos)  # scan's In()/Out() markers

    def insert(names):
        if names is None:
            return None
        names = list(names)
        names.insert(axis_pos, axis_name)
        return tuple(names)

    def remove(names):
        if names is None:
            return None
        names = list(names)
        if axis_pos >= len(names) or names[axis_pos] != axis_name:
            # Flax indexes the names at axis_pos: an IndexError when they are shorter.
            error = AxisMetadataArgumentError if axis_pos >= len(names) else LayerArgumentError
            raise error(
                f'{axis_col} metadata',
                f'expected axis {axis_name!r} at position {axis_pos} in {tuple(names)}',
                'Use the same axis_name and variable_axes as when the variables were made.',
            )
        names.pop(axis_pos)
        return tuple(names)

    stack = module_stack()
    outer = stack[-1] if stack else None
    mutable = outer.is_mutable_collection(axis_col) if outer is not None else True
    return map_variables(
        target,
        axis_col,
        trans_in_fn=lambda tree: _map_axis_metadata(remove, tree),
        trans_out_fn=lambda tree: _map_axis_metadata(insert, tree),
        mutable=mutable,
    )


def scan_with_axes(
    target: Any,
    variable_axes: Mapping[Any, Any] = {},
    variable_broadcast: Any = False,
    variable_carry: Any = False,
    split_rngs: Mapping[Any, bool] = {},
    in_axes: Any = 0,
    out_axes: Any = 0,
    length: int | None = None,
    reverse: bool = False,
    unroll: int = 1,
    axis_name: str = 'layers',
    axes_collections: tuple[str, ...] = ('params',),
    data_transform: Callable[..., Any] | None = None,
    methods: Any = None,
) -> Any:
    """``nn.scan`` that also adds ``axis_name`` to the ``<collection>_axes`` metadata.

    The ``*_axes`` collections are broadcast (they describe every step alike) and,
    for each collection in ``axes_collections`` that is scanned, the stacked axis
    is inserted into its logical names at the position ``variable_axes`` gives.
    """
    axes_filters = tuple(f'{col}_axes' for col in axes_collections)
    scanned = scan(
        target,
        variable_axes=variable_axes,
        variable_broadcast=union_filters(variable_broadcast, axes_filters),
        variable_carry=variable_carry,
        split_rngs=split_rngs,
        in_axes=in_axes,
        out_axes=out_axes,
        length=length,
        reverse=reverse,
        unroll=unroll,
        data_transform=data_transform,
        methods=methods,
    )
    for col in axes_collections:
        if col in variable_axes:
            scanned = _add_axis_to_metadata(scanned, variable_axes[col], axis_name, f'{col}_axes')
    return scanned


def vmap_with_axes(
    target: Any,
    variable_axes: Mapping[Any, Any],
    split_rngs: Mapping[Any, bool] = {},
    in_axes: Any = 0,
    out_axes: Any = 0,
    axis_size: int | None = None,
    axis_name: str | None = None,
    partitioning_axis_names: Mapping[Any, str] = {},
    spmd_axis_name: str | None = None,
    methods: Any = None,
) -> Any:
    """``nn.vmap`` that also adds the mapped axis to the ``<collection>_axes`` metadata.

    ``partitioning_axis_names={'params': 'heads'}`` inserts the logical name
    ``'heads'`` into ``params_axes`` at the position ``variable_axes['params']``.
    """
    variable_axes = dict(variable_axes)
    for col in partitioning_axis_names:
        variable_axes[f'{col}_axes'] = None  # metadata is the same for every slice
    vmapped = vmap(
        target,
        variable_axes=variable_axes,
        split_rngs=split_rngs,
        in_axes=in_axes,
        out_axes=out_axes,
        axis_size=axis_size,
        axis_name=axis_name,
        spmd_axis_name=spmd_axis_name,
        methods=methods,
    )
    for col, axis in variable_axes.items():
        if col in partitioning_axis_names:
            vmapped = _add_axis_to_metadata(
                vmapped, axis, partitioning_axis_names[col], f'{col}_axes'
            )
    return vmapped


def core_remat_static(
    fn: Callable[..., Any],
    variables: Any = True,
    rngs: Any = True,
    concrete: bool = False,
    prevent_cse: bool = True,
    static_argnums: int | tuple[int, ...] = (),
    policy: Callable[..., Any] | None = None,
) -> Callable[..., Any]:
    """The functional remat behind :func:`remat`: ``fn(scope, *args)`` checkpointed, with
    ``static_argnums`` counting the arguments after the scope from 0."""
    return lift.checkpoint(fn, variables, rngs, concrete, prevent_cse, static_argnums, policy)


def remat(
    target: Any,
    variables: Any = True,
    rngs: Any = True,
    concrete: bool = False,
    prevent_cse: bool = True,
    static_argnums: int | tuple[int, ...] = (),
    policy: Callable[..., Any] | None = None,
    methods: Any = None,
) -> Any:
    """Flax's ``partitioning.remat``: ``nn.remat`` whose ``static_argnums`` skip ``self``.

    For ``__call__(self, x, train)``, ``train`` is ``static_argnums=(1,)`` here (``nn.remat``
    counts ``self`` as 0 and wants ``(2,)``). The class it makes is named after
    :func:`core_remat_static`, as in Flax (``Core_remat_staticBlock``), which names its
    instances and so their parameters.
    """
    return lift_transform(
        core_remat_static,
        target,
        variables=variables,
        rngs=rngs,
        concrete=concrete,
        prevent_cse=prevent_cse,
        static_argnums=static_argnums,
        policy=policy,
        methods=methods,
    )
