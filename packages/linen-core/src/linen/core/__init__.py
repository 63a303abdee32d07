"""linen.core."""

from linen.core.__about__ import __version__ as __version__

__all__ = ["__version__"]
