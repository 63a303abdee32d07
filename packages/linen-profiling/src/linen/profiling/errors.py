"""Errors of linen-profiling (all derive from :class:`linen.core.errors.LinenError`)."""

from __future__ import annotations

from linen.core.errors import LinenError

__all__ = [
    'MemoryAnalysisUnavailableWarning',
    'ProfileTraceUnreadableError',
    'ReplicatedParametersWarning',
    'StaleCompiledLabelsWarning',
    'UnknownDevicePeakError',
    'ProfileUnmatchedOpsWarning',
    'UncostedInstructionWarning',
    'ProfileTraceNotFoundError',
    'ProfileNoDeviceOpsError',
]


class ProfileTraceNotFoundError(LinenError, FileNotFoundError):
    """The profiler wrote no ``*.xplane.pb`` where :func:`profile` looked for it.

    >>> print(ProfileTraceNotFoundError('/read-only/dir'))
    No "*.xplane.pb" trace was written under '/read-only/dir'. ...
    """

    def __init__(self, logdir: str = ''):
        self.logdir = logdir
        super().__init__(
            f'No "*.xplane.pb" trace was written under {logdir!r}. The JAX profiler '
            f'writes to "<logdir>/plugins/profile/<run>/"; check that the directory is '
            f'writable and that no other profiler session was running (only one trace can '
            f'be recorded at a time).'
        )

    def __reduce__(self):
        return (type(self), (self.logdir,))


class ProfileNoDeviceOpsError(LinenError, RuntimeError):
    """The trace holds no XLA op events of the profiled program.

    >>> print(ProfileNoDeviceOpsError('jit_f', '/tmp/run.xplane.pb', ['jit_g']))
    The trace '/tmp/run.xplane.pb' has no XLA op events of program 'jit_f' (programs with
    events: jit_g). ...
    """

    def __init__(self, program: str = '', xplane_path: str = '', programs_seen: list[str] = ()):
        self.program, self.xplane_path = program, xplane_path
        self.programs_seen = list(programs_seen)
        seen = ', '.join(sorted(set(programs_seen))) or 'none'
        super().__init__(
            f'The trace {xplane_path!r} has no XLA op events of program {program!r} '
            f'(programs with events: {seen}). The function may compile to no device work '
            f'(it only returns its inputs), or the profiler did not record device activity; '
            f'profile a function that computes something, with steps >= 1.'
        )

    def __reduce__(self):
        return (type(self), (self.program, self.xplane_path, self.programs_seen))


class UncostedInstructionWarning(UserWarning):
    """Some HLO instructions have no known cost; the FLOPs reported are a lower bound.

    Raised as a warning by :func:`module_costs` (and the reports built on it)
    when the optimized program holds an instruction whose cost cannot be
    computed from its shapes, e.g. a ``custom-call`` to a backend library. The
    instructions are listed in ``ModuleCosts.uncosted``.
    """

    def __init__(self, instructions: tuple[str, ...] | list[str] = ()):
        self.instructions = tuple(instructions)
        shown = ', '.join(self.instructions[:8])
        more = f' and {len(self.instructions) - 8} more' if len(self.instructions) > 8 else ''
        super().__init__(
            f'No cost is known for {len(self.instructions)} HLO instruction(s): {shown}{more}. '
            f'They count as 0 in the report, so its FLOPs and bytes are lower bounds; '
            f'ModuleCosts.uncosted lists them. Compare with ModuleCosts.xla_totals, '
            f"XLA's own totals for the whole program."
        )

    def __reduce__(self):
        return (type(self), (self.instructions,))


class ProfileUnmatchedOpsWarning(UserWarning):
    """Op events of the profiled program name instructions its HLO does not have.

    Their time is reported under path ``''`` (outside any module) and listed in
    ``ModuleTimes.unmatched_ops``; the HLO given is not that of the program that
    ran (a different compilation of the same function).
    """

    def __init__(self, program: str = '', ops: tuple[str, ...] | list[str] = ()):
        self.program = program
        self.ops = tuple(ops)
        shown = ', '.join(self.ops[:8])
        super().__init__(
            f'{len(self.ops)} op event(s) of program {program!r} name no instruction of '
            f"the HLO used to label them ({shown}); their time is under path ''. Pass "
            f'the HLO of the executable that ran (compiled.as_text() of the object '
            f'whose calls were traced).'
        )

    def __reduce__(self):
        return (type(self), (self.program, self.ops))


class UnknownDevicePeakError(LinenError, LookupError):
    """:func:`roofline` has no peak figures for this device kind and none were given."""

    def __init__(self, device_kind: str = '', known: list[str] | tuple[str, ...] = ()):
        self.device_kind = device_kind
        self.known = tuple(known)
        super().__init__(
            f'No peak FLOP/s and bandwidth are known for device kind {device_kind!r} '
            f'(known: {", ".join(self.known)}). Pass peak_flops_per_second= and '
            f'peak_bytes_per_second= to roofline(), or add the device to '
            f'linen.profiling.DEVICE_PEAKS.'
        )

    def __reduce__(self):
        return (type(self), (self.device_kind, self.known))


class MemoryAnalysisUnavailableWarning(UserWarning):
    """The backend gave no ``compiled.memory_analysis()``; there is nothing to compare with.

    :func:`~linen.profiling.saved_activations` still reports the saved bytes it
    read from the HLO; ``SavedActivations.memory_analysis`` is ``None``.
    """

    def __init__(self, reason: str = ''):
        self.reason = reason
        super().__init__(
            f'compiled.memory_analysis() is not available on this backend ({reason}); '
            f'SavedActivations.memory_analysis is None (not zeros). The saved-activation '
            f'bytes come from the HLO and are unaffected.'
        )

    def __reduce__(self):
        return (type(self), (self.reason,))


class ProfileTraceUnreadableError(LinenError, ValueError):
    """The trace has device planes, but not what :func:`profile` reads from them.

    On GPU the op events are on the ``XLA Ops`` line of each ``/device:GPU:N``
    plane, each event naming its HLO instruction and carrying the ``hlo_module``
    stat; on CPU they are events with an ``hlo_op`` stat on the ``/host:CPU``
    plane. A trace without them (another profiler version, a trace recorded
    with device tracing off) cannot be attributed to modules.

    >>> print(ProfileTraceUnreadableError('/t.xplane.pb', 'no "XLA Ops" line'))
    Cannot read op times from the trace '/t.xplane.pb': no "XLA Ops" line. ...
    """

    def __init__(self, xplane_path: str = '', missing: str = ''):
        self.xplane_path, self.missing = xplane_path, missing
        super().__init__(
            f'Cannot read op times from the trace {xplane_path!r}: {missing}. The reader '
            f'expects, per device plane "/device:GPU:N" (or "/device:TPU:N"), an "XLA Ops" '
            f'line whose events carry the "hlo_module" stat (names the program) and are named '
            f'after HLO instructions, or, on CPU, "/host:CPU" events with "hlo_op" and '
            f'"hlo_module" stats. Record the trace with jax.profiler.trace on a jaxlib whose '
            f'profiler writes these (open it in XProf to see which planes it has).'
        )

    def __reduce__(self):
        return (type(self), (self.xplane_path, self.missing))


class ReplicatedParametersWarning(UserWarning):
    """Parameters held whole on every device take more memory than the tolerance allows.

    Raised as a warning by :func:`~linen.profiling.tabulate` with
    ``sharding=True``; ``offenders`` lists ``(path, bytes per device,
    replication factor)`` for the largest replicated parameters, largest first.
    """

    def __init__(
        self,
        replicated_bytes: int = 0,
        total_bytes: int = 0,
        tolerance: float = 0.0,
        offenders: tuple = (),
    ):
        self.replicated_bytes, self.total_bytes = replicated_bytes, total_bytes
        self.tolerance, self.offenders = tolerance, tuple(offenders)
        share = replicated_bytes / total_bytes if total_bytes else 0.0
        shown = ', '.join(f'{path} ({size:,} B x{factor})' for path, size, factor in self.offenders)
        super().__init__(
            f'{replicated_bytes:,} B of {total_bytes:,} B of parameters ({share:.0%}) are '
            f'replicated on more than one device, above the tolerance of {tolerance:.0%}. '
            f'Largest: {shown}. Shard them: give them logical axis names '
            f'(nn.with_logical_partitioning) mapped to mesh axes by the rules, or raise '
            f'replicated_tolerance= if this is intended.'
        )

    def __reduce__(self):
        return (
            type(self),
            (self.replicated_bytes, self.total_bytes, self.tolerance, self.offenders),
        )


class StaleCompiledLabelsWarning(UserWarning):
    """The compiled program carries op names its own lowering does not have.

    JAX's persistent compilation cache keys programs without their op metadata, so
    a program that differs from an earlier one only in its labels (another instance
    name, another naming rule) gets the earlier executable, labels included. A
    report read from it would attribute the work to the other program's modules.
    """

    def __init__(self, names: tuple[str, ...] = ()):
        self.names = tuple(names)
        shown = ', '.join(repr(n) for n in self.names[:3])
        super().__init__(
            f'The compiled program names ops that its lowering does not ({shown}); it '
            f"probably came from JAX's persistent compilation cache, whose key ignores op "
            f'names, compiled under other labels. Per-module attribution would be wrong. '
            f'Profile with the cache off (jax.config.update("jax_enable_compilation_cache", '
            f'False) before the first compile) or with an empty jax_compilation_cache_dir.'
        )

    def __reduce__(self):
        return (type(self), (self.names,))
