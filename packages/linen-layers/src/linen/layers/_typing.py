"""The type aliases Flax's layer modules carry (``flax.typing``'s).

Flax code imports them through the layer modules (``from flax.linen.linear import
Array, Dtype, PrecisionLike``), so each public namespace of this package offers the
ones its Flax counterpart has, besides its ``__all__``. They are
``linen.core.typing``'s, plus the recurrent cells' own. Annotations only: nothing
in linen checks a value against them.
"""

from __future__ import annotations

from typing import Any

from linen.core.typing import Array as Array
from linen.core.typing import ArrayPytree as ArrayPytree
from linen.core.typing import Axes as Axes
from linen.core.typing import ConvGeneralDilatedT as ConvGeneralDilatedT
from linen.core.typing import DotGeneralT as DotGeneralT
from linen.core.typing import Dtype as Dtype
from linen.core.typing import Initializer as Initializer
from linen.core.typing import LaxPadding as LaxPadding
from linen.core.typing import LogicalPartitionSpec as LogicalPartitionSpec
from linen.core.typing import LogicalPartitionSpecPytree as LogicalPartitionSpecPytree
from linen.core.typing import PartitionSpecPytree as PartitionSpecPytree
from linen.core.typing import PrecisionLike as PrecisionLike
from linen.core.typing import PRNGKey as PRNGKey
from linen.core.typing import PromoteDtypeFn as PromoteDtypeFn
from linen.core.typing import Shape as Shape

# The recurrent cells' carry and outputs.
Carry = Any
CarryHistory = Any
Output = Any
