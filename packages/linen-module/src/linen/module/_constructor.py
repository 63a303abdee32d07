"""A Module class's generated methods: ``__init__``, ``__eq__`` and ``__hash__``.

Flax makes a Module subclass a dataclass with ``eq=True`` and ``unsafe_hash=True``.
``dataclasses`` compiles each generated method from source, one ``exec`` apiece:
most of the cost of creating a Module class, paid for every layer a program
imports. Here ``dataclasses`` only collects the fields and writes ``__init__``;
``__eq__`` and the tuple ``__hash__`` hashes come from attribute getters, with the
semantics of the generated methods. The ``__init__`` is then replaced by one that
writes the instance ``__dict__`` directly: the dataclass's stores each field with
``self.x = x``, a call of ``Module.__setattr__`` per field, paid by every module
made inline in a compact method on every call of its parent.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import operator
from collections.abc import Callable
from typing import Any

from linen.core import errors

__all__ = ['add_eq_and_hash', 'replace_dataclass_init']


def _tuple_getter(names: list[str]) -> Callable[[Any], tuple]:
    if len(names) > 1:
        return operator.attrgetter(*names)
    if names:
        one = operator.attrgetter(names[0])
        return lambda obj: (one(obj),)
    return lambda obj: ()


def _is_hashed(field: dataclasses.Field) -> bool:
    return field.compare if field.hash is None else bool(field.hash)


def add_eq_and_hash(cls: type) -> None:
    """Give Module class ``cls`` the ``__eq__`` and ``__hash__`` of Flax's dataclass.

    As ``dataclasses`` does: an ``__eq__`` the class body defines is kept, and
    the one made here compares the fields with ``compare=True`` as tuples between
    instances of the same class. Flax asks for ``unsafe_hash`` unless the body
    defines ``__hash__`` (or ``__eq__`` alone, which makes Python set it to
    ``None``): then the class hashes the tuple of fields with ``hash=True``, or
    ``hash=None`` and ``compare=True``; otherwise the body's own ``__hash__``
    stands. Either way, as in Flax, a bound module is not hashable (its variables
    may change), and a failing hash raises Flax's text, here naming its cause.
    ``__dataclass_params__`` then reads as Flax's.
    """
    own = cls.__dict__
    fields = dataclasses.fields(cls)
    if '__eq__' not in own:
        compared = _tuple_getter([f.name for f in fields if f.compare])

        def __eq__(self, other):
            if self is other:
                return True
            if other.__class__ is self.__class__:
                return compared(self) == compared(other)
            return NotImplemented

        __eq__.__qualname__ = f'{cls.__qualname__}.__eq__'
        __eq__.__module__ = cls.__module__
        cls.__eq__ = __eq__  # type: ignore[method-assign]
    unsafe_hash = '__hash__' not in own
    _set_params(cls, eq=True, unsafe_hash=unsafe_hash)
    if unsafe_hash:
        hashed = _tuple_getter([f.name for f in fields if _is_hashed(f)])

        def body_hash(module):
            return hash(hashed(module))

    else:
        body_hash = own['__hash__']  # the class body's, or None: unhashable

    def __hash__(self) -> int:
        if self.__dict__.get('scope') is not None:
            raise errors.HashBoundModuleError()
        try:
            return body_hash(self)  # type: ignore[misc]
        except TypeError as exc:
            raise _unhashable(self, body_hash is None) from exc

    if unsafe_hash or body_hash is None:
        __hash__.__qualname__ = f'{cls.__qualname__}.__hash__'
        __hash__.__module__ = cls.__module__
    else:
        functools.update_wrapper(__hash__, body_hash)
    cls.__hash__ = __hash__  # type: ignore[method-assign]


def _unhashable(module: Any, hash_is_none: bool) -> errors.UnhashableModuleError:
    if hash_is_none:
        return errors.UnhashableModuleError(
            repr(module),
            'Its class sets `__hash__` to None (as a class body defining `__eq__` alone does).',
        )
    for field in dataclasses.fields(module):
        if not _is_hashed(field):
            continue
        value = getattr(module, field.name)
        try:
            hash(value)
        except TypeError:
            return errors.UnhashableModuleError(
                repr(module), f'Field `{field.name}` holds an unhashable {type(value).__name__}.'
            )
    return errors.UnhashableModuleError(repr(module))


def _set_params(cls: type, **changes: bool) -> None:
    # `__dataclass_params__` records the arguments `dataclasses` was given; the
    # methods made above are the ones `eq=True, unsafe_hash=True` would make.
    params = cls.__dict__['__dataclass_params__']
    kind = type(params)
    try:
        values = {slot: getattr(params, slot) for slot in kind.__slots__}
        type.__setattr__(cls, '__dataclass_params__', kind(**{**values, **changes}))
    except (AttributeError, TypeError):
        pass  # a Python whose record has another shape keeps the one it made


def _parameters(function: Callable) -> tuple[list[str], list[str], dict[str, Any]] | None:
    """Positional and keyword-only parameter names after ``self``, and defaults."""
    code = getattr(function, '__code__', None)
    if code is None or code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS):
        return None  # not a signature dataclasses makes
    count, keyword_count = code.co_argcount, code.co_kwonlyargcount
    positional = list(code.co_varnames[1:count])
    keyword = list(code.co_varnames[count : count + keyword_count])
    defaults = dict(zip(positional[::-1], (function.__defaults__ or ())[::-1], strict=False))
    defaults.update(function.__kwdefaults__ or {})
    return positional, keyword, defaults


def replace_dataclass_init(cls: type) -> None:
    """Give dataclass ``cls`` an ``__init__`` that writes the instance ``__dict__`` directly.

    The signature and its defaults are taken from the dataclass's own ``__init__``;
    default factories, ``init=False`` fields and ``InitVar`` arguments to
    ``__post_init__`` behave as there. A class whose field name is a data
    descriptor of the class keeps the dataclass's ``__init__`` (storing must go
    through the descriptor), unless the descriptor says it reads the instance
    ``__dict__`` (``dict_backed``).
    """
    original = cls.__init__
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for name in fields:
        descriptor = type(inspect.getattr_static(cls, name, None))
        if hasattr(descriptor, '__set__') and not getattr(descriptor, 'dict_backed', False):
            return
        if name.startswith('__linen'):
            return  # would clash with the generated function's own names
    signature = _parameters(original)
    if signature is None:
        return
    positional, keyword, defaults = signature
    namespace: dict[str, Any] = {}
    # `self`, as in the dataclass's signature, unless a field or InitVar has that name
    me = '__linen_self' if 'self' in positional or 'self' in keyword else 'self'
    body = [f'    __linen_d = {me}.__dict__']
    for name in positional + keyword:
        field = fields.get(name)
        if field is None:
            continue  # an InitVar: only for __post_init__
        if field.default_factory is not dataclasses.MISSING:
            # The dataclass's default is a sentinel meaning "call the factory".
            namespace[f'__linen_factory_{name}'] = field.default_factory
            namespace[f'__linen_unset_{name}'] = defaults[name]
            body.append(
                f"    __linen_d['{name}'] = __linen_factory_{name}() "
                f'if {name} is __linen_unset_{name} else {name}'
            )
        else:
            body.append(f"    __linen_d['{name}'] = {name}")
    for name, field in fields.items():
        if field.init:
            continue
        if field.default_factory is not dataclasses.MISSING:
            namespace[f'__linen_factory_{name}'] = field.default_factory
            body.append(f"    __linen_d['{name}'] = __linen_factory_{name}()")
        elif field.default is not dataclasses.MISSING:
            namespace[f'__linen_default_{name}'] = field.default
            body.append(f"    __linen_d['{name}'] = __linen_default_{name}")
    # InitVars go to __post_init__ positionally, in the order they were declared.
    names = set(positional) | set(keyword)
    init_vars = [n for n in cls.__dict__['__dataclass_fields__'] if n not in fields and n in names]
    body.append(f'    {me}.__post_init__({", ".join(init_vars)})')
    arguments = [me, *positional, *(['*', *keyword] if keyword else [])]
    source = f'def __init__({", ".join(arguments)}):\n' + '\n'.join(body)
    exec(source, namespace)  # (the source is built above from the field names only)
    init = namespace['__init__']
    init.__defaults__ = original.__defaults__
    init.__kwdefaults__ = original.__kwdefaults__
    init.__qualname__ = f'{cls.__qualname__}.__init__'
    init.__module__ = cls.__module__
    init.__doc__ = original.__doc__
    init.__annotations__ = dict(getattr(original, '__annotations__', {}))
    cls.__init__ = init  # type: ignore[misc]
