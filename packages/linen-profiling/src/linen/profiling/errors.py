"""Errors of linen-profiling (all derive from :class:`linen.core.errors.LinenError`)."""

from __future__ import annotations

from linen.core.errors import LinenError

__all__ = [
    'ProfileTraceNotFoundError',
    'ProfileNoDeviceOpsError',
]


class ProfileTraceNotFoundError(LinenError, FileNotFoundError):
    """The profiler wrote no ``*.xplane.pb`` where :func:`profile` looked for it.

    >>> print(ProfileTraceNotFoundError('/read-only/dir'))
    No "*.xplane.pb" trace was written under '/read-only/dir'. ...
    """

    def __init__(self, logdir: str):
        super().__init__(
            f'No "*.xplane.pb" trace was written under {logdir!r}. The JAX profiler '
            f'writes to "<logdir>/plugins/profile/<run>/"; check that the directory is '
            f'writable and that no other profiler session was running (only one trace can '
            f'be recorded at a time).'
        )


class ProfileNoDeviceOpsError(LinenError, RuntimeError):
    """The trace holds no XLA op events of the profiled program.

    >>> print(ProfileNoDeviceOpsError('jit_f', '/tmp/run.xplane.pb', ['jit_g']))
    The trace '/tmp/run.xplane.pb' has no XLA op events of program 'jit_f' (programs with
    events: jit_g). ...
    """

    def __init__(self, program: str, xplane_path: str, programs_seen: list[str]):
        seen = ', '.join(sorted(set(programs_seen))) or 'none'
        super().__init__(
            f'The trace {xplane_path!r} has no XLA op events of program {program!r} '
            f'(programs with events: {seen}). The function may compile to no device work '
            f'(it only returns its inputs), or the profiler did not record device activity; '
            f'profile a function that computes something, with steps >= 1.'
        )
