"""Tracebacks that end where the user's code called linen (``config.linen_filter_frames``).

An error that leaves ``init``, ``init_with_output``, ``lazy_init`` or ``apply`` reads,
as in Flax, as the user's own calls down to the line that called into linen: the
frames of code in the ``linen`` package (each directory of its namespace, whichever
distribution ships it) are taken out of the exception's traceback at those entry
points. Flax gets the same result from JAX's private traceback API; this is plain
Python (a traceback is a linked list of frames, rebuilt without linen's).

``LINEN_FILTER_FRAMES=0`` (``config.update('linen_filter_frames', False)``) or JAX's
``JAX_TRACEBACK_FILTERING=off`` keeps every frame, for debugging linen itself.

>>> import jax, jax.numpy as jnp
>>> import linen.nn as nn
>>> class Counter(nn.Module):
...     @nn.compact
...     def __call__(self, x):
...         self.variable('counts', 'n', jnp.zeros, ()).value += 1
...         return x
>>> variables = Counter().init(jax.random.key(0), jnp.ones(2))
>>> try:
...     Counter().apply(variables, jnp.ones(2))  # 'counts' is not mutable
... except nn.errors.ModifyScopeVariableError as err:
...     error = err
>>> import traceback
>>> [frame.name for frame in traceback.extract_tb(error.__traceback__)]
['<module>', '__call__']
"""

from __future__ import annotations

import os
import types

import jax

import linen
from linen.core import config

__all__ = ['hide_linen_frames']


def hide_linen_frames(error: BaseException) -> None:
    """Take linen's frames out of ``error.__traceback__`` (in place), unless switched off.

    Call it in an ``except`` clause of an entry point and re-raise with a bare
    ``raise``: a bare re-raise adds no entry for the entry point's own frame.
    """
    if not config.linen_filter_frames or jax.config.jax_traceback_filtering == 'off':
        return
    directories = _linen_directories()
    kept = []
    hidden = False
    tb = error.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith(directories):
            hidden = True
        else:
            kept.append(tb)
        tb = tb.tb_next
    if not hidden:  # already filtered (a nested entry point) or none of linen's
        return
    rebuilt = None
    for entry in reversed(kept):
        rebuilt = types.TracebackType(rebuilt, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    error.__traceback__ = rebuilt


def _linen_directories() -> tuple[str, ...]:
    # (read on each error: a namespace package's path grows as distributions install)
    return tuple(os.path.join(d, '') for d in linen.__path__)
