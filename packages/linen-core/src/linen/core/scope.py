"""The names ``flax.core.scope`` offers, for code that imports them from there.

Its type aliases (``VariableDict``, ``FrozenVariableDict``, ``PRNGKey``, ...) are
``linen.core.typing``'s, importable from here as from Flax's module.

>>> from linen.core.scope import Scope, LazyRng, in_filter
>>> in_filter(['params'], 'params')
True
"""

from __future__ import annotations

from linen.core._binding import apply as apply
from linen.core._binding import bind as bind
from linen.core._binding import init as init
from linen.core._binding import lazy_init as lazy_init
from linen.core._filters import CollectionFilter as CollectionFilter
from linen.core._filters import DenyList as DenyList
from linen.core._filters import Filter as Filter
from linen.core._filters import filter_to_set as filter_to_set
from linen.core._filters import group_collections as group_collections
from linen.core._filters import in_filter as in_filter
from linen.core._filters import intersect_filters as intersect_filters
from linen.core._filters import is_filter_empty as is_filter_empty
from linen.core._filters import subtract_filters as subtract_filters
from linen.core._filters import union_filters as union_filters
from linen.core._rng import LazyRng as LazyRng
from linen.core._scope import Array as Array
from linen.core._scope import Scope as Scope
from linen.core._scope import Variable as Variable
from linen.core.typing import Collection as Collection
from linen.core.typing import FrozenVariableDict as FrozenVariableDict
from linen.core.typing import MutableCollection as MutableCollection
from linen.core.typing import MutableVariableDict as MutableVariableDict
from linen.core.typing import PRNGFoldable as PRNGFoldable
from linen.core.typing import PRNGKey as PRNGKey
from linen.core.typing import RNGSequences as RNGSequences
from linen.core.typing import VariableDict as VariableDict

# Flax's name for a filter of rng streams (the same filters as collections').
PRNGSequenceFilter = CollectionFilter

__all__ = [
    'Array',
    'CollectionFilter',
    'DenyList',
    'Filter',
    'LazyRng',
    'Scope',
    'Variable',
    'apply',
    'bind',
    'filter_to_set',
    'group_collections',
    'in_filter',
    'init',
    'intersect_filters',
    'is_filter_empty',
    'lazy_init',
    'subtract_filters',
    'union_filters',
]
