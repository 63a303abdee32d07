"""linen.core: the functional core that Linen Modules stand on (API of ``flax.core``).

Variables live in collections (``params``, ``batch_stats``, ...) addressed by
module path; a :class:`Scope` is the view of one path, with rng streams that
follow Flax's derivation rule. ``init``/``apply``/``bind`` turn a function of a
scope into a function of variables.
"""

from __future__ import annotations

import importlib as _importlib
from typing import TYPE_CHECKING

from linen.core import errors as errors
from linen.core.__about__ import __version__ as __version__
from linen.core._filters import DenyList as DenyList
from linen.core._filters import group_collections as group_collections
from linen.core._filters import in_filter as in_filter
from linen.core._filters import intersect_filters as intersect_filters
from linen.core._filters import subtract_filters as subtract_filters
from linen.core._filters import union_filters as union_filters
from linen.core._plugins import get_plugin_manager as get_plugin_manager
from linen.core._plugins import load_errors as plugin_load_errors
from linen.core._plugins import register as register_plugin
from linen.core._plugins import unregister as unregister_plugin
from linen.core._rng import LazyRng as LazyRng
from linen.core._scope import Array as Array
from linen.core._scope import Scope as Scope
from linen.core._scope import Variable as Variable
from linen.core._scope import apply as apply
from linen.core._scope import bind as bind
from linen.core._scope import init as init
from linen.core._scope import lazy_init as lazy_init
from linen.core.config import config as config
from linen.core.hookspecs import hookimpl as hookimpl

# Names from modules that import heavier dependencies resolve on first use.
_LAZY = {
    'FrozenDict': 'linen.core.frozen_dict',
    'freeze': 'linen.core.frozen_dict',
    'unfreeze': 'linen.core.frozen_dict',
    'copy': 'linen.core.frozen_dict',
    'pop': 'linen.core.frozen_dict',
    'pretty_repr': 'linen.core.frozen_dict',
    'AxisMetadata': 'linen.core.meta',
    'Partitioned': 'linen.core.meta',
    'PARTITION_NAME': 'linen.core.meta',
    'with_partitioning': 'linen.core.meta',
    'unbox': 'linen.core.meta',
    'replace_boxed': 'linen.core.meta',
    'get_partition_spec': 'linen.core.meta',
    'get_sharding': 'linen.core.meta',
    'meta': None,
    'struct': None,
    'serialization': None,
    'spmd': None,
    'frozen_dict': None,
    'scope': None,
    'traverse_util': None,
}


if TYPE_CHECKING:  # what the lazy names below resolve to, for type checkers and IDEs
    from linen.core import frozen_dict as frozen_dict
    from linen.core import meta as meta
    from linen.core import scope as scope
    from linen.core import serialization as serialization
    from linen.core import spmd as spmd
    from linen.core import struct as struct
    from linen.core import traverse_util as traverse_util
    from linen.core.frozen_dict import FrozenDict as FrozenDict
    from linen.core.frozen_dict import copy as copy
    from linen.core.frozen_dict import freeze as freeze
    from linen.core.frozen_dict import pop as pop
    from linen.core.frozen_dict import pretty_repr as pretty_repr
    from linen.core.frozen_dict import unfreeze as unfreeze
    from linen.core.meta import PARTITION_NAME as PARTITION_NAME
    from linen.core.meta import AxisMetadata as AxisMetadata
    from linen.core.meta import Partitioned as Partitioned
    from linen.core.meta import get_partition_spec as get_partition_spec
    from linen.core.meta import get_sharding as get_sharding
    from linen.core.meta import replace_boxed as replace_boxed
    from linen.core.meta import unbox as unbox
    from linen.core.meta import with_partitioning as with_partitioning

__all__ = [
    '__version__',
    'Array',
    'LazyRng',
    'group_collections',
    'scope',
    'AxisMetadata',
    'PARTITION_NAME',
    'Partitioned',
    'get_partition_spec',
    'get_sharding',
    'replace_boxed',
    'unbox',
    'with_partitioning',
    'DenyList',
    'FrozenDict',
    'Scope',
    'Variable',
    'apply',
    'bind',
    'config',
    'copy',
    'errors',
    'freeze',
    'get_plugin_manager',
    'hookimpl',
    'in_filter',
    'init',
    'intersect_filters',
    'lazy_init',
    'meta',
    'plugin_load_errors',
    'pop',
    'pretty_repr',
    'register_plugin',
    'serialization',
    'spmd',
    'struct',
    'traverse_util',
    'subtract_filters',
    'unfreeze',
    'union_filters',
    'unregister_plugin',
]


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'linen.core' has no attribute {name!r}")
    module_name = _LAZY[name]
    if module_name is None:
        value = _importlib.import_module(f'linen.core.{name}')
    else:
        value = getattr(_importlib.import_module(module_name), name)
    globals()[name] = value
    return value
