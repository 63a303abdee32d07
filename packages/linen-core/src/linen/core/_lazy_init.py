"""``lazy_init``: concrete variables without the forward work they do not depend on.

Flax evaluates the init function partially: inputs given as ``jax.ShapeDtypeStruct``
are unknown, everything else is known, and only the known part runs. Here the same
result comes from public JAX API only, two ways:

- eagerly (no argument is a tracer): the init function runs under ``jax.eval_shape``
  over the abstract inputs and ``jax.ensure_compile_time_eval``, so every operation on
  concrete values (PRNG splits, initialisers) executes as in eager ``init`` and every
  operation on an abstract input is traced and dropped; the scope runs key
  derivation and initialisers outside the trace altogether (``concrete_call``),
  where JAX's compiled fast path applies;
- under an outer transformation (a key or input is a tracer): the init function is
  traced once to a jaxpr, the equations no variable depends on are pruned, and the
  rest is staged into the outer trace, whose jaxpr then holds the initialisers and
  none of the forward pass.

Python leaves such as flags stay concrete either way.

Where a variable does depend on an abstract input (or Python code reads its value),
Flax 0.12.9 and later evaluate the whole function with zeros in its place, and so
does ``lazy_init`` (see :func:`zeros_for_abstract`); Flax 0.12.8 raised
:class:`~linen.core.errors.LazyInitError`, as ``partial_init`` does, which the flag
``linen_strict_lazy_init`` keeps.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from linen.core import errors

__all__ = [
    'NEEDS_VALUES',
    'any_abstract',
    'concrete_call',
    'concrete_init',
    'partial_init',
    'zeros_for_abstract',
]

# True while `_eager` runs an init function: the initialisers (and their keys) then
# run outside the shape trace, see `concrete_call`. A context variable, like every
# other switch of the library: a thread or task running its own init never sees it.
EAGER_LAZY_INIT: ContextVar[bool] = ContextVar('linen_eager_lazy_init', default=False)


def concrete_call(fn: Callable[..., Any], *args, **kwargs) -> Any:
    """``fn(*args, **kwargs)``; during an eager ``lazy_init``, run outside its shape trace.

    Under the trace every jitted initialiser (``truncated_normal``...) takes JAX's
    slow Python path and each of its operations is first staged, then evaluated;
    outside it, the same call takes the compiled fast path (about 3x less time). The
    values are the same. A tracer among the arguments (a key split by ``nn.vmap``)
    runs inside the trace directly. A function that reads a traced value (say an
    initialiser closed over an abstract input) fails outside and runs again inside
    the trace, where it fails as in Flax's ``lazy_init`` or gives its traced result;
    see :func:`concrete_init` for functions that may draw keys before they fail.
    """
    return concrete_init(fn, args, kwargs, None)


def concrete_init(
    fn: Callable[..., Any], args: tuple, kwargs: dict[str, Any], counters: dict | None
) -> Any:
    """:func:`concrete_call` of a scope's variable initialiser.

    ``counters`` is the scope's rng counters: an initialiser may be a closure that
    calls ``make_rng`` and then reads a traced value (``lambda: x + normal(
    self.make_rng('params'), x.shape)``); the keys its failed attempt drew are given
    back before the second run, which then draws the keys an ``init`` draws.
    """
    if not EAGER_LAZY_INIT.get() or any(isinstance(a, jax.core.Tracer) for a in args):
        return fn(*args, **kwargs)
    drawn = None if counters is None else dict(counters)
    try:
        with jax.core.eval_context():
            return fn(*args, **kwargs)
    except Exception:
        if drawn is not None:
            counters.clear()
            counters.update(drawn)
        return fn(*args, **kwargs)


@functools.cache
def _jex():
    # `jax.extend` imports Pallas and checkify (~0.08 s): only the lazy_init path
    # that prunes a jaxpr needs it, so `import linen.nn` does not pay for it.
    from jax.extend import core

    return core


def _is_abstract(x: Any) -> bool:
    return isinstance(x, jax.ShapeDtypeStruct)


def _is_array(x: Any) -> bool:
    # Arrays (and tracers of an outer transform) become inputs of the traced
    # function; anything else (flags, strings, None, Python numbers) stays a
    # concrete Python value, as Flax's known inputs do.
    return isinstance(x, (jax.Array, np.ndarray, np.generic))


def _is_var(v: Any) -> bool:
    return isinstance(v, _jex().Var) and not isinstance(v, _jex().DropVar)


def _unknown_outputs(jaxpr, unknown_inputs: list[bool]) -> list[bool]:
    """Which outputs of ``jaxpr`` depend on the inputs flagged unknown.

    Exact through the higher-order primitives lifted transforms emit (``jit``,
    ``remat``, ``scan``, ``while``, ``cond`` with a known branch index, custom
    derivatives): a variable created inside ``nn.jit``/``nn.remat``/``nn.scan``
    depends on the rng, not on the forward input that also flows into the same
    primitive. Any other primitive is conservative: every output of an equation
    that reads an unknown value is unknown.
    """
    unknown = {v for v, u in zip(jaxpr.invars, unknown_inputs) if u}
    for eqn in jaxpr.eqns:
        reads = [_is_var(v) and v in unknown for v in eqn.invars]
        if not any(reads):
            continue
        outs = _unknown_eqn_outputs(eqn, reads)
        unknown.update(v for v, u in zip(eqn.outvars, outs) if u and _is_var(v))
    return [_is_var(v) and v in unknown for v in jaxpr.outvars]


def _open(jaxpr) -> Any:
    return getattr(jaxpr, 'jaxpr', jaxpr)


def _carry_fixpoint(body, fixed: list[bool], carry: list[bool], tail: list[bool]) -> list[bool]:
    """The body's output flags once the loop-carried flags stop growing."""
    while True:
        out = _unknown_outputs(body, fixed + carry + tail)
        grown = [a or b for a, b in zip(carry, out[: len(carry)])]
        if grown == carry:
            return out
        carry = grown


def _scan_counts(params) -> tuple[int, int] | None:
    """How many constants and carried values a ``scan`` equation has.

    Older JAX names them in the parameters; newer JAX describes the groups of
    inputs (constants, carry, scanned) and outputs (carry, stacked) as trees.
    ``None`` when neither is there: the caller then stays conservative.
    """
    if 'num_consts' in params:
        return params['num_consts'], params['num_carry']
    groups_in, groups_out = params.get('ft_in'), params.get('ft_out')
    try:
        return len(list(groups_in.elts[0].vals)), len(list(groups_out.elts[0].vals))
    except AttributeError:
        return None


def _unknown_eqn_outputs(eqn, reads: list[bool]) -> list[bool]:
    params = eqn.params
    everything = [True] * len(eqn.outvars)
    name = eqn.primitive.name
    if name == 'scan':
        counts = _scan_counts(params)
        if counts is None:
            return everything
        consts, carry = counts
        out = _carry_fixpoint(
            _open(params['jaxpr']),
            reads[:consts],
            reads[consts : consts + carry],
            reads[consts + carry :],
        )
        carry_flags = [a or b for a, b in zip(reads[consts : consts + carry], out[:carry])]
        return carry_flags + out[carry:]
    if name == 'while':
        cond_n, body_n = params['cond_nconsts'], params['body_nconsts']
        body_consts = reads[cond_n : cond_n + body_n]
        carry = reads[cond_n + body_n :]
        out = _carry_fixpoint(_open(params['body_jaxpr']), body_consts, carry, [])
        carry = [a or b for a, b in zip(carry, out)]
        # An unknown trip count makes every carried value unknown.
        if any(_unknown_outputs(_open(params['cond_jaxpr']), reads[:cond_n] + carry)):
            return everything
        return carry
    if name == 'cond':
        if reads[0]:  # the branch taken depends on an unknown value
            return everything
        flags = [False] * len(eqn.outvars)
        for branch in params['branches']:
            out = _unknown_outputs(_open(branch), reads[1:])
            flags = [a or b for a, b in zip(flags, out)]
        return flags
    # jit, remat, closed calls, custom_jvp/custom_vjp: one inner jaxpr whose inputs
    # and outputs are the equation's own.
    inner = [
        _open(v)
        for v in params.values()
        if isinstance(_open(v), _jex().Jaxpr)
        and len(_open(v).invars) == len(eqn.invars)
        and len(_open(v).outvars) == len(eqn.outvars)
    ]
    if len(inner) == 1:
        return _unknown_outputs(inner[0], reads)
    return everything


def _prune(closed) -> Any:
    """A closed jaxpr with only the equations the outputs (or effects) need."""
    jaxpr = closed.jaxpr
    needed = {v for v in jaxpr.outvars if _is_var(v)}
    kept = []
    for eqn in reversed(jaxpr.eqns):
        if eqn.effects or any(_is_var(v) and v in needed for v in eqn.outvars):
            kept.append(eqn)
            needed.update(v for v in eqn.invars if _is_var(v))
    kept.reverse()
    effects = set()
    for eqn in kept:
        effects.update(eqn.effects)
    # Same inputs as the traced jaxpr, so its debug info (argument names) still fits.
    jex = _jex()
    pruned = jex.Jaxpr(
        jaxpr.constvars, jaxpr.invars, jaxpr.outvars, kept, effects, jaxpr.debug_info
    )
    return jex.ClosedJaxpr(pruned, closed.consts)


# What ``partial_init`` raises when the variables need an abstract input's value: its
# own analysis, or JAX refusing a traced value to Python code (``if x.sum() > 0``,
# ``int(x)``, ``np.asarray(x)``).
NEEDS_VALUES: tuple[type[Exception], ...] = (
    errors.LazyInitError,
    jax.errors.ConcretizationTypeError,
    jax.errors.TracerIntegerConversionError,
    jax.errors.TracerArrayConversionError,
)


def _zeros_like(x: Any) -> Any:
    if not _is_abstract(x):
        return x
    return jnp.zeros(x.shape, x.dtype, device=x.sharding)


def any_abstract(tree: Any) -> bool:
    """Whether a leaf of ``tree`` is a ``jax.ShapeDtypeStruct``."""
    return any(_is_abstract(x) for x in jax.tree_util.tree_leaves(tree))


def zeros_for_abstract(tree: Any) -> Any:
    """``tree`` with every ``jax.ShapeDtypeStruct`` leaf replaced by zeros of its type.

    Flax's ``lazy_init`` rule since 0.12.9: the zeros are placed as the struct's
    sharding says (default placement without one).

    >>> import jax, jax.numpy as jnp
    >>> zeros_for_abstract((jax.ShapeDtypeStruct((2,), jnp.float32), 'flag'))
    (Array([0., 0.], dtype=float32), 'flag')
    """
    return jax.tree_util.tree_map(_zeros_like, tree)


def partial_init(fn: Callable[..., Any], *args, **kwargs) -> Any:
    """``fn(*args, **kwargs)`` with only the work its output depends on.

    ``fn`` must return a pytree of arrays (the variables). Leaves of ``args`` and
    ``kwargs`` given as ``jax.ShapeDtypeStruct`` are abstract: an output that
    depends on one raises :class:`~linen.core.errors.LazyInitError`.
    """
    leaves, treedef = jax.tree_util.tree_flatten((args, kwargs))
    if any(isinstance(x, jax.core.Tracer) for x in leaves):
        return _staged(fn, leaves, treedef)
    return _eager(fn, leaves, treedef)


def _eager(fn, leaves, treedef):
    """Concrete inputs: run what needs no abstract value, only trace the rest.

    ``fn`` runs under ``jax.eval_shape`` over the abstract leaves, inside
    ``jax.ensure_compile_time_eval``: an operation whose inputs are all concrete
    (the PRNG splits, the initialisers) executes at once, as in eager ``init``; one
    that reads an abstract input (the forward pass) is only traced, never run.
    """
    abstract = [i for i, x in enumerate(leaves) if _is_abstract(x)]
    captured = []

    def run(*values):
        full = list(leaves)
        for i, x in zip(abstract, values):
            full[i] = x
        a, kw = jax.tree_util.tree_unflatten(treedef, full)
        token = EAGER_LAZY_INIT.set(True)
        try:
            with jax.ensure_compile_time_eval():
                out = fn(*a, **kw)
        finally:
            EAGER_LAZY_INIT.reset(token)
        # Tracers are not kept past their trace (`jax.checking_leaks` would object).
        traced = any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(out))
        captured.append(None if traced else out)

    jax.eval_shape(run, *[leaves[i] for i in abstract])
    out = captured[0]
    if out is None:
        # A variable came out of a primitive that also reads an abstract input (a
        # lifted jit, remat or scan): the per-equation view above cannot tell
        # whether it depends on it; the jaxpr analysis of `_staged` can.
        return _staged(fn, leaves, treedef)
    return out


def _path_str(path) -> str:
    return '/'.join(str(getattr(k, 'key', k)) for k in path)


def _staged(fn, leaves, treedef):
    """Under an outer transformation: trace once, prune, and stage the kept equations.

    The outer trace (``jit``, ``make_jaxpr``) then holds the initialisers and none of
    the forward pass.
    """
    dynamic = [i for i, x in enumerate(leaves) if _is_abstract(x) or _is_array(x)]

    def flat_fn(*dyn):
        full = list(leaves)
        for i, x in zip(dynamic, dyn):
            full[i] = x
        a, kw = jax.tree_util.tree_unflatten(treedef, full)
        return fn(*a, **kw)

    dyn_args = [leaves[i] for i in dynamic]
    closed, out_shape = jax.make_jaxpr(flat_fn, return_shape=True)(*dyn_args)
    jaxpr = closed.jaxpr
    unknown = _unknown_outputs(jaxpr, [_is_abstract(x) for x in dyn_args])
    if any(unknown):
        flat = jax.tree_util.tree_flatten_with_path(out_shape)[0]
        needing = [(_path_str(p), v) for (p, v), u in zip(flat, unknown) if u]
        raise errors.LazyInitError([p for p, _ in needing], needing[0][1])
    pruned = _prune(closed)
    out_flat = _jex().jaxpr_as_fun(pruned)(*_stand_ins(pruned.jaxpr, dyn_args))
    # A variable the jaxpr holds as a literal (a constant initialiser) comes back
    # as a NumPy value; init would have given a jax.Array.
    out_flat = [x if isinstance(x, jax.Array) else jnp.asarray(x) for x in out_flat]
    return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(out_shape), out_flat)


def _stand_ins(jaxpr, args: list[Any]) -> list[Any]:
    """``args`` with zeros for the abstract inputs a kept equation still reads.

    An abstract input no kept equation reads needs no memory: its
    ``ShapeDtypeStruct`` stands in. One that is read feeds an equation kept for
    another of its outputs (the ``jit``, ``remat`` or ``scan`` of a lifted
    transform returns the variables beside the forward result); the analysis has
    shown no returned value depends on it, so any value of the right type will do.
    """
    read = {v for eqn in jaxpr.eqns for v in eqn.invars if _is_var(v)}
    read.update(v for v in jaxpr.outvars if _is_var(v))
    return [
        jnp.zeros(x.shape, x.dtype) if _is_abstract(x) and v in read else x
        for v, x in zip(jaxpr.invars, args)
    ]
