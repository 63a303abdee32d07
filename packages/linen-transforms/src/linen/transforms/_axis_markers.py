"""``In`` and ``Out``: a ``variable_axes`` entry that lifts a collection one way only.

``variable_axes={'params': In(1)}`` hands the body the stacked parameters (axis 1)
but does not let it write them, and nothing comes back out; ``Out(0)`` hides the
collection from the body and stacks what the body writes on axis 0. A plain
integer means both. These are Flax's lift-level markers (``flax.core.lift.In``,
re-exported by the legacy partitioning API as ``ScanIn``/``ScanOut``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

T = TypeVar('T')


@dataclasses.dataclass(frozen=True)
class In(Generic[T]):
    """The collection is lifted as input only, along ``axis``."""

    axis: T


@dataclasses.dataclass(frozen=True)
class Out(Generic[T]):
    """The collection is lifted as output only, along ``axis``."""

    axis: T


class SplitAxes:
    """``variable_axes`` split by direction (insertion order kept, markers unwrapped).

    ``in_only`` and ``out_only`` hold the filters marked ``In`` and ``Out``: the
    first are read-only inside the transform, the second invisible there.
    """

    __slots__ = ('inputs', 'outputs', 'in_only', 'out_only')

    def __init__(self, variable_axes: Mapping[Any, Any]):
        self.inputs = {f: _unwrap(ax) for f, ax in variable_axes.items() if not isinstance(ax, Out)}
        self.outputs = {f: _unwrap(ax) for f, ax in variable_axes.items() if not isinstance(ax, In)}
        self.in_only = tuple(f for f, ax in variable_axes.items() if isinstance(ax, In))
        self.out_only = tuple(f for f, ax in variable_axes.items() if isinstance(ax, Out))


def _unwrap(axis: Any) -> Any:
    return axis.axis if isinstance(axis, (In, Out)) else axis


for _cls in (In, Out):
    _cls.__module__ = 'linen.transforms'
