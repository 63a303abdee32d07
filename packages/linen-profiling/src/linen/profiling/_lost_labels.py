"""Labels for the instructions that XLA's optimizations left without one.

JAX writes a label (``op_name``) on every instruction it emits; XLA's passes
keep it on the instructions they rewrite, except where they build new ones. On
CPU the convolution of a kernel gradient is rebuilt in a canonical layout: the
new ``convolution`` has no label, the old label stays on a ``bitcast`` of its
result, which a later fusion may absorb, label and all. Left alone, that work
belongs to no module, and the module's backward pass shows 0 FLOPs.

:func:`recover_labels` gives such instructions a label, in two steps:

1. A matmul (``dot`` or ``convolution``) takes the label of the matmul of the
   unoptimized program (``lowered.as_text(dialect='hlo', debug_info=True)``,
   public API) that it computes: same FLOPs, same number of output elements
   (both survive layout changes), not claimed by a labelled instruction. Where
   XLA merged the forward matmul of a ``remat`` block with its recomputation
   (common-subexpression elimination), the survivor may carry the recomputation's
   label; it then takes the forward one, since the program computes it once.
2. Any other unlabelled instruction outside fusions (layout copies, transposes)
   takes the label of its nearest labelled user (the work was done for it), else
   of its nearest labelled operand (a copy of a result is part of producing it).

Two identical matmuls of two modules that both lost their labels may be given
each other's label; their costs are equal, so the rows are not affected.
"""

from __future__ import annotations

from collections.abc import Iterator

from linen.profiling._cost_model import instruction_flops, shape_elements
from linen.profiling._hlo import (
    HloComputation,
    HloInstruction,
    HloModuleText,
    module_path_from_op_name,
    phase_of_op_name,
)

__all__ = ['recover_labels']

_MATMULS = frozenset({'dot', 'convolution'})
# No label to give or take: arguments (their op_name is the argument's name)
# and the plumbing of tuples.
_NOT_LABELLED = frozenset({'parameter', 'tuple', 'get-tuple-element', 'constant'})


def recover_labels(module: HloModuleText, lowered: HloModuleText | None = None) -> HloModuleText:
    """Fill in, in place, the labels ``module`` (an optimized program) lost; returns it.

    ``lowered`` is the same program before optimization (with its metadata);
    without it, only the neighbours' labels are used.
    """
    if lowered is not None:
        _match_matmuls(module, lowered)
    _inherit_from_neighbours(module)
    return module


def _fusion_callers(module: HloModuleText) -> dict[str, HloInstruction]:
    return {
        name: instruction
        for computation in module.computations.values()
        for instruction in computation.instructions.values()
        if instruction.opcode == 'fusion'
        for name in instruction.called
    }


def _matmuls(module: HloModuleText) -> Iterator[tuple[HloComputation, HloInstruction]]:
    for computation in module.computations.values():
        for instruction in computation.instructions.values():
            if instruction.opcode in _MATMULS:
                yield computation, instruction


def _key(module: HloModuleText, computation: HloComputation, instruction: HloInstruction):
    return instruction_flops(module, computation, instruction), shape_elements(instruction.shape)


def _path_and_phase(op_name: str) -> tuple[str, str]:
    return module_path_from_op_name(op_name), phase_of_op_name(op_name)


def _join(prefix: str, op_name: str) -> str:
    return f'{prefix}/{op_name}' if prefix and op_name else prefix or op_name


def _call_prefixes(module: HloModuleText):
    """``prefixes(computation name)``: the labels its instructions get, one per call site.

    An unoptimized program keeps a called function (a nested ``jax.jit``, such as a
    block trace reuse runs as one program) as a computation whose instructions
    carry labels relative to the call; XLA's inliner puts the ``call``'s label in
    front. Other callers (loops, conditionals) add nothing.
    """
    sites: dict[str, list[tuple[str, str]]] = {}
    for computation in module.computations.values():
        for instruction in computation.instructions.values():
            added = instruction.op_name if instruction.opcode == 'call' else ''
            for callee in instruction.called:
                sites.setdefault(callee, []).append((computation.name, added))
    memo: dict[str, list[str]] = {}

    def prefixes(name: str) -> list[str]:
        if name not in memo:
            memo[name] = ['']  # (a cycle, which HLO has none of, ends here)
            callers = sites.get(name)
            if callers:
                memo[name] = [
                    _join(p, added) for caller, added in callers for p in prefixes(caller)
                ]
        return memo[name]

    return prefixes


def _match_matmuls(module: HloModuleText, lowered: HloModuleText) -> None:
    # Unoptimized matmuls by (FLOPs, output elements), in program order.
    pool: dict[tuple, list[str]] = {}
    lowered_counts: dict[tuple, int] = {}
    prefixes = _call_prefixes(lowered)
    for computation, instruction in _matmuls(lowered):
        key = _key(lowered, computation, instruction)
        # Once per call site of its computation (a reused block's program is one
        # computation called once per instance), under that site's label.
        for prefix in prefixes(computation.name):
            lowered_counts[key] = lowered_counts.get(key, 0) + 1
            if instruction.op_name:
                pool.setdefault(key, []).append(_join(prefix, instruction.op_name))
    callers = _fusion_callers(module)
    labelled, unlabelled = [], []
    counts: dict[tuple, int] = {}
    for computation, instruction in _matmuls(module):
        key = _key(module, computation, instruction)
        counts[key] = counts.get(key, 0) + 1
        caller = callers.get(computation.name)
        label = instruction.op_name or (caller.op_name if caller is not None else '')
        (labelled if label else unlabelled).append((key, instruction, caller, label))
    for key, _, _, label in labelled:
        candidates = pool.get(key, [])
        if label in candidates:
            candidates.remove(label)
    for key, instruction, _, label in labelled:
        # Fewer optimized matmuls of this size than unoptimized ones: XLA merged
        # some. A recomputation merged with its forward matmul runs once, forward.
        candidates = pool.get(key, [])
        path, phase = _path_and_phase(label)
        if phase != 'recompute' or counts[key] >= lowered_counts.get(key, 0):
            continue
        twin = next((c for c in candidates if _path_and_phase(c) == (path, 'forward')), None)
        if twin is not None:
            candidates.remove(twin)
            _set_label(instruction, twin, 'forward twin')
    for key, instruction, caller, _ in unlabelled:
        candidates = pool.get(key, [])
        if not candidates:
            continue
        label = candidates.pop(0)
        _set_label(instruction, label, 'unoptimized program')
        if caller is not None and not caller.op_name:
            _set_label(caller, label, instruction.name)


def _set_label(instruction: HloInstruction, op_name: str, source: str) -> None:
    instruction.op_name = op_name
    instruction.label_from = source


def _inherit_from_neighbours(module: HloModuleText) -> None:
    """Unlabelled instructions outside fusions: the label of the nearest labelled user, else operand.

    Fused computations are left alone: an unlabelled fused instruction counts
    under its fusion's label already.
    """
    fused = set(_fusion_callers(module))
    for computation in module.computations.values():
        if computation.name in fused:
            continue
        instructions = computation.instructions
        users: dict[str, list[str]] = {name: [] for name in instructions}
        for instruction in instructions.values():
            for operand in dict.fromkeys(instruction.operands):
                if operand in users:
                    users[operand].append(instruction.name)
        operands = {name: list(instruction.operands) for name, instruction in instructions.items()}
        found = {}
        for instruction in instructions.values():
            if instruction.op_name or instruction.opcode in _NOT_LABELLED:
                continue
            source = _nearest_labelled(instruction.name, instructions, users)
            if source is None:
                source = _nearest_labelled(instruction.name, instructions, operands)
            if source is not None:
                found[instruction.name] = source
        # Assigned after the search: a label spreads from an instruction's own
        # label only, never from one inherited a step before.
        for name, source in found.items():
            _set_label(instructions[name], instructions[source].op_name, source)


def _nearest_labelled(
    start: str, instructions: dict[str, HloInstruction], edges: dict[str, list[str]]
) -> str | None:
    """Breadth-first along ``edges`` from ``start``: the first instruction with a label."""
    frontier, seen = [start], {start}
    while frontier:
        following = []
        for name in frontier:
            for neighbour in edges.get(name, ()):
                instruction = instructions.get(neighbour)
                if neighbour in seen or instruction is None or instruction.opcode == 'parameter':
                    continue
                seen.add(neighbour)
                if instruction.op_name:
                    return neighbour
                following.append(neighbour)
        frontier = following
    return None
