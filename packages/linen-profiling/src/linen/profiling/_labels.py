"""The labels linen pushes on JAX's name stack, and the record of which it pushed.

Every label goes through :func:`label_scope`: it opens ``jax.named_scope(name)``
and remembers the label path (the labels enclosing it, outermost first) in a
process-wide set. Reports attribute an op to a module by matching the
components of its ``op_name`` against these paths, so the components JAX adds
(``jit(f)``, ``while``, ``body``, ``eval_jaxpr``, ``transpose(jvp(...))``, and
whatever a future JAX adds) are skipped without naming them.

Under ``nn.jit`` an instance's own label goes outside the compiled function
(:func:`label_at_boundary`, run by the dispatcher's ``call_at_boundary``) and the
labels inside are the same for every instance of a class, so one compiled
function serves them all; JAX prefixes the inner ops' names with each call
site's name stack. The label paths a trace pushes below a boundary are kept
relative to it per (class, method) and grafted under every call site, including
the ones that reuse the compiled function without tracing.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

import jax

from linen.profiling._naming import cached_profiling_name, derive_profiling_name

__all__ = [
    'LABELLED_ATTRIBUTE',
    'emitted_label_paths',
    'end_skip',
    'label_at_boundary',
    'label_method_call',
    'label_method_call_hooked',
    'label_scope',
    'skips_at_boundary',
]

LABELLED_ATTRIBUTE = '__linen_named_call__'
"""Set on methods decorated with :func:`named_call`; they label themselves."""

_stack: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar(
    'linen_profiling_labels', default=()
)
# Label paths pushed so far (only grows: a path once emitted may be in any
# compiled program that is still analysed). Adding to a set is atomic under the
# GIL, so threads need no lock.
_emitted: set[tuple[str, ...]] = set()


def emitted_label_paths() -> frozenset[tuple[str, ...]]:
    """Every label path linen has pushed in this process (``('MLP', 'Dense_0')``, ...)."""
    return frozenset(_emitted)


class _Boundary:
    """Inside a call at a compiled boundary: the label to leave out, where to record paths."""

    __slots__ = ('skip', 'relative', 'depth', 'inside')

    def __init__(self, skip: str | None, relative: set, depth: int):
        self.skip = skip  # the instance's label, pushed outside; the inner call omits it
        self.relative = relative  # label paths below the boundary, relative to it
        self.depth = depth  # length of the boundary's label path
        self.inside = self if skip is None else _Boundary(None, relative, depth)


_boundary: contextvars.ContextVar[_Boundary | None] = contextvars.ContextVar(
    'linen_profiling_boundary', default=None
)
# (class, method name) -> label paths pushed below its compiled boundary, relative to it
_relative: dict[tuple, set[tuple[str, ...]]] = {}


def _emit(labels: tuple[str, ...], boundary: _Boundary | None) -> None:
    _emitted.add(labels)
    if boundary is not None:
        boundary.relative.add(labels[boundary.depth :])


@contextlib.contextmanager
def label_scope(name: str) -> Iterator[None]:
    """Run the block under the profiling label ``name`` (``jax.named_scope``), recorded.

    Use it for a region of plain JAX code that reports should show as a row.

    >>> import jax, jax.numpy as jnp
    >>> from linen.profiling import module_costs
    >>> def f(x, w):
    ...     with label_scope('Dense_0'):
    ...         return x @ w
    >>> module_costs(f, jnp.ones((4, 8)), jnp.ones((8, 2)))['Dense_0'].flops
    128.0
    """
    labels = (*_stack.get(), name)
    _emit(labels, _boundary.get())
    token = _stack.set(labels)
    try:
        with jax.named_scope(name):
            yield
    finally:
        _stack.reset(token)


def skips_at_boundary(name: str) -> Any:
    """A token when ``name`` is the label a boundary pushed outside (the call must omit it).

    Pass the token to :func:`end_skip` after the call; ``None`` otherwise.
    """
    boundary = _boundary.get()
    if boundary is None or boundary.skip != name:
        return None
    return _boundary.set(boundary.inside)


def end_skip(token: Any) -> None:
    _boundary.reset(token)


def _labelled(name: str, next_fn, args: tuple, kwargs: dict[str, Any]) -> Any:
    boundary = _boundary.get()
    if boundary is not None and boundary.skip == name:
        # The inner call of a compiled boundary: its label is outside already.
        token = _boundary.set(boundary.inside)
        try:
            return next_fn(*args, **kwargs)
        finally:
            _boundary.reset(token)
    labels = (*_stack.get(), name)
    _emit(labels, boundary)
    token = _stack.set(labels)
    try:
        with jax.named_scope(name):
            return next_fn(*args, **kwargs)
    finally:
        _stack.reset(token)


# (class, instance name, method name, method key) -> label, or None for a
# @named_call method (it labels itself): the default rule reads nothing else of the
# instance. The method key is _naming.method_key's (code and name for a function),
# written inline below.
_default_labels: dict[tuple, str | None] = {}


def _default_label(module: Any, method_name: str, method: Any) -> str | None:
    if getattr(method, LABELLED_ATTRIBUTE, False):
        return None
    return cached_profiling_name(module, method_name, method)


def label_method_call(next_fn, args: tuple, kwargs: dict[str, Any], context) -> Any:
    """A ``linen_method_wrapper``: ``next_fn`` under the call's label (default rule, cached)."""
    # Every method call of a traced model runs this: one dict lookup for the
    # label, and _labelled's body inline (no helper frames).
    module = context.module
    method = context.method
    try:
        key = (type(module), module.name, context.method_name, method.__code__, method.__name__)
    except AttributeError:
        key = (type(module), module.name, context.method_name, method)
    try:
        name = _default_labels[key]
    except KeyError:
        name = _default_labels[key] = _default_label(module, context.method_name, method)
    except TypeError:  # an unhashable method object
        name = _default_label(module, context.method_name, method)
    if name is None:
        # @named_call opens its own scope; a second one would double the label.
        return next_fn(*args, **kwargs)
    boundary = _boundary.get()
    if boundary is not None:
        return _labelled(name, next_fn, args, kwargs)
    labels = (*_stack.get(), name)
    if labels not in _emitted:  # (a set: a membership test is no call, an add is one)
        _emitted.add(labels)
    token = _stack.set(labels)
    try:
        with jax.named_scope(name):
            return next_fn(*args, **kwargs)
    finally:
        _stack.reset(token)


def label_at_boundary(next_fn, args: tuple, kwargs: dict[str, Any], context) -> Any:
    """The ``at_boundary`` half of :func:`label_method_call`: the instance's label, outside.

    ``next_fn`` runs a compiled function (``nn.jit``) whose inner call of the same
    method omits this label, so the compiled function is the same for every
    instance; the label paths it pushes are grafted under this call's path.
    """
    method = context.method
    if getattr(method, LABELLED_ATTRIBUTE, False):
        # @named_call labels itself (hook rule); it too omits the label inside.
        name = derive_profiling_name(context.module, context.method_name, method)
    else:
        name = cached_profiling_name(context.module, context.method_name, method)
    outer = _boundary.get()
    relative = _relative.setdefault((type(context.module), context.method_name), set())
    if outer is not None and outer.skip == name:
        # The inner call of another boundary (an nn.jit block that trace reuse runs
        # as a compiled program): the label is outside already.
        path = _stack.get()
        boundary_token = _boundary.set(_Boundary(name, relative, len(path)))
        try:
            return next_fn(*args, **kwargs)
        finally:
            _boundary.reset(boundary_token)
            for rel in tuple(relative):
                _emit(path + rel, outer)
    path = (*_stack.get(), name)
    _emit(path, outer)
    token = _stack.set(path)
    boundary_token = _boundary.set(_Boundary(name, relative, len(path)))
    try:
        with jax.named_scope(name):
            return next_fn(*args, **kwargs)
    finally:
        _boundary.reset(boundary_token)
        _stack.reset(token)
        # Call sites that reuse the compiled function traced nothing: their paths
        # are the ones a trace recorded, under this site's path.
        for rel in tuple(relative):
            _emit(path + rel, outer)


def label_method_call_hooked(next_fn, args: tuple, kwargs: dict[str, Any], context) -> Any:
    """Like :func:`label_method_call`, asking the name hook for every call (user rules).

    It has no ``at_boundary`` half: a user's rule may read the instance's path or
    fields, so a compiled boundary keeps the instance in its cache key.
    """
    if getattr(context.method, LABELLED_ATTRIBUTE, False):
        return next_fn(*args, **kwargs)
    name = derive_profiling_name(context.module, context.method_name, context.method)
    return _labelled(name, next_fn, args, kwargs)
