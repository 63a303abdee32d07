"""Type aliases for annotations, under the names Flax's ``flax.typing`` gives them.

Code annotated with Flax's aliases (``from flax.typing import Array, PRNGKey,
VariableDict``) keeps its annotations with ``from linen.core.typing import ...``;
``linen.core.scope`` offers the ones ``flax.core.scope`` does. These are
annotations only: nothing in linen checks values against them.

>>> from linen.core.typing import FrozenVariableDict, VariableDict
>>> from linen.core import freeze
>>> variables: FrozenVariableDict = freeze({'params': {'w': 1.0}})
>>> isinstance(variables, VariableDict.__origin__)
True
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import jax
import numpy as np
from jax import lax

from linen.core.frozen_dict import FrozenDict as FrozenDict

__all__ = [
    'Array',
    'ArrayPytree',
    'Axes',
    'Axis',
    'AxisName',
    'Collection',
    'ConvGeneralDilatedT',
    'DotGeneralT',
    'Dtype',
    'EinsumT',
    'FrozenDict',
    'FrozenVariableDict',
    'InOutAxis',
    'InOutScanAxis',
    'Initializer',
    'Key',
    'LaxPadding',
    'Leaf',
    'LogicalNames',
    'LogicalPartitionSpec',
    'LogicalPartitionSpecPytree',
    'LogicalRules',
    'MutableCollection',
    'MutableVariableDict',
    'PRNGFoldable',
    'PRNGKey',
    'PaddingLike',
    'PartitionSpecPytree',
    'Path',
    'PathParts',
    'PrecisionLike',
    'PromoteDtypeFn',
    'RNGSequences',
    'ScanAxis',
    'Shape',
    'Sharding',
    'VariableDict',
]

# Arrays and keys.
Array = jax.Array | Any
ArrayPytree = Any
PRNGKey = jax.Array
RNGSequences = dict[str, PRNGKey]
PRNGFoldable = int | str
Dtype = str | type[Any] | np.dtype | Any
Shape = Sequence[int]
Leaf = Any

# Axes.
Axes = int | Sequence[int]
Axis = int | None
AxisName = str | tuple[str, ...] | None
ScanAxis = int
# Flax's union also names the lifting markers ``In``/``Out`` (linen-transforms'
# ``linen.nn.transforms.In``), which linen-core does not import: any value goes.
InOutAxis = int | None | Any
InOutScanAxis = int | Any

# Layers.
Initializer = jax.nn.initializers.Initializer | Callable[..., Any]
PrecisionLike = None | str | lax.Precision | tuple[str, str] | tuple[lax.Precision, lax.Precision]
DotGeneralT = Callable[..., Array]
ConvGeneralDilatedT = Callable[..., Array]
EinsumT = Callable[..., Array]
PaddingLike = str | int | Sequence[int | tuple[int, int]]
LaxPadding = str | Sequence[tuple[int, int]]


_TupleArg = TypeVar('_TupleArg', bound=tuple)


class PromoteDtypeFn(Protocol):
    """A layer's ``promote_dtype``: its arrays (a tuple) cast to one dtype, as a tuple."""

    def __call__(
        self, args: _TupleArg, /, *, dtype: Any = None, inexact: bool = True
    ) -> _TupleArg: ...


# Variables.
Collection = Mapping[str, Any]
MutableCollection = dict[str, Any]
VariableDict = Mapping[str, Collection]
FrozenVariableDict = FrozenDict[str, Collection]
MutableVariableDict = dict[str, MutableCollection]

# Paths in variable trees.
Key = Hashable
Path = str
PathParts = tuple[Key, ...]

# Partitioning.
LogicalNames = tuple[str | None, ...]
LogicalRules = Sequence[tuple[str, str | tuple[str, ...] | None]]
LogicalPartitionSpec = Any
LogicalPartitionSpecPytree = Any
PartitionSpecPytree = Any
Sharding = tuple[AxisName, ...]
