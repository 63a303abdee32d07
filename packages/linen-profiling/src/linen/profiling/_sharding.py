"""How each parameter is laid out on a mesh: the sharding columns of ``tabulate``.

For a variable boxed with sharding metadata (``nn.with_partitioning``:
mesh axis names; ``nn.with_logical_partitioning``: logical names mapped to mesh
axes by the rules), the mesh ``PartitionSpec`` gives, per dimension, the mesh
axes it is split over. A device then holds ``ceil(size / product of those axes'
sizes)`` of that dimension, and the array is replicated on ``mesh size /
product of all the axes used`` devices. A variable without metadata is whole on
every device. Nothing here touches devices: shapes and the mesh's axis sizes
are enough.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from linen.profiling._report import bytes_text
from linen.profiling.errors import ReplicatedParametersWarning

__all__ = [
    'Layout',
    'check_replicated',
    'context_mesh',
    'layout_of',
    'parameter_layouts',
    'sharding_cells',
]


@dataclass(frozen=True)
class Layout:
    """One variable's layout: logical names, mesh spec, bytes per device, replication."""

    logical: tuple | None  # None: the box has mesh names only (or there is no box)
    spec: tuple  # mesh axes per dimension (None: not split)
    bytes_per_device: int
    replication: int
    total_bytes: int
    unknown_axes: tuple[str, ...] = ()  # named by the spec, absent from the mesh


def context_mesh() -> Any:
    """The mesh of ``jax.set_mesh`` or a legacy ``with mesh:`` block, else ``None``."""
    from linen.core.meta import get_global_mesh

    mesh = get_global_mesh()
    if mesh is None or not getattr(mesh, 'shape', None):
        return None
    return mesh


def _axes(entry: Any) -> tuple[str, ...]:
    if entry is None:
        return ()
    if isinstance(entry, (tuple, list)):
        return tuple(a for a in entry if a is not None)
    return (entry,)


def layout_of(boxed: Any, mesh: Any) -> Layout:
    """The :class:`Layout` of one variable (boxed or a bare array) on ``mesh``."""
    from linen.core.spmd import LogicallyPartitioned

    value = getattr(boxed, 'value', boxed) if not hasattr(boxed, 'shape') else boxed
    shape = tuple(int(d) for d in value.shape)
    itemsize = value.dtype.itemsize
    total = math.prod(shape) * itemsize
    names = getattr(boxed, 'names', None) if not hasattr(boxed, 'shape') else None
    mesh = getattr(boxed, 'mesh', None) or mesh
    logical = None
    if names is None:
        spec: tuple = (None,) * len(shape)
    elif isinstance(boxed, LogicallyPartitioned):
        logical = tuple(names)
        spec = tuple(boxed.get_mesh_partition_spec())
        spec = spec + (None,) * (len(shape) - len(spec))
    else:
        spec = tuple(names)
    sizes = dict(mesh.shape) if mesh is not None else {}
    local = []
    used: set[str] = set()
    unknown: list[str] = []
    for dim, entry in zip(shape, spec, strict=False):
        split = 1
        for axis in _axes(entry):
            if sizes and axis not in sizes:
                unknown.append(axis)
            split *= sizes.get(axis, 1)
            used.add(axis)
        local.append(-(-dim // split))
    devices = math.prod(sizes.values()) if sizes else 1
    split_total = math.prod(sizes.get(axis, 1) for axis in used)
    return Layout(
        logical=logical,
        spec=spec,
        bytes_per_device=math.prod(local) * itemsize,
        replication=max(devices // max(split_total, 1), 1),
        total_bytes=total,
        unknown_axes=tuple(dict.fromkeys(unknown)),
    )


def spec_text(spec: tuple) -> str:
    """``P('data', None)``-style text of a spec."""
    return 'P(' + ', '.join(repr(entry) for entry in spec) + ')'


def check_replicated(
    layouts: Mapping[str, Layout], devices: int, tolerance: float, largest: int = 3
) -> None:
    """Warn when parameters held whole on every device exceed ``tolerance`` of all parameters.

    A parameter split over no mesh axis is a full copy on each of the
    ``devices``; parameters split over some axes and copied over others (data
    parallel over one axis, sharded over another) are a layout choice and do
    not count.
    """
    if devices <= 1:
        return
    total = sum(layout.total_bytes for layout in layouts.values())
    whole = {
        path: layout
        for path, layout in layouts.items()
        if layout.replication >= devices and layout.total_bytes
    }
    replicated = sum(layout.total_bytes for layout in whole.values())
    if total and replicated > tolerance * total:
        offenders = sorted(whole.items(), key=lambda item: -item[1].total_bytes)[:largest]
        warnings.warn(
            ReplicatedParametersWarning(
                replicated,
                total,
                tolerance,
                tuple(
                    (path, layout.bytes_per_device, layout.replication)
                    for path, layout in offenders
                ),
            ),
            stacklevel=4,
        )


def parameter_layouts(variables: Mapping, mesh: Any) -> dict[str, Layout]:
    """Layout of every parameter, by ``'path/to/name'``."""
    result = {}

    def visit(node: Mapping, prefix: str) -> None:
        for name, value in node.items():
            path = f'{prefix}/{name}' if prefix else str(name)
            if isinstance(value, Mapping):
                visit(value, path)
            elif hasattr(
                (getattr(value, 'value', value) if not hasattr(value, 'shape') else value), 'shape'
            ):
                result[path] = layout_of(value, mesh)

    visit(variables.get('params', {}), '')
    return result


def sharding_cells(layouts: list[tuple[str, Layout]], mesh_known: bool) -> list[str]:
    """The four sharding cells of a row: one line per parameter, in the params cell's order."""
    logical, specs, per_device, replication = [], [], [], []
    for name, layout in layouts:
        logical.append(f'{name}: {layout.logical}' if layout.logical is not None else f'{name}: -')
        specs.append(f'{name}: {spec_text(layout.spec)}')
        per_device.append(
            f'{name}: {bytes_text(layout.bytes_per_device)}' if mesh_known else f'{name}: n/a'
        )
        replication.append(f'{name}: x{layout.replication}' if mesh_known else f'{name}: n/a')
    return ['\n'.join(cells) for cells in (logical, specs, per_device, replication)]
