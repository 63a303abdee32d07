"""Per-instance bookkeeping of a Module and the per-thread module stack."""

from __future__ import annotations

import threading


class ModuleState:
    """Where a module instance is in its life: setup done, inside compact, names used."""

    __slots__ = (
        'initialized',
        'in_setup',
        'setup_called',
        'in_compact_method',
        'autoname_cursor',
        'children',
        'compact_children',
        'field_origins',
    )

    def __init__(self) -> None:
        # False until ``__post_init__`` has attached (or bound) the instance: until
        # then attributes may be set, as in a plain dataclass's ``__post_init__``,
        # and an adopted field's own fields may still attach to it.
        self.initialized = False
        self.in_setup = False
        self.setup_called = False
        self.in_compact_method = False
        self.autoname_cursor: dict[str, int] = {}
        # name -> submodule, or the collection name of a variable
        self.children: dict[str, object] = {}
        # names of submodules made inline by a @compact method: a later call of
        # that method makes them again under the same names (shared variables).
        self.compact_children: set[str] = set()
        # field name -> its value before adoption replaced it (clone starts from it)
        self.field_origins: dict[str, object] | None = None


class _Stack(threading.local):
    def __init__(self) -> None:
        self.modules: list = []


_stack = _Stack()


def module_stack() -> list:
    """The modules whose wrapped methods are running in this thread, innermost last."""
    return _stack.modules
