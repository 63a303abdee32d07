"""XLA's own cost analysis, one instruction at a time.

``compiled.cost_analysis()`` gives totals for a whole program. To split them by
module we cut the optimized HLO into one small module per instruction (the
instruction, parameters standing in for its operands, and the computations it
calls) and ask XLA's ``HloCostAnalysis`` for each. Inside a fusion every fused
instruction is costed the same way, so a fusion that mixes the ops of two modules
gives each its own FLOPs; the fusion's memory traffic (bytes accessed, which XLA
counts at the fusion's boundary) goes to the fusion's own label.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass

from linen.profiling._hlo import HloComputation, HloInstruction, HloModuleText, strip_metadata

__all__ = ['InstructionCost', 'instruction_costs', 'label_shares']

# Opcodes whose cost is that of the computations they run, which we descend into.
_CONTROL_FLOW = frozenset({'while', 'conditional', 'call', 'async-start'})
_FREE = frozenset({'parameter'})
_CONTROL_PREDECESSORS = re.compile(r',\s*control-predecessors=\{[^}]*\}')


@dataclass(frozen=True)
class InstructionCost:
    """The cost XLA assigns to one instruction, times how often it runs.

    ``op_name`` is the label the cost belongs to; ``kind`` is ``'op'`` for a
    top-level instruction, ``'fused'`` for an instruction inside a fusion (which
    carries FLOPs and transcendentals but no bytes: the fusion's bytes are
    counted once, on the fusion, as ``'fusion'``).
    """

    instruction: str
    opcode: str
    op_name: str
    kind: str
    flops: float
    transcendentals: float
    bytes_accessed: float
    multiplier: int


def _cpu_client():
    from jax._src import xla_bridge

    return xla_bridge.get_backend('cpu')


@functools.lru_cache(maxsize=4096)
def _analyse(module_text: str) -> dict[str, float]:
    from jaxlib import _hlo, _jax

    module = _hlo.hlo_module_from_text(module_text)
    return dict(_jax.hlo_module_cost_analysis(_cpu_client(), module))


def _called_closure(module: HloModuleText, names: tuple[str, ...]) -> list[HloComputation]:
    seen: dict[str, HloComputation] = {}
    stack = list(names)
    while stack:
        name = stack.pop()
        if name in seen or name not in module.computations:
            continue
        computation = module.computations[name]
        seen[name] = computation
        for instruction in computation.instructions.values():
            stack.extend(instruction.called)
    # Callees first: the HLO parser wants a computation defined before use.
    ordered = [c for c in module.computations.values() if c.name in seen]
    return ordered


def _isolated_module(
    module: HloModuleText, computation: HloComputation, instruction: HloInstruction
) -> str:
    """HLO text of a module whose entry runs ``instruction`` alone on parameters."""
    rename: dict[str, str] = {}
    parameters = []
    for index, operand in enumerate(dict.fromkeys(instruction.operands)):
        source = computation.instructions.get(operand)
        if source is None:
            raise KeyError(operand)
        rename[operand] = f'linen_operand.{index}'
        parameters.append((rename[operand], source.shape, index))
    line = instruction.line.strip()
    if line.startswith('ROOT '):
        line = line[len('ROOT ') :]
    line = _CONTROL_PREDECESSORS.sub('', line)
    head, sep, tail = line.partition('=')
    # Only operand references are renamed: called computations keep their names.
    paren = tail.find('(', tail.find(instruction.opcode))
    prefix, args = tail[:paren], tail[paren:]
    args = re.sub(r'%([\w.\-]+)', lambda m: '%' + rename.get(m.group(1), m.group(1)), args, count=0)
    signature = ', '.join(f'{name}: {_no_layout(shape)}' for name, shape, _ in parameters)
    body = [f'  %{name} = {shape} parameter({index})' for name, shape, index in parameters]
    body.append(f'  ROOT {head.strip()} {sep}{prefix}{args}')
    callees = _called_closure(module, instruction.called)
    entry = [
        f'ENTRY %linen_isolated ({signature}) -> {_no_layout(instruction.shape)} {{',
        *body,
        '}',
    ]
    # Metadata would only refer to stack frames the small module does not have;
    # without it identical layers also give identical text (one XLA call, cached).
    return strip_metadata(
        '\n\n'.join(['HloModule linen_isolated', *(c.text for c in callees), '\n'.join(entry)])
    )


def _no_layout(shape: str) -> str:
    # Signatures may omit layouts; dropping them avoids layout mismatch checks.
    return re.sub(r'\{[^{}]*\}', '', shape)


def _cost(module: HloModuleText, computation: HloComputation, instruction: HloInstruction):
    try:
        text = _isolated_module(module, computation, instruction)
        return _analyse(text)
    except Exception:
        return {}


def instruction_costs(module: HloModuleText) -> Iterator[InstructionCost]:
    """XLA's cost of every executed instruction of ``module``, with its label.

    Instructions inside ``while`` bodies count ``known_trip_count`` times (once
    when XLA does not know the count); every branch of a ``conditional`` counts
    once, so for conditionals the result is an upper bound.
    """
    yield from _walk(module, module.computations[module.entry], 1)


def _walk(
    module: HloModuleText, computation: HloComputation, multiplier: int
) -> Iterator[InstructionCost]:
    for instruction in computation.instructions.values():
        if instruction.opcode in _FREE:
            continue
        if instruction.opcode in _CONTROL_FLOW and instruction.called:
            inner = multiplier
            if instruction.opcode == 'while':
                inner = multiplier * (instruction.trip_count or 1)
            for name in instruction.called:
                callee = module.computations.get(name)
                if callee is not None:
                    yield from _walk(module, callee, inner)
            continue
        cost = _cost(module, computation, instruction)
        if instruction.opcode == 'fusion':
            fused = list(_walk_fused(module, instruction, multiplier, instruction.op_name))
            bytes_accessed = cost.get('bytes accessed', 0.0) * multiplier
            for op_name, share in _shares(fused, instruction.op_name).items():
                yield InstructionCost(
                    instruction=instruction.name,
                    opcode=instruction.opcode,
                    op_name=op_name,
                    kind='fusion',
                    flops=0.0,
                    transcendentals=0.0,
                    bytes_accessed=bytes_accessed * share,
                    multiplier=multiplier,
                )
            yield from fused
            continue
        yield InstructionCost(
            instruction=instruction.name,
            opcode=instruction.opcode,
            op_name=instruction.op_name,
            kind='op',
            flops=cost.get('flops', 0.0) * multiplier,
            transcendentals=cost.get('transcendentals', 0.0) * multiplier,
            bytes_accessed=cost.get('bytes accessed', 0.0) * multiplier,
            multiplier=multiplier,
        )


def _walk_fused(
    module: HloModuleText, fusion: HloInstruction, multiplier: int, fallback_op_name: str
) -> Iterator[InstructionCost]:
    for name in fusion.called:
        fused = module.computations.get(name)
        if fused is None:
            continue
        for instruction in fused.instructions.values():
            if instruction.opcode in _FREE:
                continue
            op_name = instruction.op_name or fallback_op_name
            if instruction.opcode == 'fusion':
                yield from _walk_fused(module, instruction, multiplier, op_name)
                continue
            cost = _cost(module, fused, instruction)
            flops = cost.get('flops', 0.0)
            transcendentals = cost.get('transcendentals', 0.0)
            if not flops and not transcendentals:
                continue
            yield InstructionCost(
                instruction=instruction.name,
                opcode=instruction.opcode,
                op_name=op_name,
                kind='fused',
                flops=flops * multiplier,
                transcendentals=transcendentals * multiplier,
                bytes_accessed=0.0,
                multiplier=multiplier,
            )


def _shares(fused: list[InstructionCost], fallback_op_name: str) -> dict[str, float]:
    """How a fusion's boundary cost (bytes, time) divides among the labels inside it.

    XLA gives a fusion one label, often that of its root (a ``reduce_sum`` that
    absorbed a module's matmul is labelled ``reduce_sum``). Splitting in
    proportion to the fused instructions' FLOPs (plus transcendentals) puts the
    cost where the work is; a fusion without arithmetic keeps its own label.
    """
    weights: dict[str, float] = {}
    for cost in fused:
        weight = cost.flops + cost.transcendentals
        if weight > 0:
            weights[cost.op_name] = weights.get(cost.op_name, 0.0) + weight
    total = sum(weights.values())
    if total <= 0:
        return {fallback_op_name: 1.0}
    return {op_name: weight / total for op_name, weight in weights.items()}


def label_shares(module: HloModuleText, instruction: HloInstruction) -> dict[str, float]:
    """``{op_name: fraction}``: how the time of one executed instruction divides among labels.

    A fusion divides as :func:`_shares` says; any other instruction belongs to its
    own label.
    """
    if instruction.opcode != 'fusion':
        return {instruction.op_name: 1.0}
    return _shares(
        list(_walk_fused(module, instruction, 1, instruction.op_name)), instruction.op_name
    )
