"""A Module class's ``__init__``: the dataclass's contract, without its per-field call.

A frozen dataclass's ``__init__`` stores each field with a call of
``object.__setattr__``. Every module made inline in a compact method pays it once
per field on every call of its parent (half the cost of making a ``Dense``). The
``__init__`` made here writes the instance ``__dict__`` instead.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

__all__ = ['replace_frozen_init']


def replace_frozen_init(cls: type) -> None:
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
    try:
        parameters = list(inspect.signature(original).parameters.values())[1:]
    except (TypeError, ValueError):
        return
    if any(p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in parameters):
        return  # not a signature dataclasses makes
    namespace: dict[str, Any] = {}
    # `self`, as in the dataclass's signature, unless a field or InitVar has that name
    me = '__linen_self' if any(p.name == 'self' for p in parameters) else 'self'
    body = [f'    __linen_d = {me}.__dict__']
    for p in parameters:
        field = fields.get(p.name)
        if field is None:
            continue  # an InitVar: only for __post_init__
        if field.default_factory is not dataclasses.MISSING:
            # The dataclass's default is a sentinel meaning "call the factory".
            namespace[f'__linen_factory_{p.name}'] = field.default_factory
            namespace[f'__linen_unset_{p.name}'] = p.default
            body.append(
                f"    __linen_d['{p.name}'] = __linen_factory_{p.name}() "
                f'if {p.name} is __linen_unset_{p.name} else {p.name}'
            )
        else:
            body.append(f"    __linen_d['{p.name}'] = {p.name}")
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
    names = {p.name for p in parameters}
    init_vars = [n for n in cls.__dict__['__dataclass_fields__'] if n not in fields and n in names]
    body.append(f'    {me}.__post_init__({", ".join(init_vars)})')
    positional = [p.name for p in parameters if p.kind is p.POSITIONAL_OR_KEYWORD]
    keyword = [p.name for p in parameters if p.kind is p.KEYWORD_ONLY]
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
