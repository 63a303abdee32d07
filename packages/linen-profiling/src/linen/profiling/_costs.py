"""``module_costs``: FLOPs and bytes accessed per module path, from one compilation."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from linen.profiling._compile import compile_with_lowering, unoptimized_hlo_text
from linen.profiling._cost_model import InstructionCost, instruction_costs
from linen.profiling._hlo import module_path_from_op_name, parse_hlo_module, phase_of_op_name
from linen.profiling._lost_labels import recover_labels
from linen.profiling._report import format_table, human
from linen.profiling._tree import PathRows, indented_name, tree_rows
from linen.profiling.errors import UncostedInstructionWarning

__all__ = ['CostRow', 'ModuleCosts', 'module_costs']


@dataclass(frozen=True)
class CostRow:
    """The cost of one module path.

    ``flops``, ``transcendentals`` and ``bytes_accessed`` are the module's own
    (ops labelled exactly with this path); ``inclusive_*`` add every submodule.
    ``path`` is ``''`` for ops outside any module.

    For a differentiated function (a train step), ``forward_*``, ``backward_*``
    and ``recompute_*`` split the inclusive FLOPs and bytes into the forward
    pass, the backward pass and the forward work that ``remat`` repeats during
    the backward pass; they add up to ``inclusive_flops`` and
    ``inclusive_bytes_accessed`` (see :func:`phase_of_op_name`).
    """

    path: str
    flops: float
    transcendentals: float
    bytes_accessed: float
    inclusive_flops: float
    inclusive_transcendentals: float
    inclusive_bytes_accessed: float
    instructions: int
    forward_flops: float = 0.0
    backward_flops: float = 0.0
    recompute_flops: float = 0.0
    forward_bytes: float = 0.0
    backward_bytes: float = 0.0
    recompute_bytes: float = 0.0


@dataclass(frozen=True)
class ModuleCosts(PathRows):
    """What :func:`module_costs` returns: one row per module path, and the totals.

    ``xla_totals`` is ``compiled.cost_analysis()`` for the whole program. The
    rows add up to it, except that ops in a ``while`` body (``scan``) count once
    per iteration here and once in total there, and that a TPU's cost analysis
    counts bytes in its padded memory tiles (more than the arrays' own bytes,
    which the rows count). ``uncosted`` lists the
    instructions (``'name (opcode)'``) whose cost is unknown: they count as zero
    in the rows, so with any listed the FLOPs are a lower bound (a
    :class:`~linen.profiling.errors.UncostedInstructionWarning` says so too).
    """

    rows: tuple[CostRow, ...]
    flops: float
    transcendentals: float
    bytes_accessed: float
    xla_totals: dict[str, float] = field(default_factory=dict)
    instructions: tuple[InstructionCost, ...] = ()
    hlo_text: str = ''
    uncosted: tuple[str, ...] = ()

    def __str__(self) -> str:
        total = self.flops or 1.0
        body = []
        for row in self.rows:
            name = indented_name(row.path)
            body.append(
                [
                    name,
                    human(row.inclusive_flops),
                    human(row.flops),
                    f'{100.0 * row.inclusive_flops / total:.1f}%',
                    human(row.inclusive_transcendentals),
                    human(row.inclusive_bytes_accessed, 'B'),
                ]
            )
        body.append(
            [
                'total',
                human(self.flops),
                '',
                '100.0%',
                human(self.transcendentals),
                human(self.bytes_accessed, 'B'),
            ]
        )
        return format_table(
            'Cost per module (XLA cost analysis of the optimized HLO)',
            ['module', 'FLOPs', 'own FLOPs', '% FLOPs', 'transcendentals', 'bytes accessed'],
            body,
        )


_PHASES = ('forward', 'backward', 'recompute')


def costs_from_hlo_text(
    hlo_text: str, xla_totals: dict[str, float] | None = None, lowered_text: str = ''
) -> ModuleCosts:
    """:class:`ModuleCosts` of an optimized HLO module given as text.

    ``lowered_text``, the program's HLO before optimization, gives back the
    labels of the matmuls XLA rebuilt without one (``_lost_labels``).
    """
    module = recover_labels(
        parse_hlo_module(hlo_text), parse_hlo_module(lowered_text) if lowered_text else None
    )
    instructions = tuple(instruction_costs(module))
    own: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    for cost in instructions:
        path = module_path_from_op_name(cost.op_name)
        # flops, transcendentals, bytes, then (flops, bytes) per phase.
        values = own.setdefault(path, [0.0] * 9)
        values[0] += cost.flops
        values[1] += cost.transcendentals
        values[2] += cost.bytes_accessed
        phase = 3 + 2 * _PHASES.index(phase_of_op_name(cost.op_name))
        values[phase] += cost.flops
        values[phase + 1] += cost.bytes_accessed
        counts[path] = counts.get(path, 0) + 1
    rows = []
    for path, mine, total in tree_rows(own, 9):
        rows.append(
            CostRow(
                path=path,
                flops=mine[0],
                transcendentals=mine[1],
                bytes_accessed=mine[2],
                inclusive_flops=total[0],
                inclusive_transcendentals=total[1],
                inclusive_bytes_accessed=total[2],
                instructions=counts.get(path, 0),
                forward_flops=total[3],
                forward_bytes=total[4],
                backward_flops=total[5],
                backward_bytes=total[6],
                recompute_flops=total[7],
                recompute_bytes=total[8],
            )
        )
    uncosted = tuple(
        dict.fromkeys(
            f'{cost.instruction} ({cost.opcode})' for cost in instructions if not cost.costed
        )
    )
    if uncosted:
        warnings.warn(UncostedInstructionWarning(uncosted), stacklevel=3)
    return ModuleCosts(
        uncosted=uncosted,
        rows=tuple(rows),
        flops=sum(values[0] for values in own.values()),
        transcendentals=sum(values[1] for values in own.values()),
        bytes_accessed=sum(values[2] for values in own.values()),
        xla_totals=dict(xla_totals or {}),
        instructions=instructions,
        hlo_text=hlo_text,
    )


def module_costs(fn: Callable, *args: Any, **kwargs: Any) -> ModuleCosts:
    """FLOPs, transcendentals and bytes accessed per module path of a jitted function.

    ``fn`` is lowered and compiled once for ``args`` (it is wrapped in
    ``jax.jit`` unless it already is jitted); nothing runs. Each instruction of
    the optimized HLO, including the instructions inside fusions, is costed
    from its shapes (XLA's conventions; the sums match
    ``compiled.cost_analysis()``) and attributed to the module path in its
    ``op_name`` label, so labels must be on (the default) when ``fn`` is traced.

    Args:
      fn: the function to analyse, e.g. ``lambda v, x: model.apply(v, x)``.
      *args: its arguments (arrays or ``jax.ShapeDtypeStruct``).
      **kwargs: its keyword arguments.

    Returns:
      A :class:`ModuleCosts`; ``print`` it for the table, index it by path
      (``costs['MLP/Dense_0'].flops``) for the numbers.

    >>> import jax, jax.numpy as jnp
    >>> from linen.profiling import label_scope
    >>> def f(x, w):
    ...     with label_scope('Dense_0'):
    ...         return x @ w
    >>> module_costs(f, jnp.ones((4, 8)), jnp.ones((8, 2)))['Dense_0'].flops
    128.0
    """
    lowered, compiled = compile_with_lowering(fn, args, kwargs)
    totals = compiled.cost_analysis() or {}
    if isinstance(totals, list):  # one entry per device program in older JAX
        totals = totals[0] if totals else {}
    return costs_from_hlo_text(compiled.as_text(), totals, unoptimized_hlo_text(lowered))
