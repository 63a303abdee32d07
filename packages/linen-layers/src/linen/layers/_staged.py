"""Runs of JAX operations a layer emits, staged once per input type and inlined.

Traced, every ``jnp``/``lax`` call runs JAX's Python (argument checks, promotion,
binding), on every call of the layer. A run of them written as one function and
wrapped with :func:`staged` is traced once per input type; later calls insert its
cached equations into the caller's program. The equations are those the direct
calls emit (so the numbers and the compiled program are too), and so are their
profiling labels: inlined equations take the caller's name stack.

A staged function of *one* operation on values (reshapes are exact and do not count)
is also used outside a staging trace. Eagerly it is one compiled fast-path call (a
bare primitive is a Python dispatch, about three times slower); one operation is what
eager dispatch compiles anyway, so the numbers are those of the direct operation. A
run of several staged together could round differently, so such runs stay direct
outside a staging trace. A contraction (``dot_general``, a convolution) is staged only
where :func:`one_op_exact` says so: under an eager ``grad`` JAX would transpose the
jitted call as a whole, and compile, say, a product's transpose together with the
reshuffle of its axes, which can round otherwise than the op-by-op program Flax's
layer runs there (JAX 0.12: a kernel's gradient in its last bits).

A gradient of a gradient is the other exception (fuzz finding F36): under JAX 0.12 a
staged call differentiated twice in reverse gets some cotangents added in another
grouping than its direct operations, even a lone reshape. Where
:func:`nested_derivative` says a call could be (an operand carrying two derivatives,
two carrying different ones, or one inside a lifted derivative that runs under
another), the layers run every operation bare.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.interpreters.partial_eval as pe

from linen.core.lifting import derivatives, in_nested_derivative, outer_derivative

# JAX 0.12 names inlining at trace time `Inline.JAX_EARLY` (and `inline=True` now
# means inlining at lowering); a JAX without the enum meant it by `inline=True`.
INLINE_WHILE_TRACING = getattr(getattr(jax, 'Inline', None), 'JAX_EARLY', True)


# The tracer of a trace that stages operations into a program (jit, make_jaxpr).
STAGING_TRACER = getattr(pe, 'DynamicJaxprTracer', None)


def is_staged(x) -> bool:
    """Whether ``x`` is a value of a trace that stages its operations (not an eager one)."""
    return STAGING_TRACER is not None and isinstance(x, STAGING_TRACER)


def _over_concrete(x) -> bool:
    """Whether tracer ``x`` transforms concrete values (no staging trace below it).

    Descends the values a transformation's tracer carries (``primal`` of ``jvp`` and
    ``grad``, ``val`` of ``vmap``: an eager ``vmap`` over an eager ``grad`` is over
    concrete values too); a tracer carrying neither answers for itself.
    """
    while isinstance(x, jax.core.Tracer):
        if type(x) is STAGING_TRACER:
            return False
        inner = getattr(x, 'primal', None)
        if inner is None:
            inner = getattr(x, 'val', None)
        if inner is None:
            return x.to_concrete_value() is not None
        x = inner
    return True


# Under JAX 0.12 (trace-time inlining is `Inline.JAX_EARLY`), a staged call
# differentiated in reverse, whose derivative is then differentiated in reverse again
# (a gradient of a gradient), has some cotangents added in another grouping than its
# direct operations get: another program than Flax's, 1 ulp apart (fuzz finding F36).
# JAX 0.10 keeps the direct grouping.
_NESTED_REVERSE_REGROUPS = INLINE_WHILE_TRACING is not True


def nested_derivative(*values) -> bool:
    """Whether staged calls on ``values`` could be differentiated twice in reverse, where
    JAX would group their cotangents otherwise than the direct operations' (F36): one
    of them carries two differentiations, two carry different ones (F37: a user's own
    ``jax.grad`` over a layer's input inside a gradient over its parameters), or one
    carries one inside a lifted derivative that runs under another
    (``linen.core.lifting.in_nested_derivative``). Then every staged call runs as its
    direct operations, reshapes too. Never under JAX 0.10.
    """
    if not _NESTED_REVERSE_REGROUPS:
        return False
    nested = outer = None
    for x in values:
        if type(x) is STAGING_TRACER or not isinstance(x, jax.core.Tracer):
            continue
        count = derivatives(x)
        if count > 1:
            return True
        if count:
            # Two values carrying different derivatives: a gradient penalty's input (its
            # inner derivative) meeting parameters differentiated around it.
            trace = outer_derivative(x)
            if outer is None:
                outer = trace
            elif trace is not outer:
                return True
            if nested is None:
                nested = in_nested_derivative()
            if nested:
                return True
    return False


def one_op_exact(*values) -> bool:
    """Whether a one-operation staged call on ``values`` gives the direct operation's numbers.

    Not when one of them is transformed outside ``jit`` (a tracer over concrete values:
    eager ``jax.grad``, ``jax.jvp``, ``jax.vmap`` of either): JAX would differentiate the
    staged call as a whole and run its derivative compiled in one piece, where the
    direct operation's runs op by op (a gradient's transpose, a second derivative's
    products). Nor where a gradient of a gradient would regroup its sums
    (:func:`nested_derivative`). Otherwise, under ``jit``, everything is compiled
    together anyway.
    """
    for x in values:
        if isinstance(x, jax.core.Tracer) and type(x) is not STAGING_TRACER:
            if _over_concrete(x) or nested_derivative(x):
                return False
    return True


def staged(fn: Callable, static_argnums: int | tuple[int, ...] = ()) -> Callable:
    """``fn`` jitted and inlined into the program that traces it."""
    return jax.jit(fn, static_argnums=static_argnums, inline=INLINE_WHILE_TRACING)
