"""The method decorators: ``compact``, ``nowrap``, ``compact_name_scope``."""

from __future__ import annotations

from collections.abc import Callable


def compact(fun: Callable) -> Callable:
    """Mark the one method of a class that may define submodules and variables inline."""
    fun.compact = True  # type: ignore[attr-defined]
    return fun


def nowrap(fun: Callable) -> Callable:
    """Mark a helper method that the dispatcher must not wrap (no setup, no labels)."""
    fun.nowrap = True  # type: ignore[attr-defined]
    return fun


def compact_name_scope(fun: Callable) -> Callable:
    """Let a method of a ``setup``-style module define submodules inline, under its own name.

    Submodules and variables created in ``fun`` live at ``<module path>/<fun name>/``.
    """
    fun.compact_name_scope = True  # type: ignore[attr-defined]
    return fun
