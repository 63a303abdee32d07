"""linen.layers: the Flax Linen layer set.

Names are resolved lazily (``_names.LOCATION``), so ``import linen.layers`` is
cheap and each family of layers is imported on first use.
"""

from __future__ import annotations

import importlib

from linen.layers.__about__ import __version__ as __version__
from linen.layers._names import LOCATION as _LOCATION

__all__ = ['__version__', *sorted(_LOCATION)]


def __getattr__(name: str):
    target = _LOCATION.get(name)
    if target is None:
        raise AttributeError(f"module 'linen.layers' has no attribute {name!r}")
    module_name, _, attr = target.partition(':')
    value = importlib.import_module(module_name)
    if attr:
        value = getattr(value, attr)
    globals()[name] = value
    return value


def __dir__():
    return __all__
