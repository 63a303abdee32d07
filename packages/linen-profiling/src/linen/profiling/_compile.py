"""Compiling a program for a report, and checking the labels survived compilation.

Every report reads module labels from the compiled HLO's op names. JAX's persistent
compilation cache keys a program without its op metadata, so a cache hit can hand
back an executable compiled under other labels; :func:`compile_for_report` warns
(:class:`~linen.profiling.errors.StaleCompiledLabelsWarning`) when the compiled op
names are not those of the program's own lowering, instead of reporting them.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from typing import Any

from linen.profiling.errors import StaleCompiledLabelsWarning

__all__ = ['compile_for_report', 'compile_with_lowering']

_LOC_NAME = re.compile(r'loc\("([^"]+)"')
_OP_NAME = re.compile(r'op_name="([^"]+)"')


def compile_for_report(fn: Callable, args: tuple, kwargs: dict) -> Any:
    """``jax.jit(fn).lower(*args, **kwargs).compile()`` (``fn`` itself when it is jitted)."""
    return compile_with_lowering(fn, args, kwargs)[1]


def compile_with_lowering(fn: Callable, args: tuple, kwargs: dict) -> tuple[Any, Any]:
    """``(lowered, compiled)`` of ``fn``, as :func:`compile_for_report` compiles it."""
    import jax

    jitted = fn if hasattr(fn, 'lower') else jax.jit(fn)
    lowered = jitted.lower(*args, **kwargs)
    compiled = lowered.compile()
    if jax.config.jax_compilation_cache_dir:
        # Only a persistent cache can hand back another program's op names.
        lowered_names = set(_LOC_NAME.findall(lowered.as_text(debug_info=True)))
        # Op paths only (``jit(f)/Model/Dense_0/dot_general``; argument names are
        # escaped differently in the two texts); a fusion joins its ops' names by ';'.
        compiled_names = {
            n
            for joined in _OP_NAME.findall(compiled.as_text())
            for n in joined.split(';')
            if '/' in n
        }
        # An inner jit is lowered as a function of its own whose names XLA prefixes
        # with the call site's when it inlines it: a name is known when it, or a
        # suffix of it at a '/', is a lowered name.
        foreign = sorted(n for n in compiled_names if not _known(n, lowered_names))
        # XLA renames a few ops itself; an executable compiled under other labels
        # has most of its names foreign.
        if len(foreign) > len(compiled_names) - len(foreign):
            warnings.warn(StaleCompiledLabelsWarning(tuple(foreign)), stacklevel=3)
    return lowered, compiled


def unoptimized_hlo_text(lowered: Any) -> str:
    """The HLO text of a program before XLA's optimizations, with its labels."""
    return lowered.as_text(dialect='hlo', debug_info=True)


def _known(name: str, lowered: set[str]) -> bool:
    if name in lowered:
        return True
    parts = name.split('/')
    return any('/'.join(parts[i:]) in lowered for i in range(1, len(parts) - 1))
