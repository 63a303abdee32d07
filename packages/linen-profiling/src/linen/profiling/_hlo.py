"""Reading HLO text: computations, instructions, and the module path in ``op_name``.

JAX writes the name stack of every traced primitive into the instruction's
``metadata={op_name="jit(apply)/MLP/Dense_0/dot_general"}``; XLA keeps it through
optimization, on fused instructions and (for the fusion as a whole) on the
fusion instruction. This module turns HLO text, from a compiled function or from
the HLO that a profiler trace carries, into a small table, and an ``op_name`` into
the module path it names (``MLP/Dense_0``) and the pass it belongs to (forward,
backward, recompute).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field

__all__ = [
    'HloComputation',
    'HloInstruction',
    'HloModuleText',
    'module_path_from_op_name',
    'parse_hlo_module',
    'phase_of_op_name',
    'strip_metadata',
    'while_trip_count',
]

# With a signature (optimized HLO) or without (``Lowered.as_text(dialect='hlo')``).
_HEADER = re.compile(r'^(ENTRY\s+)?%?([\w.\-]+)\s*(?:\(.*\)\s*->\s*.*)?\{\s*$')
_INSTRUCTION = re.compile(r'^\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$')
_OP_NAME = re.compile(r'op_name="((?:[^"\\]|\\.)*)"')
_CALLED = re.compile(
    r'\b(calls|to_apply|body|condition|true_computation|false_computation|'
    r'branch_computations|called_computations|select|scatter)=(\{[^}]*\}|%?[\w.\-]+)'
)
_OPERAND = re.compile(r'%([\w.\-]+)')
_TRIP_COUNT = re.compile(r'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"?(\d+)')
_TUPLE_INDEX = re.compile(r'\bindex=(\d+)')
_DIRECTION = re.compile(r'\bdirection=(\w+)')
_INT_CONSTANT = re.compile(r'\bconstant\((-?\d+)\)')
_LOOP_PART = re.compile(r'\b(condition|body)=%?([\w.\-]+)')
_MIRRORED = {'LT': 'GT', 'LE': 'GE', 'GT': 'LT', 'GE': 'LE', 'NE': 'NE'}
_METADATA = re.compile(r',\s*metadata=\{(?:[^{}"]|"(?:[^"\\]|\\.)*")*\}')

_WRAPPED = re.compile(r'^[^()/]*\((.*)\)$')


def _balanced_end(text: str, start: int, open_char: str, close_char: str) -> int:
    """Index just past the bracket that closes ``text[start]``."""
    depth = 0
    for index in range(start, len(text)):
        char = text[index]
        if char == open_char:
            depth += 1
        elif char == close_char:
            depth -= 1
            if depth == 0:
                return index + 1
    return len(text)


@dataclass
class HloInstruction:
    """One instruction line of HLO text, split into the parts we use."""

    name: str
    shape: str
    opcode: str
    operands: tuple[str, ...]
    attributes: str
    op_name: str
    called: tuple[str, ...]
    is_root: bool
    line: str
    # Where this instruction's ``op_name`` came from when XLA left it none
    # (``linen.profiling._lost_labels``); ``''`` for its own label.
    label_from: str = ''

    @property
    def trip_count(self) -> int | None:
        """XLA's known trip count of a ``while`` (``None`` when unknown)."""
        match = _TRIP_COUNT.search(self.attributes)
        return int(match.group(1)) if match else None


@dataclass
class HloComputation:
    name: str
    is_entry: bool
    lines: list[str] = field(default_factory=list)
    instructions: dict[str, HloInstruction] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return '\n'.join(self.lines)

    @property
    def root(self) -> HloInstruction | None:
        """The ``ROOT`` instruction (what the computation returns)."""
        return next((i for i in self.instructions.values() if i.is_root), None)


@dataclass
class HloModuleText:
    """A parsed HLO module: computations by name, the entry computation's name."""

    name: str
    computations: dict[str, HloComputation]
    entry: str

    def instruction(self, name: str) -> HloInstruction | None:
        for computation in self.computations.values():
            found = computation.instructions.get(name)
            if found is not None:
                return found
        return None

    def op_names(self) -> dict[str, str]:
        """Instruction name -> ``op_name`` for every instruction that has one."""
        return {
            instruction.name: instruction.op_name
            for computation in self.computations.values()
            for instruction in computation.instructions.values()
            if instruction.op_name
        }


def _parse_instruction(line: str) -> HloInstruction | None:
    match = _INSTRUCTION.match(line)
    if match is None:
        return None
    is_root, name, rest = bool(match.group(1)), match.group(2), match.group(3)
    rest = rest.strip()
    if rest.startswith('('):
        shape_end = _balanced_end(rest, 0, '(', ')')
    else:
        space = rest.find(' ')
        shape_end = space if space >= 0 else len(rest)
    shape = rest[:shape_end].strip()
    rest = rest[shape_end:].strip()
    paren = rest.find('(')
    if paren < 0:
        return None
    opcode = rest[:paren].strip()
    operands_end = _balanced_end(rest, paren, '(', ')')
    operand_text = rest[paren + 1 : operands_end - 1]
    attributes = rest[operands_end:]
    op_name_match = _OP_NAME.search(attributes)
    called: list[str] = []
    for _, target in _CALLED.findall(attributes):
        called.extend(name.lstrip('%') for name in re.findall(r'%?([\w.\-]+)', target))
    return HloInstruction(
        name=name,
        shape=shape,
        opcode=opcode,
        operands=_operands(operand_text),
        attributes=attributes,
        op_name=op_name_match.group(1) if op_name_match else '',
        called=tuple(called),
        is_root=is_root,
        line=line,
    )


def _operands(text: str) -> tuple[str, ...]:
    if '%' in text:
        return tuple(_OPERAND.findall(text))
    # Unoptimized HLO text names operands without '%': 'x.1, k.1'.
    text = re.sub(r'/\*.*?\*/', '', text)
    names = (part.split()[-1] for part in text.split(',') if part.strip())
    return tuple(name for name in names if name[0].isalpha() or name[0] == '_')


def parse_hlo_module(text: str) -> HloModuleText:
    """Parse the HLO text of one module (``compiled.as_text()``, ``HloModule.to_string()``)."""
    module_name = ''
    computations: dict[str, HloComputation] = {}
    entry = ''
    current: HloComputation | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith('HloModule '):
            module_name = stripped.split()[1].rstrip(',')
            continue
        if current is None:
            header = _HEADER.match(stripped)
            if header is not None:
                current = HloComputation(name=header.group(2), is_entry=bool(header.group(1)))
                current.lines.append(line)
                if current.is_entry:
                    entry = current.name
            continue
        current.lines.append(line)
        if stripped == '}':
            computations[current.name] = current
            current = None
            continue
        instruction = _parse_instruction(line)
        if instruction is not None:
            current.instructions[instruction.name] = instruction
    return HloModuleText(name=module_name, computations=computations, entry=entry)


def while_trip_count(
    module: HloModuleText, computation: HloComputation, loop: HloInstruction
) -> int | None:
    """How many times the ``while`` instruction ``loop`` of ``computation`` runs its body.

    XLA's ``known_trip_count`` when its backend config carries one (XLA's CPU
    compiler writes it); else read off a counted loop, which is what a TPU
    program's loops carry no config for: the condition compares one element of
    the loop state with an integer constant (``i < 7``), the body adds an integer
    constant to that element, and the loop starts it at an integer constant
    (through copies). ``None`` for any other loop (a bound that is data, a
    counter the body changes otherwise).

    >>> text = '''
    ... cond (p: (s32[], f32[3])) -> pred[] {
    ...   %p = (s32[], f32[3]) parameter(0)
    ...   %i = s32[] get-tuple-element(%p), index=0
    ...   %n = s32[] constant(10)
    ...   ROOT %lt = pred[] compare(%i, %n), direction=LT
    ... }
    ... body (p: (s32[], f32[3])) -> (s32[], f32[3]) {
    ...   %p = (s32[], f32[3]) parameter(0)
    ...   %i = s32[] get-tuple-element(%p), index=0
    ...   %x = f32[3] get-tuple-element(%p), index=1
    ...   %three = s32[] constant(3)
    ...   %next = s32[] add(%i, %three)
    ...   ROOT %t = (s32[], f32[3]) tuple(%next, %x)
    ... }
    ... ENTRY main (x: f32[3]) -> (s32[], f32[3]) {
    ...   %x = f32[3] parameter(0)
    ...   %one = s32[] constant(1)
    ...   %init = (s32[], f32[3]) tuple(%one, %x)
    ...   ROOT %loop = (s32[], f32[3]) while(%init), condition=%cond, body=%body
    ... }'''
    >>> module = parse_hlo_module(text)
    >>> main = module.computations[module.entry]
    >>> while_trip_count(module, main, main.instructions['loop'])  # i = 1, 4, 7
    3
    """
    known = loop.trip_count
    if known is not None:
        return known
    parts = dict(_LOOP_PART.findall(loop.attributes))
    condition = module.computations.get(parts.get('condition', ''))
    body = module.computations.get(parts.get('body', ''))
    if condition is None or body is None or len(loop.operands) != 1:
        return None
    compare = condition.root
    direction = _DIRECTION.search(compare.attributes) if compare is not None else None
    if compare is None or compare.opcode != 'compare' or direction is None:
        return None
    if len(compare.operands) != 2:
        return None
    left, right = compare.operands
    relation = direction.group(1)
    index, bound = _state_element(condition, left), _int_constant(condition, right)
    if index is None or bound is None:  # written the other way round: ``7 > i``
        index, bound = _state_element(condition, right), _int_constant(condition, left)
        relation = _MIRRORED.get(relation, '')
    init_tuple = computation.instructions.get(loop.operands[0])
    next_tuple = body.root
    if index is None or bound is None or init_tuple is None or next_tuple is None:
        return None
    if init_tuple.opcode != 'tuple' or next_tuple.opcode != 'tuple':
        return None
    if index >= len(init_tuple.operands) or index >= len(next_tuple.operands):
        return None
    start = _int_constant(computation, init_tuple.operands[index])
    step = _counter_step(body, next_tuple.operands[index], index)
    if start is None or step is None:
        return None
    return _trips(start, bound, step, relation)


def _through_copies(computation: HloComputation, name: str) -> HloInstruction | None:
    """The instruction ``name`` copies (a TPU moves a loop counter between memories)."""
    instruction = computation.instructions.get(name)
    while instruction is not None and instruction.opcode == 'copy' and instruction.operands:
        instruction = computation.instructions.get(instruction.operands[0])
    return instruction


def _int_constant(computation: HloComputation, name: str) -> int | None:
    """The value of ``name`` when it is an integer constant, seen through copies."""
    instruction = _through_copies(computation, name)
    if instruction is None or instruction.opcode != 'constant':
        return None
    match = _INT_CONSTANT.search(instruction.line)
    return int(match.group(1)) if match else None


def _state_element(computation: HloComputation, name: str) -> int | None:
    """``k`` when ``name`` is element ``k`` of the computation's (tuple) parameter (or a copy)."""
    instruction = _through_copies(computation, name)
    if instruction is None or instruction.opcode != 'get-tuple-element':
        return None
    source = computation.instructions.get(instruction.operands[0]) if instruction.operands else None
    match = _TUPLE_INDEX.search(instruction.attributes)
    if source is None or source.opcode != 'parameter' or match is None:
        return None
    return int(match.group(1))


def _counter_step(body: HloComputation, name: str, index: int) -> int | None:
    """``c`` when ``name`` is ``state[index] + c`` (or ``- c``) for an integer constant ``c``."""
    update = body.instructions.get(name)
    if update is None or update.opcode not in ('add', 'subtract') or len(update.operands) != 2:
        return None
    first, second = update.operands
    if _state_element(body, first) == index:
        step = _int_constant(body, second)
        if step is not None and update.opcode == 'subtract':
            step = -step
        return step
    if update.opcode == 'add' and _state_element(body, second) == index:
        return _int_constant(body, first)
    return None


def _trips(start: int, bound: int, step: int, relation: str) -> int | None:
    """Iterations of ``for (i = start; i <relation> bound; i += step)``; ``None`` if endless."""
    if relation in ('LT', 'LE'):
        end = bound if relation == 'LT' else bound + 1
        if start >= end:
            return 0
        return -((start - end) // step) if step > 0 else None
    if relation in ('GT', 'GE'):
        end = bound if relation == 'GT' else bound - 1
        if start <= end:
            return 0
        return -((end - start) // -step) if step < 0 else None
    if relation == 'NE':
        distance = bound - start
        if step == 0 or distance % step or distance // step < 0:
            return None if distance else 0
        return distance // step
    return None


def _unwrap(component: str) -> str:
    """The innermost name of a name-stack component: ``transpose(jvp(MLP))`` -> ``MLP``."""
    while True:
        match = _WRAPPED.match(component)
        if match is None:
            return component
        component = match.group(1)


def module_path_from_op_name(
    op_name: str, labels: Collection[tuple[str, ...]] | None = None
) -> str:
    """The module path an ``op_name`` names; ``''`` for an op outside any module.

    The path is built from the labels linen pushed (``labels``: label paths,
    outermost first; by default every path linen has pushed in this process):
    walking the components of ``op_name``, a component (seen through the
    wrappers a transformation puts around it, ``transpose(jvp(MLP))`` is
    ``MLP``) extends the path when the extended path is one linen pushed. Every
    other component, whatever JAX calls it (``jit(f)``, ``while``, ``body``,
    ``eval_jaxpr``, ``checkpoint``, a repeated scope under remat), is skipped.
    The last component, the primitive, is never part of the path.

    >>> paths = {('MLP',), ('MLP', 'Dense_0'), ('MLP', 'Block')}
    >>> module_path_from_op_name('jit(apply)/MLP/Dense_0/dot_general', paths)
    'MLP/Dense_0'
    >>> module_path_from_op_name('jit(f)/transpose(jvp(MLP))/eval_jaxpr/Block/mul', paths)
    'MLP/Block'
    >>> module_path_from_op_name('jit(f)/Other/add', paths)
    ''
    """
    if labels is None:
        from linen.profiling._labels import emitted_label_paths

        labels = emitted_label_paths()
    components = op_name.split('/')
    path: tuple[str, ...] = ()
    for component in components[:-1]:
        candidate = (*path, _unwrap(component))
        if candidate in labels:
            path = candidate
    return '/'.join(path)


def phase_of_op_name(op_name: str) -> str:
    """``'forward'``, ``'backward'`` or ``'recompute'``: the pass an op belongs to.

    The module path comes from linen's own labels; the pass can only come from
    the frames JAX records for its transformations: the backward pass runs
    under ``transpose(...)``, and the forward work ``remat`` repeats in it under
    ``rematted_computation``. Everything else is forward.

    >>> phase_of_op_name('jit(f)/jvp(MLP)/Dense_0/dot_general')
    'forward'
    >>> phase_of_op_name('jit(f)/transpose(jvp(MLP))/Dense_0/dot_general')
    'backward'
    >>> phase_of_op_name('jit(f)/transpose(jvp(M))/jvp(M)/checkpoint/rematted_computation/B/tanh')
    'recompute'
    """
    components = op_name.split('/')
    if 'rematted_computation' in components:
        return 'recompute'
    if any(component.startswith('transpose(') for component in components):
        return 'backward'
    return 'forward'


def strip_metadata(text: str) -> str:
    """HLO text without ``metadata={...}`` and source-location tables.

    Two compilations that differ only in labels give the same result.
    """
    body = []
    skipping_tables = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped in ('FileNames', 'FunctionNames', 'FileLocations', 'StackFrames'):
            skipping_tables = True
            continue
        if skipping_tables:
            if stripped and not stripped.startswith('%') and not stripped.startswith('ENTRY'):
                continue
            skipping_tables = False
        body.append(_METADATA.sub('', line))
    return '\n'.join(body).strip()
