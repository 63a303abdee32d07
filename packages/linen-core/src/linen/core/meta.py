"""Boxed metadata for variables, as in ``flax.core.meta``.

A variable's value may be wrapped in an :class:`AxisMetadata` box that carries
information about its axes. The box is a pytree whose only child is the value, so
JAX transforms see through it; ``unbox`` strips the boxes from a tree. Lifted
transforms that add or remove an axis (``vmap``, ``scan``) call ``add_axis`` /
``remove_axis`` so the metadata follows the value's shape.

:class:`Partitioned` is the box for sharding: ``names`` holds one mesh axis name (or
``None``, or a tuple of names) per array dimension, and ``get_partition_spec`` /
``get_sharding`` turn it into what ``jax.jit`` takes as ``out_shardings``.

>>> import jax.numpy as jnp
>>> init = with_partitioning(lambda shape: jnp.zeros(shape), ('data', None))
>>> boxed = init((4, 2))
>>> boxed.get_partition_spec()
P('data', None)
>>> unbox({'w': boxed})['w'].shape
(4, 2)
"""

from __future__ import annotations

import abc
import contextvars
import functools
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from linen.core import struct
from linen.core.errors import LinenError, LogicalAxisRulesError, PartitioningUnspecifiedError

__all__ = [
    'PARTITION_NAME',
    'AxisMetadata',
    'Partitioned',
    'add_axis',
    'constrain',
    'current_variable_path',
    'get_global_mesh',
    'get_partition_spec',
    'get_sharding',
    'global_mesh_defined',
    'is_axis_metadata',
    'legacy_physical_mesh',
    'map_axis_meta',
    'remove_axis',
    'replace_boxed',
    'unbox',
    'with_partitioning',
]

# The key of a lifted transform's ``metadata_params`` that names the new mesh axis.
PARTITION_NAME = 'partition_name'


class AxisMetadata(abc.ABC):
    """Abstract box carrying metadata about the axes of the value it wraps.

    Subclasses are struct dataclasses: declare the value as a pytree field and the
    metadata with ``struct.field(pytree_node=False)``. Flax's spelling,
    ``class Box(struct.PyTreeNode, AxisMetadata)``, works too: the base is not itself
    a ``PyTreeNode``, so the two bases order as in Flax. A subclass that defines its
    own ``__init__`` stays a plain class, as every subclass is in Flax: it sets its
    attributes itself and, to pass through transforms, is registered as a pytree by
    its author (``jax.tree_util.register_pytree_node``).
    """

    def __init_subclass__(cls, **kwargs):
        # A subclass that does not bring PyTreeNode (whose own hook makes the
        # dataclass) and writes no __init__ becomes a struct dataclass here, as it
        # always has in linen (in Flax it could not be constructed with its fields).
        if issubclass(cls, struct.PyTreeNode) or '__init__' in cls.__dict__:
            super().__init_subclass__(**kwargs)
            return
        super().__init_subclass__()
        struct.dataclass(cls, **kwargs)

    @abc.abstractmethod
    def unbox(self) -> Any:
        """Returns the wrapped value."""

    @abc.abstractmethod
    def replace_boxed(self, val: Any) -> AxisMetadata:
        """Returns a box of the same metadata around ``val``."""

    @abc.abstractmethod
    def add_axis(self, index: int, params: Mapping[str, Any]) -> AxisMetadata:
        """Returns the metadata for the value with a new axis inserted at ``index``.

        Args:
            index: where the lifted transform inserts the axis.
            params: the transform's ``metadata_params``.
        """

    @abc.abstractmethod
    def remove_axis(self, index: int, params: Mapping[str, Any]) -> AxisMetadata:
        """Returns the metadata for the value with the axis at ``index`` removed."""


def is_axis_metadata(val: Any) -> bool:
    """True for an :class:`AxisMetadata` box."""
    return isinstance(val, AxisMetadata)


def map_axis_meta(fn: Callable[[AxisMetadata], Any], tree: Any) -> Any:
    """Applies ``fn`` to every box in ``tree``, leaving other leaves unchanged."""
    return jax.tree_util.tree_map(
        lambda x: fn(x) if is_axis_metadata(x) else x, tree, is_leaf=is_axis_metadata
    )


def unbox(tree: Any) -> Any:
    """Strips every box in ``tree``, returning the values."""
    return map_axis_meta(lambda box: box.unbox(), tree)


def replace_boxed(tree: Any, updates: Any) -> Any:
    """Puts the leaves of ``updates`` (an unboxed tree) into the boxes of ``tree``."""
    return jax.tree_util.tree_map(
        lambda box, new: box.replace_boxed(new) if is_axis_metadata(box) else new,
        tree,
        updates,
        is_leaf=is_axis_metadata,
    )


def add_axis(tree: Any, index: int, params: Mapping[str, Any]) -> Any:
    """Calls ``add_axis(index, params)`` on every box in ``tree``."""
    return map_axis_meta(lambda box: box.add_axis(index, params), tree)


def remove_axis(tree: Any, index: int, params: Mapping[str, Any]) -> Any:
    """Calls ``remove_axis(index, params)`` on every box in ``tree``."""
    return map_axis_meta(lambda box: box.remove_axis(index, params), tree)


def _load_legacy_resources() -> Any:
    # `with mesh:` (the pre-`jax.set_mesh` context) is visible through no
    # non-deprecated public API: `jax.sharding.get_abstract_mesh()` stays empty inside
    # it on jax 0.10 and 0.12 alike. `jax.interpreters.pxla.thread_resources` is public
    # but deprecated (accessing it warns), so it is read once here, with that one
    # warning silenced, and the thread-local object is kept. A JAX release that drops
    # it leaves `jax.set_mesh` as the only context consulted.
    from jax.interpreters import pxla

    with warnings.catch_warnings():
        warnings.simplefilter('ignore', DeprecationWarning)
        return getattr(pxla, 'thread_resources', None)


_LEGACY_RESOURCES = _load_legacy_resources()


def legacy_physical_mesh() -> Mesh | None:
    """The mesh of an enclosing legacy ``with mesh:`` block, or ``None``."""
    env = getattr(_LEGACY_RESOURCES, 'env', None)
    physical = getattr(env, 'physical_mesh', None)
    if physical is None or physical.empty:
        return None
    return physical


def get_global_mesh() -> Mesh | jax.sharding.AbstractMesh | None:
    """The context mesh, or ``None``.

    Under ``jax.set_mesh`` this is JAX's abstract mesh (as in Flax: it is what is
    available inside ``jax.jit`` too, and carries the axis names and types); under
    the legacy ``with mesh:`` it is that concrete mesh.
    """
    abstract = jax.sharding.get_abstract_mesh()
    if not abstract.empty:
        return abstract
    return legacy_physical_mesh()


def global_mesh_defined() -> bool:
    """True inside ``jax.set_mesh(...)``/``with mesh:``, where bare PartitionSpecs apply."""
    return not jax.sharding.get_abstract_mesh().empty or legacy_physical_mesh() is not None


def _mesh_axes_of(axes: Any) -> tuple:
    if axes is None or axes is PartitionSpec.UNCONSTRAINED:
        return ()
    if isinstance(axes, str):
        return (axes,)
    return tuple(axes)


def _explicit_axes(mesh: Any) -> set:
    types = getattr(mesh, 'axis_types', None) or ()
    explicit = getattr(jax.sharding.AxisType, 'Explicit', None)
    return {name for name, t in zip(mesh.axis_names, types, strict=False) if t == explicit}


def constrain(x: Any, spec: PartitionSpec, mesh: Mesh | None = None) -> Any:
    """Constrains ``x`` to ``spec`` on ``mesh`` (default: the context mesh).

    On ``Auto`` mesh axes this is ``jax.lax.with_sharding_constraint``. On
    ``Explicit`` axes a constraint is only an assertion in JAX, so ``x`` is moved
    with ``jax.sharding.reshard`` instead; on a mixed mesh the reshard names only the
    explicit axes and leaves the auto ones to the compiler.
    """
    context = mesh if mesh is not None else get_global_mesh()
    explicit = _explicit_axes(context) if context is not None else set()
    if explicit:
        # An explicit axis is part of the array's type; with_sharding_constraint would
        # only assert it, so move the data instead. Auto axes of a mixed mesh cannot be
        # named in reshard's spec, so they are left to the compiler.
        spec = PartitionSpec(
            *(
                tuple(a for a in _mesh_axes_of(e) if a in explicit) or None
                if e is not PartitionSpec.UNCONSTRAINED
                else None
                for e in spec
            )
        )
        # Under the legacy `with mesh:` JAX's abstract mesh is empty and reshard
        # refuses a bare spec, so the concrete context mesh is named.
        on = mesh if mesh is not None else context if isinstance(context, Mesh) else None
        target = NamedSharding(on, spec) if on is not None else spec
        return jax.sharding.reshard(x, target)
    target = NamedSharding(mesh, spec) if mesh is not None else spec
    return jax.lax.with_sharding_constraint(x, target)


def _check_in_mesh(names: tuple, mesh: Any) -> None:
    """Raises, naming the variable path and the axis, for a mesh axis ``mesh`` lacks.

    Flax raises JAX's ``ValueError`` (which names neither) here; its text comes first.
    """
    known = getattr(mesh, 'axis_names', None)
    if known is None:
        return
    for i, entry in enumerate(names):
        for axis in _mesh_axes_of(entry):
            if axis not in known:
                path = current_variable_path()
                where = f' of "{path}"' if path else ''
                raise LogicalAxisRulesError(
                    f'Resource axis: {axis} of {PartitionSpec(*names)} is not found in mesh: '
                    f'{tuple(known)}. Mesh axis {axis!r} is named for dimension {i}{where}. '
                    f'Fix the names given to with_partitioning, or add {axis!r} to the mesh.'
                )


def _hashable_names(names) -> tuple:
    # Names are static pytree metadata, so they must hash: lists become tuples.
    return tuple(tuple(n) if isinstance(n, list) else n for n in names)


def _partition_name(box: AxisMetadata, params: Mapping[str, Any] | None) -> Any:
    if not params or PARTITION_NAME not in params:
        raise PartitioningUnspecifiedError(box)
    return params[PARTITION_NAME]


class Partitioned(AxisMetadata):
    """A value with one mesh-axis name per dimension.

    Attributes:
        value: the wrapped array (a pytree child, so transforms see it).
        names: per dimension, a mesh axis name, a tuple of them, or ``None`` (replicated).
        mesh: the mesh the names refer to; ``None`` means the context mesh.
    """

    value: Any
    names: tuple = struct.field(pytree_node=False)
    mesh: Mesh | None = struct.field(pytree_node=False, default=None)

    def __post_init__(self):
        # Every unflatten runs this: skip the rebuild when names already hash.
        names = self.names
        if type(names) is not tuple or list in map(type, names):
            object.__setattr__(self, 'names', _hashable_names(names))

    def unbox(self, apply_constraint: bool = True) -> Any:
        """Returns the value, sharding-constrained when a mesh is known.

        Args:
            apply_constraint: constrain the value to ``get_partition_spec()`` when
                ``self.mesh`` or a context mesh is set (inside ``jit`` this tells the
                compiler the layout).
        """
        if apply_constraint and (self.mesh is not None or global_mesh_defined()):
            _check_in_mesh(self.names, self.mesh if self.mesh is not None else get_global_mesh())
            return constrain(self.value, self.get_partition_spec(), self.mesh)
        return self.value

    def replace_boxed(self, val: Any) -> Partitioned:
        return self.replace(value=val)

    def get_partition_spec(self) -> PartitionSpec:
        """Returns ``PartitionSpec(*names)``."""
        return PartitionSpec(*self.names)

    def get_sharding(self, mesh: Mesh | None = None) -> NamedSharding:
        """Returns the ``NamedSharding`` of the value on ``self.mesh`` or else ``mesh``."""
        mesh = self.mesh if self.mesh is not None else mesh
        if mesh is None:
            raise ValueError(
                f'Partitioned value with names {self.names} has no mesh: pass one to '
                '`get_sharding(mesh)` or to `with_partitioning(..., mesh=...)`.'
            )
        _check_in_mesh(self.names, mesh)
        return NamedSharding(mesh, self.get_partition_spec())

    def add_axis(self, index: int, params: Mapping[str, Any]) -> Partitioned:
        """Inserts ``params[PARTITION_NAME]`` at ``index`` (padding with ``None`` if short)."""
        axis_name = _partition_name(self, params)
        names = list(self.names)
        while len(names) < index:
            names.append(None)
        names.insert(index, axis_name)
        return self.replace(names=tuple(names))

    def remove_axis(self, index: int, params: Mapping[str, Any]) -> Partitioned:
        """Removes the name at ``index``, which must be ``params[PARTITION_NAME]``."""
        axis_name = _partition_name(self, params)
        names = list(self.names)
        if index >= len(names) or names[index] != axis_name:
            found = names[index] if index < len(names) else '<no axis>'
            raise LinenError(
                f'Cannot remove axis {index} named {axis_name!r} from a Partitioned value '
                f'with names {self.names}: that axis is {found!r}. The lifted transform '
                'must get the same metadata_params as the one that added the axis.'
            )
        names.pop(index)
        return self.replace(names=tuple(names))


def with_partitioning(
    fn: Callable[..., Any], names: tuple, mesh: Mesh | None = None
) -> Callable[..., Partitioned]:
    """Wraps an initializer so that its output is boxed in :class:`Partitioned`."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return Partitioned(fn(*args, **kwargs), names, mesh=mesh)

    return wrapper


def get_partition_spec(tree: Any) -> Any:
    """Maps boxes to their PartitionSpec, other arrays to ``PartitionSpec()`` (replicated).

    Leaves without a shape (Python scalars, strings) map to ``None``.
    """

    def spec(x):
        if is_axis_metadata(x) and hasattr(x, 'get_partition_spec'):
            return x.get_partition_spec()
        if hasattr(x, 'shape'):
            return PartitionSpec()
        return None

    return jax.tree_util.tree_map(spec, tree, is_leaf=is_axis_metadata)


def _key_text(key: Any) -> str:
    for attr in ('key', 'name', 'idx'):
        if hasattr(key, attr):
            return str(getattr(key, attr))
    return str(key)


# The tree path of the variable being mapped by get_sharding, so that a box's
# complaint (a bad rule, a rank mismatch) can name the parameter it belongs to.
_VARIABLE_PATH: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    'linen_variable_path', default=None
)


def current_variable_path() -> str | None:
    """The path (``params/Dense_0/kernel``) of the box ``get_sharding`` is mapping, if any."""
    return _VARIABLE_PATH.get()


def get_sharding(tree: Any, mesh: Mesh) -> Any:
    """Maps boxes to their ``NamedSharding`` on ``mesh``, other arrays to replicated."""

    def sharding(key_path, x):
        if is_axis_metadata(x) and hasattr(x, 'get_sharding'):
            token = _VARIABLE_PATH.set('/'.join(_key_text(k) for k in key_path))
            try:
                return x.get_sharding(mesh)
            finally:
                _VARIABLE_PATH.reset(token)
        if hasattr(x, 'shape'):
            return NamedSharding(mesh, PartitionSpec())
        return None

    return jax.tree_util.tree_map_with_path(sharding, tree, is_leaf=is_axis_metadata)
