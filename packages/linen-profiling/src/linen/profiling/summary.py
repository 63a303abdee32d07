"""``nn.summary``: where Flax code reaches for ``tabulate`` (``flax.linen.summary``).

Only the public entry point is here; Flax's ``Row``/``Table`` records are internal to its
table renderer and have no counterpart.
"""

from __future__ import annotations

from linen.core import DenyList as DenyList
from linen.core import LazyRng as LazyRng
from linen.core import unfreeze as unfreeze
from linen.core.scope import CollectionFilter as CollectionFilter
from linen.core.typing import Array as Array
from linen.core.typing import LogicalNames as LogicalNames
from linen.module import FrozenVariableDict as FrozenVariableDict
from linen.module import MutableVariableDict as MutableVariableDict
from linen.module import PRNGKey as PRNGKey
from linen.module import RNGSequences as RNGSequences
from linen.profiling._tabulate import tabulate as tabulate

# Some imports above are not in `__all__`: the typing aliases and core names
# flax.linen.summary has through its own imports, kept for Flax code that reaches them
# through this module (`from flax.linen.summary import RNGSequences`).
__all__ = ['tabulate']
