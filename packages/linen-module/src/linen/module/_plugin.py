"""The linen-module plugin: what this distribution adds to the `linen` bus."""

from __future__ import annotations

from linen.core.hookspecs import hookimpl


@hookimpl
def linen_exports():
    return {}
