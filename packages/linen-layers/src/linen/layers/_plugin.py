"""The linen-layers plugin: contributes every layer to ``linen.nn``."""

from __future__ import annotations

from linen.core.hookspecs import hookimpl


@hookimpl
def linen_exports():
    from linen.layers._exports import NAMES

    return NAMES.exports()
