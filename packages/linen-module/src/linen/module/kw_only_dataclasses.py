"""Keyword-only dataclass fields, under Flax's module name (``flax.linen.kw_only_dataclasses``).

Flax ships this module to give keyword-only fields to Pythons before 3.10. Every
Python linen supports has them natively, so here ``field(kw_only=True)`` is
``dataclasses.field(kw_only=True)`` and ``KW_ONLY`` is ``dataclasses.KW_ONLY``:
a base class can declare a field with a default and a subclass a field
without one.

>>> import linen.nn as nn
>>> from linen.nn import kw_only_dataclasses
>>> class Base(nn.Module):
...     scale: float = kw_only_dataclasses.field(default=2.0, kw_only=True)
>>> class Child(Base):
...     size: int  # required, after a field with a default
>>> Child(3).scale, Child(3, scale=0.5).scale
(2.0, 0.5)

One difference from Flax: a field marked keyword-only is keyword-only (Python's
meaning), where Flax moves it to the end of the positional arguments.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

__all__ = ['KW_ONLY', 'dataclass', 'field']

KW_ONLY = dataclasses.KW_ONLY


def field(*, metadata: Any = None, kw_only: Any = dataclasses.MISSING, **kwargs: Any) -> Any:
    """``dataclasses.field``; with ``kw_only=True`` the field is keyword-only and needs a default.

    Raises:
      ValueError: ``kw_only=True`` without ``default`` or ``default_factory`` (Flax's text).
    """
    if kw_only is not dataclasses.MISSING and kw_only:
        if (
            kwargs.get('default', dataclasses.MISSING) is dataclasses.MISSING
            and kwargs.get('default_factory', dataclasses.MISSING) is dataclasses.MISSING
        ):
            raise ValueError('Keyword-only fields with no default are not supported.')
        metadata = {**(metadata or {}), KW_ONLY: True}
    return dataclasses.field(metadata=metadata, kw_only=kw_only, **kwargs)


def dataclass(
    cls: type | None = None,
    extra_fields: Iterable[tuple[str, Any, dataclasses.Field]] | None = None,
    **kwargs: Any,
) -> Any:
    """``dataclasses.dataclass`` that first adds ``extra_fields`` (``(name, type, Field)`` triples)."""

    def wrap(klass: type) -> type:
        if extra_fields:
            annotations = klass.__dict__.get('__annotations__')
            if annotations is None:
                annotations = {}
                klass.__annotations__ = annotations
            for name, annotation, default in extra_fields:
                if not (isinstance(name, str) and isinstance(default, dataclasses.Field)):
                    raise ValueError(
                        'Expected extra_fields to a be a list of (name, type, Field) tuples.'
                    )
                setattr(klass, name, default)
                annotations[name] = annotation
        inherit_kw_only(klass)
        return dataclasses.dataclass(klass, **kwargs)

    return wrap if cls is None else wrap(cls)


def inherit_kw_only(klass: type) -> None:
    """Keep keyword-only the fields a base declared so that ``klass`` redeclares plainly.

    As in Flax, a subclass may give such a field a new default (``x: int = 2``)
    without repeating ``kw_only=True``; Python's dataclasses would make it
    positional again. Called on ``klass`` before it is made a dataclass.
    """
    annotations = klass.__dict__.get('__annotations__')
    if not annotations:
        return
    inherited: dict[str, dataclasses.Field] = {}
    for base in reversed(klass.__mro__[1:]):  # the nearest base's declaration wins
        inherited.update(base.__dict__.get('__dataclass_fields__') or {})
    for name in annotations:
        base_field = inherited.get(name)
        if base_field is None or base_field.kw_only is not True:
            continue
        value = klass.__dict__.get(name, dataclasses.MISSING)
        if isinstance(value, dataclasses.Field):
            if value.kw_only is dataclasses.MISSING:
                value.kw_only = True
        elif value is dataclasses.MISSING:
            setattr(klass, name, dataclasses.field(kw_only=True))
        else:
            setattr(klass, name, dataclasses.field(default=value, kw_only=True))
