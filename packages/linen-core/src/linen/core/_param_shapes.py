"""The parameter shape check of ``Scope.param`` on apply.

A stored parameter must have the shape its initializer would give. Flax re-runs
``jax.eval_shape`` of the initializer on every call (most of its tracing
overhead); here the abstract result is cached per (initializer, arguments), so
the check costs a dict lookup after the first time a shape is seen. Only plain
initializers are keys (``_cacheable.py``); any other (a closure over a list or a
traced value, a bound method) is remembered by a weak reference, for as long as
something else keeps it alive, so the cache never keeps a trace alive.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from linen.core import errors
from linen.core._cacheable import cacheable

_SHAPE_CACHE: dict[Any, Any] = {}
_SHAPE_CACHE_LIMIT = 8192
# initializer -> {arguments: shapes}, for initializers a process-wide key must not hold.
_BY_OBJECT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# default PRNG implementation -> the abstract key the initializers are traced with
_ABSTRACT_KEYS: dict[str, Any] = {}


def _abstract_key():
    impl = jax.config.jax_default_prng_impl
    try:
        return _ABSTRACT_KEYS[impl]
    except KeyError:
        # Traced from an abstract seed, never made: nothing is staged into the caller's
        # jaxpr, and no seed goes to the device (a transfer guard refuses that), even
        # where compile-time evaluation is on.
        seed = jax.ShapeDtypeStruct((), np.int32)
        key = _ABSTRACT_KEYS[impl] = jax.eval_shape(jax.random.key, seed)
        return key


class _Same:
    """Hashes and compares by identity (a code object's own hash walks its bytes)."""

    __slots__ = ('obj',)

    def __init__(self, obj: Any):
        self.obj = obj  # the reference keeps the id from being reused

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.obj is self.obj


def _structural_key(fn: Any) -> Any:
    """A key equal for initializers that compute the same thing.

    ``nn.initializers.lecun_normal()`` called inside ``__call__`` makes a new
    closure on every trace; its code and closure values still identify it.
    Unhashable closures fall back to the object itself.
    """
    code = getattr(fn, '__code__', None)
    if code is not None:
        try:
            cells = tuple(c.cell_contents for c in fn.__closure__ or ())
            key = (_Same(code), cells, fn.__defaults__, tuple((fn.__kwdefaults__ or {}).items()))
            hash(key)
            return key
        except (TypeError, ValueError):
            return fn
    if isinstance(fn, functools.partial):
        try:
            key = ('partial', _structural_key(fn.func), fn.args, tuple(fn.keywords.items()))
            hash(key)
            return key
        except TypeError:
            return fn
    return fn


def _init_shapes(init_fn: Callable, init_args: tuple, init_kwargs: dict) -> tuple:
    """``(shape if one leaf else None, [shape of each leaf])`` of ``init_fn(key, *init_args)``."""
    kwargs_key = tuple(init_kwargs.items()) if init_kwargs else ()
    args_key = (init_args, kwargs_key)
    try:
        cache_key = (init_fn, init_args, kwargs_key)
        return _SHAPE_CACHE[cache_key]
    except KeyError:
        pass
    except TypeError:
        cache_key = None
    shapes = structural = weak = None
    if cache_key is not None and cacheable(cache_key):
        try:
            structural = (_structural_key(init_fn), init_args, kwargs_key)
            shapes = _SHAPE_CACHE.get(structural)
        except TypeError:
            cache_key = structural = None
    else:
        cache_key = None
        if cacheable(args_key):
            # An initializer holding more than plain data (a closure over a list, a
            # bound method): answered by the object while it lives, not kept alive.
            try:
                weak = _BY_OBJECT.setdefault(init_fn, {})
                shapes = weak.get(args_key)
            except TypeError:  # not weakly referable
                weak = None
    if shapes is None:
        # Traced in eval_shape's own trace (nothing is staged into the caller's), its
        # constants too: evaluated, they would be device operations and transfers (a
        # transfer guard refuses those).
        abstract = jax.eval_shape(lambda k: init_fn(k, *init_args, **init_kwargs), _abstract_key())
        leaves = [tuple(np.shape(leaf)) for leaf in jax.tree_util.tree_leaves(abstract)]
        shapes = (leaves[0] if len(leaves) == 1 else None, leaves)
    if cache_key is not None:
        if len(_SHAPE_CACHE) >= _SHAPE_CACHE_LIMIT:
            _SHAPE_CACHE.clear()
        _SHAPE_CACHE[cache_key] = shapes
        _SHAPE_CACHE[structural] = shapes
    elif weak is not None:
        weak[args_key] = shapes
    return shapes


def check_param_shape(scope, name, value, init_fn, init_args, init_kwargs, boxed: bool) -> None:
    """Raise ``ScopeParamShapeError`` if ``value`` is not shaped as ``init_fn`` makes it.

    ``boxed``: the value is an ``AxisMetadata`` box (its leaves are compared).
    """
    # (the cache's hit inlined: every parameter read of every apply comes here)
    try:
        one, expected = _SHAPE_CACHE[
            (init_fn, init_args, tuple(init_kwargs.items()) if init_kwargs else ())
        ]
    except (KeyError, TypeError):
        one, expected = _init_shapes(init_fn, init_args, init_kwargs)
    if one is not None and not boxed:
        try:
            shape = value.aval.shape  # a JAX value's type: a slot read, no property call
        except AttributeError:
            shape = getattr(value, 'shape', None)
        if shape is not None:
            if tuple(shape) != one:
                raise errors.ScopeParamShapeError(name, scope._path_str, shape, one)
            return
    for leaf, want in zip(jax.tree_util.tree_leaves(value), expected):
        if tuple(np.shape(leaf)) != want:
            raise errors.ScopeParamShapeError(name, scope._path_str, np.shape(leaf), want)
