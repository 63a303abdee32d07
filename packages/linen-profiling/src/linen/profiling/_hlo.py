"""Reading HLO text: computations, instructions, and the module path in ``op_name``.

JAX writes the name stack of every traced primitive into the instruction's
``metadata={op_name="jit(apply)/MLP/Dense_0/dot_general"}``; XLA keeps it through
optimization, on fused instructions and (for the fusion as a whole) on the
fusion instruction. This module turns HLO text, from a compiled function or from
the HLO that a profiler trace carries, into a small table, and an ``op_name`` into
the module path it names (``MLP/Dense_0``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = [
    'HloComputation',
    'HloInstruction',
    'HloModuleText',
    'module_path_from_op_name',
    'parse_hlo_module',
    'strip_metadata',
]

_HEADER = re.compile(r'^(ENTRY\s+)?%?([\w.\-]+)\s*\(.*\)\s*->\s*.*\{\s*$')
_INSTRUCTION = re.compile(r'^\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$')
_OP_NAME = re.compile(r'op_name="((?:[^"\\]|\\.)*)"')
_CALLED = re.compile(
    r'\b(calls|to_apply|body|condition|true_computation|false_computation|'
    r'branch_computations|called_computations)=(\{[^}]*\}|%?[\w.\-]+)'
)
_OPERAND = re.compile(r'%([\w.\-]+)')
_TRIP_COUNT = re.compile(r'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"?(\d+)')
_METADATA = re.compile(r',\s*metadata=\{(?:[^{}"]|"(?:[^"\\]|\\.)*")*\}')

# Components of a JAX name stack that name a transformation or a traced
# function, not a scope the user opened.
_TRANSFORM_WORDS = frozenset(
    {
        'jvp',
        'transpose',
        'vmap',
        'pmap',
        'xmap',
        'remat',
        'checkpoint',
        'rematted_computation',
        'while',
        'body',
        'cond',
        'scan',
        'closed_call',
        'core_call',
        'custom_jvp_call',
        'custom_vjp_call',
        'custom_vjp_call_jaxpr',
        'shard_map',
        'branch',
    }
)
_CALL_WRAPPERS = frozenset({'jit', 'pjit', 'xla_pmap', 'xla_call', 'shard_map', 'named_call'})
_WRAPPED = re.compile(r'^([A-Za-z_][\w]*)\((.*)\)$')


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
        operands=tuple(_OPERAND.findall(operand_text)),
        attributes=attributes,
        op_name=op_name_match.group(1) if op_name_match else '',
        called=tuple(called),
        is_root=is_root,
        line=line,
    )


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


def _unwrap(component: str) -> tuple[str | None, bool]:
    """The scope a name-stack component names (``None``: none) and whether it was wrapped.

    ``transpose(jvp(MLP))`` -> ``MLP``; ``jit(apply)`` -> ``None`` (a traced
    function, not a scope); ``while``/``body`` -> ``None``.
    """
    wrapped = False
    while True:
        match = _WRAPPED.match(component)
        if match is None:
            break
        outer, inner = match.groups()
        if outer in _CALL_WRAPPERS:
            return None, True
        component, wrapped = inner, True
    if component in _TRANSFORM_WORDS or not component:
        return None, wrapped
    return component, wrapped


def module_path_from_op_name(op_name: str) -> str:
    """The module path an ``op_name`` names; ``''`` for an op outside any module.

    The last component is the primitive (``dot_general``) and is dropped, as are
    transformation components (``jit(f)``, ``while``, ``body``, ``checkpoint``)
    and the wrappers that JAX puts around a scope under a transformation
    (``transpose(jvp(MLP))`` is ``MLP``). When the backward pass of a
    rematerialized scope repeats the enclosing scope (``transpose(jvp(MLP))/
    jvp(MLP)/...``) the repetition is dropped.

    >>> module_path_from_op_name('jit(apply)/MLP/Dense_0/dot_general')
    'MLP/Dense_0'
    >>> module_path_from_op_name('jit(f)/transpose(jvp(MLP))/while/body/Block/mul')
    'MLP/Block'
    >>> module_path_from_op_name('x')
    ''
    """
    components = op_name.split('/')
    if len(components) < 2:
        return ''
    path: list[str] = []
    previous_wrapped = False
    for component in components[:-1]:
        scope, wrapped = _unwrap(component)
        if scope is None:
            continue
        if wrapped and previous_wrapped and path and path[-1] == scope:
            continue
        path.append(scope)
        previous_wrapped = wrapped
    return '/'.join(path)


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
