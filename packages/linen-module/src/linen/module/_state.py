"""Per-instance bookkeeping of a Module and the per-thread module stack."""

from __future__ import annotations

import threading


class ModuleState:
    """Where a module instance is in its life: setup done, inside compact, names used."""

    __slots__ = (
        'in_setup',
        'setup_called',
        'in_compact_method',
        'autoname_cursor',
        'children',
        'compact_children',
    )

    def __init__(self) -> None:
        self.in_setup = False
        self.setup_called = False
        self.in_compact_method = False
        self.autoname_cursor: dict[str, int] = {}
        # name -> submodule, or the collection name of a variable
        self.children: dict[str, object] = {}
        # names of submodules made inline by a @compact method: a later call of
        # that method makes them again under the same names (shared variables).
        self.compact_children: set[str] = set()

    def reset_compact(self) -> None:
        # (the dispatcher inlines these two lines on its hot path)
        self.in_compact_method = False
        self.autoname_cursor = {}


class _Stack(threading.local):
    def __init__(self) -> None:
        self.modules: list = []


_stack = _Stack()


def module_stack() -> list:
    """The modules whose wrapped methods are running in this thread, innermost last."""
    return _stack.modules
