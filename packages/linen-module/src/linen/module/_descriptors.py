"""Properties and custom descriptors of Module classes whose getters may fail.

Python answers an ``AttributeError`` raised inside a property's getter by calling
``Module.__getattr__``, which would report the property itself as missing. Each
descriptor a Module class defines is wrapped so that the error names the attribute
the getter actually failed on (:class:`~linen.core.errors.DescriptorAttributeError`),
as Flax reports it.
"""

from __future__ import annotations

import dataclasses
import functools
import types
from typing import Any

from linen.core import errors


class _GuardedDescriptor:
    """A property (or custom descriptor) of a Module class whose getter may fail.

    An ``AttributeError`` raised inside a getter would make Python fall back to
    ``Module.__getattr__`` and report the property itself as missing; here it
    becomes :class:`~linen.core.errors.DescriptorAttributeError` naming the
    attribute the getter failed on, as Flax reports it.
    """

    def __init__(self, descriptor: Any, name: str):
        self.wrapped = descriptor
        self.name = name

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        try:
            return self.wrapped.__get__(obj, objtype)
        except AttributeError as exc:
            if obj is None:
                raise
            raise errors.DescriptorAttributeError(type(obj).__name__, self.name, str(exc)) from exc

    def __set_name__(self, owner: Any, name: str) -> None:
        set_name = getattr(self.wrapped, '__set_name__', None)
        if set_name is not None:
            set_name(owner, name)

    def __getattr__(self, name: str) -> Any:
        # fget, __doc__, __isabstractmethod__, ... of the wrapped descriptor. While
        # unpickling (``__setstate__`` looked up before the state is set) there is
        # no wrapped descriptor yet.
        wrapped = self.__dict__.get('wrapped')
        if wrapped is None:
            raise AttributeError(name)
        return getattr(wrapped, name)


class _GuardedDataDescriptor(_GuardedDescriptor):
    def __set__(self, obj: Any, value: Any) -> None:
        self.wrapped.__set__(obj, value)

    def __delete__(self, obj: Any) -> None:
        self.wrapped.__delete__(obj)


def guard_descriptors(cls: type) -> None:
    """Wrap each property or custom descriptor ``cls`` defines in a :class:`_GuardedDescriptor`."""
    for name, value in list(cls.__dict__.items()):
        if name.startswith('__') or isinstance(
            value, (types.FunctionType, staticmethod, classmethod, type, _GuardedDescriptor)
        ):
            continue
        if not hasattr(type(value), '__get__') or isinstance(value, dataclasses.Field):
            continue
        if not isinstance(value, (property, functools.cached_property)) and (
            type(value).__module__ == 'builtins'
        ):
            continue  # builtin method descriptors and the like
        if hasattr(type(value), '__set__') or hasattr(type(value), '__delete__'):
            guard = _GuardedDataDescriptor(value, name)
        else:
            guard = _GuardedDescriptor(value, name)
        type.__setattr__(cls, name, guard)
