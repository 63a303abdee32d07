"""The base class of linen's errors and the helpers their messages share.

Public as :mod:`linen.core.errors`, which re-exports every class.
"""

from __future__ import annotations


def _restore_error(cls: type[BaseException], args: tuple, state: dict) -> BaseException:
    # Subclasses take their own constructor arguments (a plugin name, a shape, ...),
    # not the message, so unpickling rebuilds the instance without calling __init__.
    err = cls.__new__(cls, *args)
    err.args = args
    vars(err).update(state)
    return err


class LinenError(Exception):
    """Base class of every error linen raises on purpose.

    Every subclass pickles with its message and attributes (multiprocessing and
    pytest-xdist send exceptions between processes), whatever its ``__init__`` takes.
    """

    def __init__(self, message: str):
        super().__init__(message)

    def __reduce__(self):
        return _restore_error, (type(self), self.args, dict(self.__dict__))


FlaxError = LinenError


def _where(path: str | None) -> str:
    return f'"/{path}"' if path else 'the root'


def _flax_path(path: str | None) -> str:
    # Flax's spelling of a scope path in its messages: "/" is the root.
    return f'"/{path or ""}"'
