"""The linen-transforms plugin: contributes the lifted transforms to ``linen.nn``."""

from __future__ import annotations

from linen.core.hookspecs import hookimpl


@hookimpl
def linen_exports():
    from linen.transforms._exports import NAMES

    # The surface (``_api``) and ``lift``; the lift-level names (``In``, ``Out``,
    # ``lift_transform``) stay out of linen.nn, as flax.linen has none of them.
    return NAMES.exports((*NAMES.defined_in('._api'), 'lift'), transforms='linen.transforms')


@hookimpl(tryfirst=True)
def linen_method_wrapper():
    """Trace reuse's wrapper while it is on (``_reuse.py``); outermost, so an
    instance's profiling label goes outside the program it reuses."""
    from linen.transforms._reuse import reuse_wrapper

    return reuse_wrapper()
