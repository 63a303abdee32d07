"""linen.transforms."""

from linen.transforms.__about__ import __version__ as __version__

__all__ = ["__version__"]
