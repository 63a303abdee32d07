"""The linen-transforms plugin: contributes the lifted transforms to ``linen.nn``."""

from __future__ import annotations

from linen.core.hookspecs import hookimpl


@hookimpl
def linen_exports():
    from linen.transforms._exports import NAMES

    # The surface (``_api``) and ``lift``; the lift-level names (``In``, ``Out``,
    # ``lift_transform``) stay out of linen.nn, as flax.linen has none of them.
    return NAMES.exports((*NAMES.defined_in('._api'), 'lift'), transforms='linen.transforms')
