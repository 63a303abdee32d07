"""Frozen dataclasses that are JAX pytrees, for train states and other containers.

``dataclass`` turns a class into a frozen dataclass whose fields are pytree children
unless declared ``field(pytree_node=False)``; those are static (part of the tree
structure, so they must be hashable). ``PyTreeNode`` does the same for every
subclass. Both register the class with ``linen.core.serialization`` so that
``to_state_dict``/``from_bytes`` see the pytree fields by name. As in Flax, JAX
rebuilds an instance through its class on every unflatten, so ``__post_init__``
runs again for the new leaves (and must accept tracers).

>>> import jax
>>> class TrainState(PyTreeNode):
...     step: int
...     name: str = field(pytree_node=False, default='sgd')
>>> jax.tree_util.tree_leaves(TrainState(step=3))
[3]
>>> TrainState(step=3).replace(step=4)
TrainState(step=4, name='sgd')
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, TypeVar, dataclass_transform

import jax

from linen.core import serialization
from linen.core.errors import InvalidCheckpointError

__all__ = [
    'dataclass',
    'field',
    'PyTreeNode',
]

_T = TypeVar('_T')

# Marks a struct dataclass, under Flax's name: code written for Flax tells a struct
# class from a plain dataclass by ``cls.__dict__['_flax_dataclass']`` (metric
# libraries refuse a state class without it), and decorating a marked class again,
# with Flax's decorator or this one, is a no-op.
_MARKER = '_flax_dataclass'


def field(pytree_node: bool = True, *, metadata: dict | None = None, **kwargs) -> Any:
    """A ``dataclasses.field`` that also says whether the field is a pytree child.

    Args:
        pytree_node: ``True`` (default) makes the value a child that JAX transforms
            trace; ``False`` makes it static metadata kept in the tree structure.
        metadata: extra field metadata, merged with ``{'pytree_node': ...}``.
        **kwargs: passed to ``dataclasses.field`` (``default``, ``default_factory``, ...).
    """
    return dataclasses.field(metadata={**(metadata or {}), 'pytree_node': pytree_node}, **kwargs)


@dataclass_transform(field_specifiers=(field,))
def dataclass(clz: type[_T] | None = None, **kwargs) -> type[_T]:
    """Makes ``clz`` a frozen dataclass registered as a pytree with a ``replace`` method.

    Args:
        clz: the class; omit it to get a decorator (``@dataclass(kw_only=True)``).
        **kwargs: passed to ``dataclasses.dataclass``; ``frozen`` defaults to True.
    """
    if clz is None:
        return functools.partial(dataclass, **kwargs)
    if _MARKER in clz.__dict__:
        # Already a struct; one made by Flax's decorator still needs this library's
        # state handlers, so that ``linen.core.serialization`` sees its fields.
        if not serialization.is_serializable(clz):
            _register_state(clz, _split_fields(clz)[0])
        return clz
    kwargs.setdefault('frozen', True)
    data_clz = dataclasses.dataclass(**kwargs)(clz)
    data_fields, meta_fields = _split_fields(data_clz)

    def replace(self, **updates):
        """Returns a copy with the given fields replaced."""
        return dataclasses.replace(self, **updates)

    data_clz.replace = replace

    # JAX's dataclass node rebuilds through the class (``__init__`` and so
    # ``__post_init__`` run on every unflatten), as Flax's struct does: an output
    # type that fills itself in ``__post_init__`` (an ``OrderedDict`` subclass, say)
    # only comes out of a transform whole that way, and the flatten/unflatten
    # fast path stays in C++.
    jax.tree_util.register_dataclass(data_clz, list(data_fields), list(meta_fields))
    _register_state(data_clz, data_fields)
    setattr(data_clz, _MARKER, True)
    return data_clz


def _split_fields(data_clz: type) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The names of the pytree fields and of the static ones, in field order."""
    data_fields, meta_fields = [], []
    for f in dataclasses.fields(data_clz):
        (data_fields if f.metadata.get('pytree_node', True) else meta_fields).append(f.name)
    return tuple(data_fields), tuple(meta_fields)


def _register_state(data_clz: type, data_fields: tuple[str, ...]) -> None:
    """State-dict handlers that name the pytree fields of ``data_clz``."""

    def to_state_dict(x):
        return {n: serialization.to_state_dict(getattr(x, n)) for n in data_fields}

    def from_state_dict(x, state):
        if not isinstance(state, dict):
            raise InvalidCheckpointError(
                f'Expected a dict of fields to restore an instance of {data_clz.__name__} at '
                f'path {serialization.current_path()}, got {type(state).__name__}. The '
                'checkpoint does not match the target structure.'
            )
        missing = [n for n in data_fields if n not in state]
        if missing:
            # Flax's sentence names the first missing field; the rest follow it.
            others = f' (also missing: {", ".join(missing[1:])})' if missing[1:] else ''
            raise InvalidCheckpointError(
                f'Missing field {missing[0]} in state dict while restoring an instance of '
                f'{data_clz.__name__}, at path {serialization.current_path()}.{others} The '
                'checkpoint was written from a different structure: restore into a target '
                'that matches it.'
            )
        fields = set(data_fields)
        unknown = [n for n in state if n not in fields]  # in the state dict's order, as Flax
        if unknown:
            raise InvalidCheckpointError(
                f'Unknown field(s) "{",".join(map(str, unknown))}" in state dict while '
                f'restoring an instance of {data_clz.__name__} at path '
                f'{serialization.current_path()}. Restore into a target with those fields.'
            )
        updates = {
            n: serialization.from_state_dict(getattr(x, n), state[n], name=n) for n in data_fields
        }
        return x.replace(**updates)

    serialization.register_serialization_state(
        data_clz, to_state_dict, from_state_dict, override=True
    )


@dataclass_transform(field_specifiers=(field,))
class PyTreeNode:
    """Base class whose subclasses become struct dataclasses automatically.

    Keyword arguments in the class statement go to :func:`dataclass`
    (``class S(PyTreeNode, kw_only=True)``).
    """

    def __init_subclass__(cls, **kwargs):
        dataclass(cls, **kwargs)
