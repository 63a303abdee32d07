"""The linen-core plugin: contributes the core's names to ``linen.nn``."""

from __future__ import annotations

from linen.core.hookspecs import hookimpl


@hookimpl
def linen_exports():
    from linen.core._exports import FACADE, NAMES, SPMD_FACADE

    return NAMES.exports(FACADE, **{name: f'linen.core.spmd:{name}' for name in SPMD_FACADE})
