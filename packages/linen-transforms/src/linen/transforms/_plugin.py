"""The linen-transforms plugin: contributes the lifted transforms to ``linen.nn``."""

from __future__ import annotations

from linen.core.hookspecs import hookimpl


@hookimpl
def linen_exports():
    from linen.transforms._exports import NAMES

    return NAMES.exports(transforms='linen.transforms')
