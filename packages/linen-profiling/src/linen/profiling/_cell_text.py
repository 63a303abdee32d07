"""The text of ``tabulate``'s cells: Flax's YAML-like rendering of shapes and values.

Arrays read ``float32[2,3]`` (with `` P(names)`` when boxed with partitioning
names), other leaves their ``repr`` without quotes, containers as YAML lists and
mappings (empty ones ``[]`` and ``{}``), as Flax's summary dumps them.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any

from linen.core.meta import is_axis_metadata

__all__ = ['arguments_lines', 'as_lines', 'cell_lines', 'leaf_text', 'unbox']


def unbox(value: Any) -> Any:
    """The value in a metadata box (no sharding constraint: it may be abstract)."""
    return value.value if is_axis_metadata(value) else value


def leaf_text(value: Any) -> str | None:
    """``dtype[shape]``, with `` P(names)`` for a partitioned box (Flax's cell text)."""
    names = getattr(value, 'names', None) if is_axis_metadata(value) else None
    value = unbox(value)
    if hasattr(value, 'shape') and hasattr(value, 'dtype'):
        text = f'{value.dtype}[{",".join(str(d) for d in value.shape)}]'
        if names is not None:
            # Flax prints the names tuple without quotes: P(None,) for one name.
            text += ' P' + repr(tuple(names)).replace("'", '')
        return text
    return None


def _key_text(key: Any) -> str:
    """A mapping key as Flax's YAML shows it: an enum member by its value."""
    if isinstance(key, enum.Enum):
        key = key.value
    return str.__str__(key) if isinstance(key, str) else str(key)


def _fields(value: Any) -> dict[str, Any] | None:
    """A dataclass instance's fields as a mapping (Flax lists them so), else ``None``."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    return None


def _is_empty(value: Any) -> bool:
    return isinstance(value, (Mapping, tuple, list)) and not value


def as_lines(value: Any) -> list[str]:
    """A YAML-like rendering of a pytree of shapes (Flax's cell text).

    Arrays read ``float32[2,3]``, other leaves as their ``repr`` without quotes,
    empty containers ``[]`` and ``{}``, as Flax's YAML dump shows them.
    """
    if isinstance(value, str):
        return [value]
    leaf = leaf_text(value)
    if leaf is not None:
        return [leaf]
    if _is_empty(value):
        return ['{}' if isinstance(value, Mapping) else '[]']
    fields = _fields(value)
    if fields is not None:
        value = fields
    if isinstance(value, Mapping):
        lines = []
        for key, item in value.items():
            inner = as_lines(item)
            nested = leaf_text(item) is None and (
                isinstance(item, (Mapping, tuple, list)) or _fields(item) is not None
            )
            if len(inner) == 1 and (not nested or _is_empty(item)):
                lines.append(f'{_key_text(key)}: {inner[0]}')
            else:
                lines.append(f'{_key_text(key)}:')
                # YAML: a mapping in a mapping is indented, a list is not.
                pad = '' if isinstance(item, (tuple, list)) else '  '
                lines.extend(pad + line for line in inner)
        return lines
    if isinstance(value, (tuple, list)):
        lines = []
        for item in value:
            inner = as_lines(item)
            lines.append(f'- {inner[0]}')
            lines.extend(f'  {line}' for line in inner[1:])
        return lines
    return [repr(value).replace("'", '')]


def cell_lines(value: Any) -> list[str]:
    """The lines of an inputs/outputs cell: nothing for an empty container (``None`` reads
    ``None``, as in Flax)."""
    if _is_empty(value):
        return []
    return as_lines(value)


def arguments_lines(args: tuple, kwargs: dict) -> list[str]:
    """The inputs cell: one argument as itself, several as a list, keywords as a mapping
    (after the positional arguments when there are both), as Flax shows them."""
    if args and kwargs:
        value: Any = (*args, kwargs)
    elif args:
        value = args[0] if len(args) == 1 else args
    else:
        value = kwargs
    return cell_lines(value)
