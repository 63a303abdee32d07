"""Logical axis names and the rules that map them to mesh axes, as in ``flax.linen.spmd``.

Layers name their dimensions logically (``('embed', 'mlp')``); a list of rules
``[(logical_name, mesh_axes), ...]`` decides which mesh axis each name is sharded
over. Rules are tried in order; a rule applies to the dimensions with its logical
name that are still unassigned, provided none of its mesh axes is already taken
by another dimension of the same array; a rule whose mesh axes are ``None`` makes
the dimension replicated. Dimensions no rule assigns are replicated.

The active rules are context-local (a ``contextvars.ContextVar``): a thread or an
asyncio task that sets them does not change them for others.

>>> rules = (('batch', 'data'), ('embed', 'model'), ('mlp', 'model'))
>>> logical_to_mesh_axes(('batch', 'embed', 'mlp'), rules)
P('data', 'model', None)
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from linen.core import struct
from linen.core.meta import Partitioned, global_mesh_defined

__all__ = [
    'LogicallyPartitioned',
    'get_logical_axis_rules',
    'logical_axis_rules',
    'logical_to_mesh',
    'logical_to_mesh_axes',
    'logical_to_mesh_sharding',
    'set_logical_axis_rules',
    'with_logical_constraint',
    'with_logical_partitioning',
]

LogicalRules = Sequence[tuple[str, str | tuple[str, ...] | None]]

_RULES: contextvars.ContextVar[tuple] = contextvars.ContextVar(
    'linen_logical_axis_rules', default=()
)

# Marks a dimension no rule has decided yet (None already means "replicated").
_UNASSIGNED = object()


def _freeze_rules(rules: LogicalRules) -> tuple:
    # Rules end up in pytree metadata and jit cache keys, so they must hash.
    return tuple((name, tuple(axes) if isinstance(axes, list) else axes) for name, axes in rules)


def set_logical_axis_rules(rules: LogicalRules) -> None:
    """Sets the logical axis rules of the current context."""
    _RULES.set(_freeze_rules(rules))


def get_logical_axis_rules() -> tuple:
    """Returns the logical axis rules of the current context (``()`` if none)."""
    return _RULES.get()


@contextlib.contextmanager
def logical_axis_rules(rules: LogicalRules) -> Iterator[None]:
    """Sets the logical axis rules inside a ``with`` block, restoring the old ones after."""
    token = _RULES.set(_freeze_rules(rules))
    try:
        yield
    finally:
        _RULES.reset(token)


def _mesh_axes_of(axes: Any) -> tuple:
    if axes is None:
        return ()
    if isinstance(axes, str):
        return (axes,)
    return tuple(axes)


def logical_to_mesh_axes(
    array_dim_names: Sequence[str | None] | None, rules: LogicalRules | None = None
) -> PartitionSpec | None:
    """Maps logical dimension names to a mesh ``PartitionSpec`` with ``rules``.

    Args:
        array_dim_names: one logical name (or ``None``) per dimension; ``None``
            altogether gives ``None``. ``PartitionSpec.UNCONSTRAINED`` passes through.
        rules: the rules; ``None`` uses the context's rules.
    """
    if array_dim_names is None:
        return None
    if rules is None:
        rules = get_logical_axis_rules()
    names = tuple(array_dim_names)
    result: list[Any] = [_UNASSIGNED] * len(names)
    for i, name in enumerate(names):
        if name is None or name is PartitionSpec.UNCONSTRAINED:
            result[i] = name
    used: set[str] = set()
    for logical, axes in rules:
        mesh_axes = _mesh_axes_of(axes)
        for i, name in enumerate(names):
            if result[i] is not _UNASSIGNED or name != logical:
                continue
            if used.isdisjoint(mesh_axes):
                result[i] = axes if not isinstance(axes, list) else tuple(axes)
                used.update(mesh_axes)
    return PartitionSpec(*(None if r is _UNASSIGNED else r for r in result))


def _is_spec(x: Any) -> bool:
    return isinstance(x, PartitionSpec)


def logical_to_mesh(tree: Any, rules: LogicalRules | None = None) -> Any:
    """Maps every logical ``PartitionSpec`` in ``tree`` to a mesh ``PartitionSpec``."""
    return jax.tree_util.tree_map(
        lambda spec: logical_to_mesh_axes(tuple(spec), rules) if _is_spec(spec) else spec,
        tree,
        is_leaf=_is_spec,
    )


def logical_to_mesh_sharding(tree: Any, mesh: Mesh, rules: LogicalRules | None = None) -> Any:
    """Maps every logical ``PartitionSpec`` in ``tree`` to a ``NamedSharding`` on ``mesh``."""
    return jax.tree_util.tree_map(
        lambda spec: (
            NamedSharding(mesh, logical_to_mesh_axes(tuple(spec), rules))
            if _is_spec(spec)
            else spec
        ),
        tree,
        is_leaf=_is_spec,
    )


def with_logical_constraint(
    x: Any,
    logical_axis_resources: Any,
    rules: LogicalRules | None = None,
    mesh: Mesh | None = None,
) -> Any:
    """``jax.lax.with_sharding_constraint`` with logical names mapped by the rules.

    Without ``mesh`` and outside ``jax.set_mesh``/``with mesh:`` there is nothing to
    constrain to, and ``x`` is returned unchanged (as in Flax), so layers can call
    this unconditionally.

    Args:
        x: an array (or pytree of arrays).
        logical_axis_resources: a logical ``PartitionSpec`` or tuple of names (or a
            pytree of specs matching ``x``).
        rules: the rules; ``None`` uses the context's rules.
        mesh: the mesh; ``None`` uses the context mesh.
    """
    if mesh is None and not global_mesh_defined():
        return x

    def to_target(spec):
        mesh_spec = logical_to_mesh_axes(tuple(spec), rules)
        return NamedSharding(mesh, mesh_spec) if mesh is not None else mesh_spec

    if isinstance(logical_axis_resources, (PartitionSpec, tuple)) and all(
        n is None or isinstance(n, (str, tuple)) or n is PartitionSpec.UNCONSTRAINED
        for n in logical_axis_resources
    ):
        targets = to_target(logical_axis_resources)
    else:
        targets = jax.tree_util.tree_map(to_target, logical_axis_resources, is_leaf=_is_spec)
    return jax.lax.with_sharding_constraint(x, targets)


class LogicallyPartitioned(Partitioned):
    """A :class:`~linen.core.meta.Partitioned` whose names are logical.

    ``get_partition_spec`` returns the logical spec (as in Flax; map it with
    ``logical_to_mesh``); ``get_sharding`` and ``unbox`` map the names with
    ``rules``, or the context's rules when ``rules`` is ``None``.
    """

    rules: tuple | None = struct.field(pytree_node=False, default=None)

    def __post_init__(self):
        super().__post_init__()
        if self.rules is not None:
            object.__setattr__(self, 'rules', _freeze_rules(self.rules))

    def get_mesh_partition_spec(self) -> PartitionSpec:
        """The mesh ``PartitionSpec`` the logical names map to under the rules."""
        return logical_to_mesh_axes(self.names, self.rules)

    def get_sharding(self, mesh: Mesh | None = None) -> NamedSharding:
        mesh = self.mesh if self.mesh is not None else mesh
        if mesh is None:
            raise ValueError(
                f'LogicallyPartitioned value with names {self.names} has no mesh: pass '
                'one to `get_sharding(mesh)` or to `with_logical_partitioning(..., mesh=...)`.'
            )
        return NamedSharding(mesh, self.get_mesh_partition_spec())

    def unbox(self, apply_constraint: bool = True) -> Any:
        if apply_constraint and (self.mesh is not None or global_mesh_defined()):
            return with_logical_constraint(
                self.value, self.get_partition_spec(), rules=self.rules, mesh=self.mesh
            )
        return self.value


def with_logical_partitioning(
    fn: Callable[..., Any],
    names: tuple,
    mesh: Mesh | None = None,
    rules: LogicalRules | None = None,
) -> Callable[..., LogicallyPartitioned]:
    """Wraps an initializer so that its output is boxed in :class:`LogicallyPartitioned`."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return LogicallyPartitioned(fn(*args, **kwargs), names, mesh=mesh, rules=rules)

    return wrapper
