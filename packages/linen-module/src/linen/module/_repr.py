"""``repr`` of a Module: its attributes, then its children, nested."""

from __future__ import annotations

import dataclasses
from typing import Any

from linen.core import config
from linen.module._state import ModuleState


def _is_module(value: Any) -> bool:
    # Every Module instance carries its ModuleState (set by __post_init__).
    return isinstance(getattr(value, '__dict__', {}).get('_state'), ModuleState)


def module_repr(module: Any, depth: int = 1) -> str:
    """``ClassName(# attributes ... # children ...)``, children indented.

    Modules nested deeper than the ``max_repr_depth`` flag print as ``ClassName(...)``.
    """
    pad = '    '
    cls = type(module)
    max_depth = config.linen_max_repr_depth
    if max_depth is not None and depth > max_depth:
        return f'{cls.__name__}(...)'

    fields = [f for f in dataclasses.fields(module) if f.name not in ('parent',) and f.repr]
    lines = [f'{cls.__name__}(']
    attrs = []
    for f in fields:
        value = module.__dict__.get(f.name)
        if f.name == 'name' and value is None:
            continue
        if _is_module(value):
            attrs.append(f'{pad}{f.name} = {_indent(module_repr(value, depth + 1), pad)}')
        else:
            attrs.append(f'{pad}{f.name} = {value!r}')
    if attrs:
        lines.append(f'{pad}# attributes')
        lines.extend(attrs)
    children = [
        (k, v)
        for k, v in module.__dict__.items()
        if k not in getattr(cls, '_field_names', ())
        and not k.startswith('_')
        and k not in ('parent', 'name', 'scope')
        and _is_module(v)
    ]
    if children:
        lines.append(f'{pad}# children')
        for k, v in children:
            lines.append(f'{pad}{k} = {_indent(module_repr(v, depth + 1), pad)}')
    if len(lines) == 1:
        return f'{cls.__name__}()'
    lines.append(')')
    return '\n'.join(lines)


def _indent(text: str, pad: str) -> str:
    return text.replace('\n', '\n' + pad)
