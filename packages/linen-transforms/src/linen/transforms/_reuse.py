"""Trace reuse: a repeated submodule call runs its Python once per trace.

A model built from N copies of one block traces the block's Python N times, as
pure JAX, Flax, Haiku and Equinox do. linen knows from the module tree when two
calls are the same program: same class and attributes, same method, same static
arguments, same input and variable shapes and dtypes, same scope structure and
same active method wrappers. While trace reuse is on (the config flag
``linen_reuse_traces``, env ``LINEN_REUSE_TRACES``, or the context manager
:func:`linen_reuse_traces`), such a call goes through the lifted ``jit`` of
``_jit.py`` (one compiled function for every instance of a class, rng derivation
passed as data, each instance's profiling label pushed outside): the first call
traces the block, the later ones reuse its program from ``jax.jit``'s cache, and
XLA inlines the calls, so the optimized program is the one an unrolled trace
gives. Variables, rng values, mutable updates and ``sow`` go in and out as with
``nn.jit``, so they are those of ordinary tracing.

What changes is Python: a reused call's body does not run again, so side effects
in it (printing, counting calls, appending to a list) happen once per distinct
program, not once per instance. That is why reuse is off by default.

Reuse applies only where it is safe and pays:

* inside a JAX trace (an argument is a tracer) of a model traced into a program
  compiled as a whole (jit, make_jaxpr, also under grad or vmap there); an eager
  model, or one under an eager grad or vmap, runs as always, lifted transforms
  inside it too (a compiled program could round differently from op by op), and
  so does ``lazy_init`` (its initializers run op by op on concrete keys);
* below the outermost call (which starts the per-trace cache, so nothing is
  reused across traces: each ``jax.jit`` trace of a model traces its blocks);
* for methods that call submodules (learnt per class and method, process-wide,
  from a call outside reuse, such as an eager ``init``, or else from the first
  reuse trace); a leaf layer's trace costs less than a cached call;
* with hashable attributes and non-array arguments, no Module or Variable among
  them, every rng stream derived by path, and only method wrappers that can work
  at a compiled boundary (profiling labels can; ``capture_intermediates``,
  ``intercept_methods`` and tabulate's records cannot);
* for bodies that stay inside their own scope (calling a module bound elsewhere,
  such as a shared embedding, would close over the caller's values) and return
  arrays only.

Anything else runs through ordinary tracing, which is never a wrong program.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.interpreters.partial_eval as pe

from linen.core.config import config
from linen.module import MethodWrapper, Module
from linen.module.dispatch import (
    call_at_boundary,
    call_wrapped_method,
    field_names,
    in_compact_method,
    invalidate_method_wrappers,
    wrappers_are_relative,
)

__all__ = ['linen_reuse_traces', 'reuse_enabled', 'reuse_wrapper']

_Tracer = jax.core.Tracer
# The tracer of a trace that stages operations into a program (None: reuse never applies).
_STAGING: Any = getattr(pe, 'DynamicJaxprTracer', None)

# None: follow the config flag; True/False: switched in this context.
_switch: contextvars.ContextVar[bool | None] = contextvars.ContextVar(
    'linen_reuse_traces', default=None
)


def reuse_enabled() -> bool:
    """Whether trace reuse is on in this context."""
    value = _switch.get()
    return bool(config.linen_reuse_traces) if value is None else value


@contextlib.contextmanager
def linen_reuse_traces(enabled: bool | None = True) -> Iterator[None]:
    """Reuse the traced program of repeated submodule calls inside this block.

    Context-local (threads and asyncio tasks keep their own setting);
    ``enabled=False`` turns reuse off inside the block, ``None`` follows the
    process-wide config flag ``linen_reuse_traces`` (env ``LINEN_REUSE_TRACES``). Values,
    variables and gradients are those of ordinary tracing; the Python of a
    reused call runs once per distinct program, not once per instance.

    >>> import jax, jax.numpy as jnp
    >>> import linen.nn as nn
    >>> class Block(nn.Module):
    ...     @nn.compact
    ...     def __call__(self, x):
    ...         return x + nn.Dense(4)(nn.relu(nn.Dense(4)(x)))
    >>> class Stack(nn.Module):
    ...     @nn.compact
    ...     def __call__(self, x):
    ...         for _ in range(3):
    ...             x = Block()(x)
    ...         return x
    >>> x = jnp.ones((2, 4))
    >>> variables = Stack().init(jax.random.key(0), x)
    >>> from linen.transforms import linen_reuse_traces
    >>> with linen_reuse_traces():
    ...     y = jax.jit(Stack().apply)(variables, x)
    >>> bool((y == jax.jit(Stack().apply)(variables, x)).all())
    True
    """
    token = _switch.set(None if enabled is None else bool(enabled))
    invalidate_method_wrappers()
    try:
        yield
    finally:
        _switch.reset(token)
        invalidate_method_wrappers()


def _on_config_change(name: str, value: Any) -> None:
    if name == 'linen_reuse_traces':
        invalidate_method_wrappers(everywhere=True)


config.on_change(_on_config_change)


# The reused program's name: a reused call shows as ``jit(linen_reuse)`` in op names,
# between the instance's own profiling label and its submodules' labels.
REUSED_NAME = 'linen_reuse'


class _NotReusable(Exception):
    """Raised inside a reuse trace that met something only ordinary tracing handles."""


class _Session:
    """The reuse state of one outermost call (one trace of a model)."""

    __slots__ = ('calls', 'inside', 'jitted', 'refused', 'reuse')

    def __init__(self, reuse: bool) -> None:
        self.reuse = reuse  # False: only learn which methods call submodules
        self.calls = 0  # wrapped calls seen, to learn which methods call submodules
        self.inside: Any = None  # the inner root scope while a reuse trace runs
        self.jitted: Callable | None = None  # the lifted jit holding the programs
        self.refused: set = set()  # keys whose reuse trace fell back


_session: contextvars.ContextVar[_Session | None] = contextvars.ContextVar(
    'linen_reuse_session', default=None
)
# (class, method function) -> whether the method calls submodules (process-wide: a
# class's answer does not change, and learning it costs an ordinary trace).
_composite: dict[tuple, bool] = {}

# Attribute and argument values taken as static by value (hashable, no Modules inside).
_PLAIN = frozenset({int, float, bool, str, type(None), complex, bytes})


def _static(value: Any) -> Any:
    """A hashable stand-in for an attribute or a non-array argument; raises
    :class:`_NotReusable` for what only ordinary tracing handles."""
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is tuple or kind is list:
        return (kind.__name__, tuple(_static(v) for v in value))
    if kind is dict:
        return ('dict', tuple((k, _static(v)) for k, v in sorted(value.items(), key=repr)))
    if isinstance(value, (Module, _Tracer, jax.Array)):
        raise _NotReusable
    try:
        hash(value)
    except TypeError:
        raise _NotReusable from None
    return value


def _program_key(module: Any, fun: Callable, treedef: Any, statics: tuple) -> tuple:
    fields = tuple(_static(module.__dict__[f]) for f in field_names(type(module)))
    return (type(module), fun, fields, treedef, statics)


def _staged(value: Any) -> bool:
    """Whether ``value`` is staged into a program (jit, make_jaxpr), not computed as
    it goes (an eager call, or an eager ``grad`` or ``vmap`` of one)."""
    while isinstance(value, _Tracer):
        if type(value) is _STAGING:
            return True
        # A JVP or linearize tracer's primal, a batch tracer's value: the trace below.
        value = getattr(value, 'primal', getattr(value, 'val', None))
    return False


def _compiled_whole(module: Any, args: tuple, kwargs: dict) -> bool:
    """Whether the outermost call is traced into a program compiled as a whole.

    Otherwise its operations run one by one (eagerly, or under an eager ``grad``,
    and so do the bodies of lifted transforms such as ``remat`` inside it; in
    ``lazy_init``, the initializers), and a reused call, a compiled program, could
    round differently from them.
    """
    scope = module.scope
    if scope is not None and scope.flags.get('lazy_init'):
        # A traced forward whose initializers run op by op (off the trace, or from
        # its pruned program evaluated equation by equation), under nn.vmap too.
        return False
    for leaf in jax.tree_util.tree_leaves((args, kwargs)):
        if isinstance(leaf, (_Tracer, jax.Array)):
            return _staged(leaf)
    # No array argument: the variables tell.
    return any(_staged(leaf) for leaf in jax.tree_util.tree_leaves(module.variables))


def _split(args: tuple, kwargs: dict) -> tuple[list, Any, tuple, tuple, bool]:
    """``(array leaves, treedef, static leaves, array positions, traced)`` of the arguments."""
    leaves, treedef = jax.tree_util.tree_flatten((args, kwargs))
    arrays, statics, positions = [], [], []
    traced = False
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, _Tracer):
            traced = True
            arrays.append(leaf)
            positions.append(i)
        else:
            # A concrete array's value may steer the body's Python (lazy_init counts
            # on that); inside a reused program it would be a tracer.
            statics.append(_static(leaf))
    return arrays, treedef, tuple(statics), tuple(positions), traced


def _merge(treedef: Any, arrays: tuple, statics: tuple, positions: tuple) -> tuple[tuple, dict]:
    leaves: list = list(statics)
    for position, array in zip(positions, arrays):
        leaves.insert(position, array)
    return jax.tree_util.tree_unflatten(treedef, leaves)


def _module_key(extra: tuple, labelled: bool) -> tuple[Any, tuple]:
    # Profiling labels go outside the compiled function (the reuse wrapper only
    # reuses while every active wrapper can do that), so the name stays out.
    return extra[0], extra


def _body(extra: tuple, inner_scope: Any, *arrays: Any) -> Any:
    _key, module, fun, method_name, compact, treedef, statics, positions = extra
    args, kwargs = _merge(treedef, arrays, statics, positions)
    session = _session.get()
    outer_inside = session.inside
    session.inside = inner_scope
    before = session.calls
    try:
        clone = module.clone(parent=inner_scope)
        y = call_wrapped_method(clone, fun, method_name, compact, args, kwargs)
    finally:
        session.inside = outer_inside
    # The clone's own call counts one: more means the method calls submodules.
    _composite[type(module), fun] = session.calls > before + 1
    for leaf in jax.tree_util.tree_leaves(y):
        if not isinstance(leaf, (_Tracer, jax.Array)):
            raise _NotReusable
    return y


def _streams_allow_reuse(scope: Any) -> bool:
    """Every rng stream is derived by path (the lifted jit passes path hashes).

    (``lazy_init``, whose initializers run op by op, never gets here: its scopes'
    flag stops reuse for the whole call, see :func:`_compiled_whole`.)"""
    return all(getattr(stream, 'path', None) is not None for stream in scope.rngs.values())


def _reuse(session: _Session, next_fn, args: tuple, kwargs: dict, context) -> Any:
    module = context.module
    scope = module.scope
    # The clone inside starts afresh; so must the call it stands for. A @compact
    # method must not have claimed names yet (a recurrent call, or setup-made
    # submodules); any other method must not run inside a compact method (a
    # helper of one, or a lifted function in compact mode, shares its naming).
    compact = bool(getattr(context.method, 'compact', False))
    if scope.reservations if compact else in_compact_method(module):
        return next_fn(*args, **kwargs)
    try:
        arrays, treedef, statics, positions, traced = _split(args, kwargs)
        if not traced:
            return next_fn(*args, **kwargs)
        key = _program_key(module, context.method, treedef, statics)
        hash(key)
    except (_NotReusable, TypeError):
        return next_fn(*args, **kwargs)
    if key in session.refused or not _streams_allow_reuse(scope):
        return next_fn(*args, **kwargs)
    if session.jitted is None:
        from linen.transforms._jit import jit_over_scopes

        session.jitted = jit_over_scopes(_body, module_key=_module_key, name=REUSED_NAME)
    jitted = session.jitted
    extra = (key, module, context.method, context.method_name, compact, treedef, statics, positions)
    try:
        return call_at_boundary(
            module,
            context.method_name,
            context.method,
            lambda *_a, **_k: jitted(extra, scope, *arrays),
            args,
            kwargs,
        )
    except _NotReusable:
        session.refused.add(key)
    except Exception as exc:
        from linen.transforms.errors import TransformArgumentError

        # A nested nn.jit drawing random numbers cannot run inside another one.
        if not isinstance(exc, TransformArgumentError):
            raise
        session.refused.add(key)
    return next_fn(*args, **kwargs)


def reuse_method_call(next_fn, args: tuple, kwargs: dict, context) -> Any:
    """The ``linen_method_wrapper`` of trace reuse (see the module docstring)."""
    session = _session.get()
    if session is None:
        # The outermost call: its trace gets its own cache of programs; inside a
        # call not compiled as a whole nothing is reused (but methods are learnt).
        token = _session.set(_Session(_compiled_whole(context.module, args, kwargs)))
        try:
            return next_fn(*args, **kwargs)
        finally:
            _session.reset(token)
    session.calls += 1
    inside = session.inside
    if inside is not None:
        # Inside a reuse trace: run as usual, but a module bound outside the reused
        # module's subtree (a shared one) would close over the caller's values,
        # which a reused program cannot see. Raised before it runs, so nothing of
        # the caller's changes.
        prefix = inside.path
        if context.module.scope.path[: len(prefix)] != prefix:
            raise _NotReusable
        return next_fn(*args, **kwargs)
    module = context.module
    if getattr(getattr(type(module), context.method_name, None), 'inner_fun', None) is not (
        context.method
    ):
        # Not the class's own method: a function a lifted transform runs on the
        # module (an nn.cond branch, say), whose compact mode the caller decides.
        return next_fn(*args, **kwargs)
    composite = _composite.get((type(module), context.method))
    if not session.reuse:
        if composite is None:
            # Learn whether the method calls submodules from a call that runs as
            # usual (an eager init, say), so a later trace reuses what repeats
            # from its first call, and never puts a leaf layer behind a boundary.
            before = session.calls
            y = next_fn(*args, **kwargs)
            _composite[type(module), context.method] = session.calls > before
            return y
        return next_fn(*args, **kwargs)
    if composite is False:
        return next_fn(*args, **kwargs)
    if not wrappers_are_relative():
        return next_fn(*args, **kwargs)
    return _reuse(session, next_fn, args, kwargs, context)


def _pass_through(next_fn, args: tuple, kwargs: dict, context) -> Any:
    return next_fn(*args, **kwargs)


# Reuse needs nothing done outside a compiled boundary; having the half keeps the
# chain "relative", so nn.jit's and reuse's programs serve every instance.
# It runs before a module's lazy setup: a reused call's setup runs on the clone
# inside the program, once per program, not once more outside per instance.
_REUSE = MethodWrapper(reuse_method_call, at_boundary=_pass_through, before_setup=True)


def reuse_wrapper() -> MethodWrapper | None:
    """The wrapper while trace reuse is on in this context; ``None`` when off."""
    return _REUSE if reuse_enabled() else None
