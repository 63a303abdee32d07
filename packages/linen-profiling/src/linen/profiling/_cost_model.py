"""FLOPs and bytes of every HLO instruction, computed from the optimized HLO text.

``compiled.cost_analysis()`` gives totals for a whole program, and JAX has no
public API that costs one instruction. So the cost of each instruction is
computed here from its shapes, with the conventions of XLA's ``HloCostAnalysis``
(one FLOP per output element of an elementwise op, transcendental functions
counted apart, ``2 * M * N * K`` for a dot, two per multiply-add of a
convolution's kernel taps that fall on the input, one FLOP per element folded by
a reduction, the combiner's per update of a scatter). Tests check the sums
against ``compiled.cost_analysis()``.

An instruction this model cannot cost (a ``custom-call`` to an unknown target,
say) is not counted as zero: it is listed in :attr:`ModuleCosts.uncosted` and a
:class:`~linen.profiling.errors.UncostedInstructionWarning` names it.

Inside a fusion every fused instruction is costed on its own, so a fusion that
mixes the ops of two modules gives each its own FLOPs; the fusion's memory
traffic (bytes accessed, counted at the fusion's boundary) is divided among the
labels inside it in proportion to their FLOPs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass

from linen.profiling._hlo import (
    HloComputation,
    HloInstruction,
    HloModuleText,
    while_trip_count,
)

__all__ = [
    'InstructionCost',
    'instruction_costs',
    'instruction_flops',
    'label_shares',
    'shape_bytes',
    'shape_elements',
]

# Opcodes whose cost is that of the computations they run, which we descend into.
_CONTROL_FLOW = frozenset({'while', 'conditional', 'call', 'async-start'})
# Opcodes that move no data and compute nothing (views, bookkeeping).
_FREE = frozenset(
    {
        'parameter',
        'constant',
        'tuple',
        'get-tuple-element',
        'bitcast',
        'after-all',
        'partition-id',
        'replica-id',
        'opt-barrier',
        'add-dependency',
        'async-done',
        'async-update',
        'copy-done',
        'recv-done',
        'send-done',
        'all-reduce-done',
        'all-gather-done',
        'collective-permute-done',
        'domain',
    }
)
# Elementwise ops XLA counts as transcendentals (one per output element).
_TRANSCENDENTAL = frozenset(
    {
        'exponential',
        'exponential-minus-one',
        'log',
        'log-plus-one',
        'logistic',
        'tanh',
        'sine',
        'cosine',
        'tan',
        'atan2',
        'power',
        'sqrt',
        'rsqrt',
        'cbrt',
        'erf',
    }
)
# Elementwise ops that cost one FLOP per output element.
_ELEMENTWISE = frozenset(
    {
        'add',
        'subtract',
        'multiply',
        'divide',
        'remainder',
        'maximum',
        'minimum',
        'negate',
        'abs',
        'sign',
        'floor',
        'ceil',
        'round-nearest-afz',
        'round-nearest-even',
        'compare',
        'select',
        'clamp',
        'and',
        'or',
        'xor',
        'not',
        'shift-left',
        'shift-right-arithmetic',
        'shift-right-logical',
        'convert',
        'is-finite',
        'real',
        'imag',
        'complex',
        'popcnt',
        'count-leading-zeros',
        'stochastic-convert',
        'reduce-precision',
        'map',
    }
)
# Ops that only move data: bytes in and out, no FLOPs.
_MOVES = frozenset(
    {
        'copy',
        'copy-start',
        'transpose',
        'reshape',
        'broadcast',
        'slice',
        'dynamic-slice',
        'dynamic-update-slice',
        'concatenate',
        'pad',
        'reverse',
        'gather',
        'iota',
        'rng',
        'rng-bit-generator',
        'rng-get-and-update-state',
        'all-gather',
        'all-gather-start',
        'all-to-all',
        'collective-permute',
        'collective-permute-start',
        'send',
        'recv',
        'infeed',
        'outfeed',
        'bitcast-convert',
        'set-dimension-size',
        'get-dimension-size',
        'sort',
        'fft',
        'triangular-solve',
        'cholesky',
    }
)
_ARRAY = re.compile(r'\b(pred|token|[subfc]\d+(?:e\d+m\d+\w*)?|bf16)\[([\d,]*)\]')
_DTYPE_BITS = {'pred': 8, 'token': 0, 'bf16': 16}
_DIMS = re.compile(r'(lhs_contracting_dims|rhs_contracting_dims|dimensions)=\{([\d,]*)\}')
_WINDOW = re.compile(r'window=\{([^}]*)\}')
_DIM_LABELS = re.compile(r'dim_labels=([\w?]+)_([\w?]+)->([\w?]+)')
_FEATURE_GROUPS = re.compile(r'feature_group_count=(\d+)')
_BATCH_GROUPS = re.compile(r'batch_group_count=(\d+)')


@dataclass(frozen=True)
class InstructionCost:
    """The cost of one instruction, times how often it runs.

    ``op_name`` is the label the cost belongs to; ``kind`` is ``'op'`` for a
    top-level instruction, ``'fused'`` for an instruction inside a fusion (which
    carries FLOPs and transcendentals but no bytes: the fusion's bytes are
    counted once, on the fusion, as ``'fusion'``). ``costed`` is ``False`` for
    an instruction whose cost is unknown (its numbers are then zero and it is
    listed as uncosted, never silently counted as free).
    """

    instruction: str
    opcode: str
    op_name: str
    kind: str
    flops: float
    transcendentals: float
    bytes_accessed: float
    multiplier: int
    costed: bool = True


def _arrays(shape: str) -> list[tuple[int, float]]:
    """``(elements, bytes per element)`` of every array in an HLO shape string."""
    result = []
    for dtype, dims in _ARRAY.findall(shape):
        bits = _DTYPE_BITS.get(dtype)
        if bits is None:
            digits = re.match(r'[subfc](\d+)', dtype)
            bits = int(digits.group(1)) if digits else 0
        elements = math.prod(int(d) for d in dims.split(',') if d) if dims else 1
        result.append((elements, bits / 8))
    return result


def shape_elements(shape: str) -> int:
    """Elements of every array in an HLO shape (``f32[8,4]{1,0}`` -> 32)."""
    return sum(elements for elements, _ in _arrays(shape))


def shape_bytes(shape: str) -> float:
    """Bytes of every array in an HLO shape (``f32[8,4]{1,0}`` -> 128)."""
    return sum(elements * size for elements, size in _arrays(shape))


def _dims(instruction: HloInstruction, key: str) -> tuple[int, ...]:
    for name, values in _DIMS.findall(instruction.attributes):
        if name == key:
            return tuple(int(v) for v in values.split(',') if v)
    return ()


def _dims_of(shape: str) -> tuple[int, ...]:
    match = _ARRAY.search(shape)
    if match is None:
        return ()
    return tuple(int(d) for d in match.group(2).split(',') if d)


def _operand_shape(computation: HloComputation, instruction: HloInstruction, index: int) -> str:
    if index >= len(instruction.operands):
        raise LookupError(f'{instruction.name} has no operand {index}')
    source = computation.instructions.get(instruction.operands[index])
    if source is None:
        raise LookupError(f'operand {instruction.operands[index]} of {instruction.name}')
    return source.shape


def _computation_flops(module: HloModuleText, name: str) -> tuple[float, float]:
    """FLOPs and transcendentals of one run of a scalar computation (a reducer)."""
    flops = transcendentals = 0.0
    computation = module.computations.get(name)
    for inner in computation.instructions.values() if computation is not None else ():
        if inner.opcode in _TRANSCENDENTAL:
            transcendentals += 1
        elif inner.opcode in _ELEMENTWISE:
            flops += 1
    return flops, transcendentals


def _reducer_flops(module: HloModuleText, instruction: HloInstruction) -> tuple[float, float]:
    """FLOPs and transcendentals of one application of a reduction's ``to_apply``."""
    flops = transcendentals = 0.0
    for name in instruction.called:
        more_flops, more_transcendentals = _computation_flops(module, name)
        flops += more_flops
        transcendentals += more_transcendentals
    return flops, transcendentals


def _arithmetic(
    module: HloModuleText, computation: HloComputation, instruction: HloInstruction
) -> tuple[float, float] | None:
    """``(flops, transcendentals)`` of one instruction; ``None`` when it cannot be costed."""
    opcode = instruction.opcode
    if opcode in _FREE or opcode in _MOVES:
        return 0.0, 0.0
    out = shape_elements(instruction.shape)
    if opcode in _TRANSCENDENTAL:
        return 0.0, float(out)
    if opcode in _ELEMENTWISE:
        return float(out), 0.0
    if opcode == 'dot':
        lhs = _dims_of(_operand_shape(computation, instruction, 0))
        contracted = math.prod(lhs[d] for d in _dims(instruction, 'lhs_contracting_dims'))
        return 2.0 * out * contracted, 0.0
    if opcode == 'convolution':
        return _convolution_flops(computation, instruction)
    if opcode in ('reduce', 'all-reduce', 'all-reduce-start', 'reduce-scatter'):
        half = max(len(instruction.operands) // 2, 1) if opcode == 'reduce' else 1
        inputs = sum(
            shape_elements(_operand_shape(computation, instruction, i)) for i in range(half)
        )
        per_input_out = out / max(half, 1) if opcode == 'reduce' else out
        folds = max(inputs / half - per_input_out, 0.0) if opcode == 'reduce' else inputs
        flops, transcendentals = _reducer_flops(module, instruction)
        return folds * max(flops, 1.0) * 1.0, folds * transcendentals
    if opcode == 'reduce-window':
        return _reduce_window_flops(module, computation, instruction)
    if opcode == 'scatter':
        # The combiner runs once per update element (XLA counts operand 2's).
        updates = shape_elements(_operand_shape(computation, instruction, 2))
        flops, transcendentals = _reducer_flops(module, instruction)
        return updates * flops, updates * transcendentals
    if opcode == 'select-and-scatter':
        # Per source element: taps - 1 selections, one scatter.
        source = shape_elements(_operand_shape(computation, instruction, 1))
        spatial = len(_dims_of(_operand_shape(computation, instruction, 0)))
        taps = math.prod(dim['size'][0] for dim in _window(instruction, spatial))
        select, scatter = (_computation_flops(module, name) for name in instruction.called[:2])
        return (
            source * (taps - 1) * select[0] + source * scatter[0],
            source * (taps - 1) * select[1] + source * scatter[1],
        )
    return None


def instruction_flops(
    module: HloModuleText, computation: HloComputation, instruction: HloInstruction
) -> float:
    """FLOPs of one execution of ``instruction`` (0 when it cannot be costed)."""
    try:
        arithmetic = _arithmetic(module, computation, instruction)
    except LookupError:
        return 0.0
    return arithmetic[0] if arithmetic is not None else 0.0


def _reduce_window_flops(
    module: HloModuleText, computation: HloComputation, instruction: HloInstruction
) -> tuple[float, float]:
    """The reducer runs ``taps - 1`` times per output element (of the first output).

    A variadic reduce-window (max pooling's gradient: values and indices) has a
    tuple of outputs; the reducer, which handles all of them, runs once per
    element of one. A window that spans a whole padded dimension (a cumulative
    sum) is counted as XLA counts it: one reduction of the dimension, then one
    step per output element.
    """
    window = _window(instruction, len(_dims_of(_operand_shape(computation, instruction, 0))))
    taps = math.prod(dim['size'][0] for dim in window)
    dims = _dims_of(instruction.shape)
    out = math.prod(dims)
    reductions = (taps - 1) * out
    reduced = [i for i, dim in enumerate(window) if dim['size'][0] != 1]
    padded = [i for i, dim in enumerate(window) if dim['pad'] != (0, 0)]
    if len(reduced) == 1 and reduced == padded and not instruction.shape.startswith('('):
        dim = window[reduced[0]]
        low, high = dim['pad']
        size = dim['size'][0]
        span = dims[reduced[0]]
        if low == high and size == 2 * low + 1 and low == span - 1:
            reductions = out // span + span - 1
    flops, transcendentals = _reducer_flops(module, instruction)
    return reductions * max(flops, 1.0), reductions * transcendentals


def _window(instruction: HloInstruction, spatial: int) -> list[dict[str, tuple[int, ...]]]:
    """Per spatial dimension: ``size``, ``stride``, ``pad`` (low, high), the two dilations."""
    fields: dict[str, list[tuple[int, ...]]] = {}
    match = _WINDOW.search(instruction.attributes)
    for item in match.group(1).split() if match else ():
        key, _, value = item.partition('=')
        per_dim = [tuple(int(v) for v in part.split('_')) for part in value.split('x')]
        fields[key] = per_dim
    default = {'size': (1,), 'stride': (1,), 'pad': (0, 0), 'lhs_dilate': (1,), 'rhs_dilate': (1,)}
    return [
        {key: fields.get(key, [value] * spatial)[dim] for key, value in default.items()}
        for dim in range(spatial)
    ]


def _valid_positions(size: int, kernel: int, out: int, window: dict) -> int:
    """(output position, kernel tap) pairs of one spatial dimension that read an input element.

    A tap that falls on padding, or between the elements of a dilated input,
    multiplies nothing: XLA's cost analysis does not count it, nor do we.
    """
    (stride,), (pad_low, _) = window['stride'], window['pad']
    (base_dilation,), (window_dilation,) = window['lhs_dilate'], window['rhs_dilate']
    count = 0
    for tap in range(kernel):
        for position in range(out):
            dilated = position * stride - pad_low + tap * window_dilation
            if dilated % base_dilation == 0 and 0 <= dilated // base_dilation < size:
                count += 1
    return count


def _convolution_flops(
    computation: HloComputation, instruction: HloInstruction
) -> tuple[float, float] | None:
    """Two FLOPs per multiply-add of a ``convolution``, counting only taps on the input."""
    labels = _DIM_LABELS.search(instruction.attributes)
    if labels is None:
        return None
    lhs_labels, rhs_labels, out_labels = labels.groups()
    lhs = _dims_of(_operand_shape(computation, instruction, 0))
    rhs = _dims_of(_operand_shape(computation, instruction, 1))
    out = _dims_of(instruction.shape)
    if not (len(lhs) == len(lhs_labels) and len(rhs) == len(rhs_labels)):
        return None
    if len(out) != len(out_labels) or not {'b', 'f'} <= set(lhs_labels) or 'f' not in out_labels:
        return None
    spatial = len(lhs_labels) - 2
    windows = _window(instruction, spatial)
    positions = 1
    for dim, window in enumerate(windows):
        axis = str(dim)
        positions *= _valid_positions(
            lhs[lhs_labels.index(axis)],
            rhs[rhs_labels.index(axis)],
            out[out_labels.index(axis)],
            window,
        )
    feature_groups = _FEATURE_GROUPS.search(instruction.attributes)
    batch_groups = _BATCH_GROUPS.search(instruction.attributes)
    in_features = lhs[lhs_labels.index('f')] // (
        int(feature_groups.group(1)) if feature_groups else 1
    )
    batch = lhs[lhs_labels.index('b')] // (int(batch_groups.group(1)) if batch_groups else 1)
    out_features = out[out_labels.index('f')]
    return 2.0 * batch * in_features * out_features * positions, 0.0


def _io_bytes(computation: HloComputation, instruction: HloInstruction) -> float:
    total = shape_bytes(instruction.shape)
    for name in dict.fromkeys(instruction.operands):
        source = computation.instructions.get(name)
        if source is not None:
            total += shape_bytes(source.shape)
    return total


def instruction_costs(module: HloModuleText) -> Iterator[InstructionCost]:
    """The cost of every executed instruction of ``module``, with its label.

    Instructions inside ``while`` bodies count once per iteration (the count of
    :func:`~linen.profiling._hlo.while_trip_count`; once when it is unknown); every
    branch of a ``conditional`` counts once, so for conditionals the result is an
    upper bound.
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
                inner = multiplier * (while_trip_count(module, computation, instruction) or 1)
            for name in instruction.called:
                callee = module.computations.get(name)
                if callee is not None:
                    yield from _walk(module, callee, inner)
            continue
        if instruction.opcode == 'fusion':
            fused = list(_walk_fused(module, instruction, multiplier, instruction.op_name))
            bytes_accessed = _io_bytes(computation, instruction) * multiplier
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
        arithmetic = _arithmetic(module, computation, instruction)
        flops, transcendentals = arithmetic if arithmetic is not None else (0.0, 0.0)
        yield InstructionCost(
            instruction=instruction.name,
            opcode=instruction.opcode,
            op_name=instruction.op_name,
            kind='op',
            flops=flops * multiplier,
            transcendentals=transcendentals * multiplier,
            bytes_accessed=_io_bytes(computation, instruction) * multiplier,
            multiplier=multiplier,
            costed=arithmetic is not None,
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
            arithmetic = _arithmetic(module, fused, instruction)
            if arithmetic is not None and not any(arithmetic):
                continue
            flops, transcendentals = arithmetic if arithmetic is not None else (0.0, 0.0)
            yield InstructionCost(
                instruction=instruction.name,
                opcode=instruction.opcode,
                op_name=op_name,
                kind='fused',
                flops=flops * multiplier,
                transcendentals=transcendentals * multiplier,
                bytes_accessed=0.0,
                multiplier=multiplier,
                costed=arithmetic is not None,
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
