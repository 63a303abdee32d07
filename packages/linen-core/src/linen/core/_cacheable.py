"""What a process-wide cache may keep: values that reach no trace.

linen caches a few answers per initializer or layer configuration (a parameter's
shape, an initializer's staged form, a layer's plan) in dicts that live as long as
the process. A key keeps everything it references alive: an initializer that is a
bound method keeps its Module, the Module its scope, the scope the traced
variables of the call that made it; a closure over a traced value keeps that
tracer. Held that way, each trace of the model stays in memory, and
``jax.checking_leaks()`` (``JAX_CHECK_TRACER_LEAKS``) rejects a program Flax runs.
So a cache stores only keys made of plain data, which :func:`cacheable` tells;
anything else is answered afresh on every call, as Flax always does.
"""

from __future__ import annotations

import enum
import functools
import types
from typing import Any

import jax
import numpy as np

# Values that reference nothing else.
_ATOMS = frozenset({int, float, bool, str, bytes, complex, type(None), type(Ellipsis)})
# Sharding descriptions (an initializer wrapped by `with_partitioning` holds a mesh).
_SHARDING = tuple(
    t
    for t in (
        getattr(jax.sharding, 'Mesh', None),
        getattr(jax.sharding, 'AbstractMesh', None),
        getattr(jax.sharding, 'Sharding', None),
        getattr(jax.sharding, 'PartitionSpec', None),
    )
    if isinstance(t, type)
)
# How deep closures, partials and tuples are followed (JAX's initializers nest two
# or three levels: a factory's closure holding another initializer).
_DEPTH = 6


def cacheable(value: Any, depth: int = _DEPTH) -> bool:
    """Whether ``value`` is plain data a process-wide cache may keep.

    Plain: numbers, strings, ``None``, types and dtypes, enum members, sharding
    descriptions, tuples and frozensets of plain values, and functions and
    ``functools.partial`` objects whose closures, defaults and arguments are plain.
    Anything else (arrays, tracers, Modules, scopes, bound methods, lists and
    dicts, objects of other classes) is not: what it reaches cannot be told.

    >>> import jax
    >>> cacheable(jax.nn.initializers.lecun_normal())
    True
    >>> cacheable(jax.nn.initializers.constant(jax.numpy.ones(3)))
    False
    """
    kind = type(value)
    if kind in _ATOMS or isinstance(value, (type, np.dtype, np.generic, enum.Enum)):
        return True
    if depth <= 0:
        return False
    if kind is tuple or kind is frozenset:
        return all(cacheable(v, depth - 1) for v in value)
    if kind is types.FunctionType:
        try:
            cells = tuple(c.cell_contents for c in value.__closure__ or ())
        except ValueError:  # a cell not yet filled
            return False
        return (
            cacheable(cells, depth - 1)
            and cacheable(value.__defaults__ or (), depth - 1)
            and cacheable(tuple((value.__kwdefaults__ or {}).values()), depth - 1)
        )
    if kind is functools.partial:
        return (
            cacheable(value.func, depth - 1)
            and cacheable(value.args, depth - 1)
            and cacheable(tuple(value.keywords.values()), depth - 1)
        )
    if kind is types.BuiltinFunctionType:
        return True
    return isinstance(value, _SHARDING)
