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
]

# With a signature (optimized HLO) or without (``Lowered.as_text(dialect='hlo')``).
_HEADER = re.compile(r'^(ENTRY\s+)?%?([\w.\-]+)\s*(?:\(.*\)\s*->\s*.*)?\{\s*$')
_INSTRUCTION = re.compile(r'^\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$')
_OP_NAME = re.compile(r'op_name="((?:[^"\\]|\\.)*)"')
_CALLED = re.compile(
    r'\b(calls|to_apply|body|condition|true_computation|false_computation|'
    r'branch_computations|called_computations)=(\{[^}]*\}|%?[\w.\-]+)'
)
_OPERAND = re.compile(r'%([\w.\-]+)')
_TRIP_COUNT = re.compile(r'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"?(\d+)')
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
