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
    """``ClassName(# attributes ... # children ...)``, children indented, as Flax prints it.

    Attributes are the fields shown by ``repr`` (not ``parent`` nor ``name``); a
    function, class or other named callable prints as its ``__name__``. Children
    are the submodules the module has made or adopted so far (a bound module's,
    under the names they were registered with). Modules nested deeper than the
    ``max_repr_depth`` flag print as ``ClassName(...)``.
    """
    pad = '    '
    cls = type(module)
    max_depth = config.linen_max_repr_depth
    if max_depth is not None and depth > max_depth:
        return f'{cls.__name__}(...)'

    lines = [f'{cls.__name__}(']
    attrs = []
    for f in dataclasses.fields(module):
        if f.name in ('parent', 'name') or not f.repr:
            continue
        value = module.__dict__.get(f.name)
        if _is_module(value):
            attrs.append(f'{pad}{f.name} = {_indent(module_repr(value, depth + 1), pad)}')
        else:
            attrs.append(f'{pad}{f.name} = {_indent(_attr_repr(value), pad)}')
    if attrs:
        lines.append(f'{pad}# attributes')
        lines.extend(attrs)
    state = module.__dict__.get('_state')
    children = [] if state is None else [(k, v) for k, v in state.children.items() if _is_module(v)]
    if children:
        lines.append(f'{pad}# children')
        for k, v in children:
            lines.append(f'{pad}{k} = {_indent(module_repr(v, depth + 1), pad)}')
    if len(lines) == 1:
        return f'{cls.__name__}()'
    lines.append(')')
    return '\n'.join(lines)


def _attr_repr(value: Any) -> str:
    # A named callable (function, class, dtype, jax.custom_jvp) prints as its name.
    if callable(value):
        name = getattr(value, '__name__', None)
        if name:
            return str(name)
    return repr(value)


def _indent(text: str, pad: str) -> str:
    return text.replace('\n', '\n' + pad)
