"""Running JAX's heavy work at the bottom of a fresh interpreter stack chunk.

CPython (3.11 to 3.13 at least) keeps Python frames on a stack made of 16 KiB
chunks. When a frame does not fit in the current chunk, a new one is allocated,
and it is freed as soon as that frame returns. Code that loops at a depth where
its calls just cross a chunk's end allocates and frees a chunk on every call
(CPython issue gh-142183): a fixed position in the stack, not the code, makes it
slow. JAX's tracing, linearization and batching rules are such loops, and a
model's module calls decide the depth they run at: a reused block's
linearization inside a train step ran twice as slowly as the same program from a
shallower caller (JAX 0.12, Python 3.12: 33 ms instead of 17 ms).

:func:`on_fresh_chunk` calls a function from a frame larger than a chunk. Such a
frame never fits in what is left of the current chunk, so CPython starts a new
one (of 64 KiB) with that frame at its bottom; everything the call does runs
above it, at the same position whatever the caller's depth, with tens of
kilobytes of stack before the next boundary. It costs a chunk allocation per
call, some microseconds: the lifted ``jit`` uses it where JAX does more than
look up a cached program.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ['on_fresh_chunk', 'SLOTS']

_T = TypeVar('_T')

# Value-stack slots of the runner's frame: 8 bytes each, 33.6 KiB in all, more than any
# remainder of a 16 KiB chunk. CPython then allocates a 64 KiB chunk (it doubles the size
# until the frame and a reserve fit), which leaves ~30 KiB above the frame. Unlike local
# variables, which are cleared when a frame starts, these slots are never written.
SLOTS = 4200

# Never true: it keeps the unpacking below from being compiled away as dead code.
_NEVER = False


def _make_runner() -> Callable[..., Any]:
    # Unpacking into SLOTS targets needs SLOTS value-stack slots, which size the frame;
    # it never runs. Source text, compiled once.
    targets = ', '.join('_' for _ in range(SLOTS))
    source = (
        'def on_fresh_chunk(fn, /, *args, **kwargs):\n'
        '    if _NEVER:\n'
        f'        {targets} = ()\n'
        '    return fn(*args, **kwargs)\n'
    )
    namespace: dict[str, Any] = {'_NEVER': _NEVER}
    # Compiled under this file's name: linen's own frames, which the tracebacks of
    # errors leaving an entry point leave out (``linen.core.tracebacks``).
    exec(compile(source, __file__, 'exec'), namespace)
    return namespace['on_fresh_chunk']


_runner = _make_runner()


def on_fresh_chunk(fn: Callable[..., _T], /, *args: Any, **kwargs: Any) -> _T:
    """``fn(*args, **kwargs)``, run above a frame that starts a fresh stack chunk.

    >>> on_fresh_chunk(divmod, 7, 2)
    (3, 1)
    """
    return _runner(fn, *args, **kwargs)
