"""Structural comparison of optimized HLO text.

Two compiled programs are called structurally identical when their entry
computations compute the same DAG: same opcodes, result types, attributes and
called computations, operand for operand. Instruction names, metadata and the
numbering of entry parameters are ignored; the numbering matters nothing to the
program, and it differs between libraries only because their parameter pytrees
flatten in different orders (Flax sorts ``Dense_10`` before ``Dense_2``).

Each instruction gets a Merkle hash of its own text (names removed) and the hashes
of its operands; a computation's hash is its ROOT's.
"""

from __future__ import annotations

import hashlib
import re
from typing import NamedTuple

_COMPUTATION_HEAD = re.compile(r'^(ENTRY\s+)?%?(?P<name>[\w.\-]+)\s*\(.*\)\s*->\s*.*\{\s*$')
_INSTRUCTION = re.compile(r'^\s*(?P<root>ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*(?P<rest>.*)$')
_REFERENCE = re.compile(r'%([\w.\-]+)')
# Attributes that carry names or source positions, not semantics.
_NOISE = re.compile(
    r',\s*(metadata|frontend_attributes|sharding|origin)=\{[^{}]*(\{[^{}]*\}[^{}]*)*\}'
)


class HloSummary(NamedTuple):
    """What the table reports about one compiled program.

    Attributes:
        instructions: instructions in all computations (fusion bodies included).
        entry_instructions: instructions in the entry computation.
        fingerprint: structural hash of the entry computation.
        opcodes: sorted ``(opcode, count)`` pairs over all computations.
    """

    instructions: int
    entry_instructions: int
    fingerprint: str
    opcodes: tuple[tuple[str, int], ...]


def _matching_paren(text: str, start: int) -> int:
    depth = 0
    for i in range(start, len(text)):
        if text[i] == '(':
            depth += 1
        elif text[i] == ')':
            depth -= 1
            if depth == 0:
                return i
    raise ValueError(f'unbalanced parentheses in HLO: {text!r}')


def _split_instruction(rest: str) -> tuple[str, str, str, str]:
    """Split ``TYPE OPCODE(OPERANDS), ATTRS`` into its four parts."""
    if rest.startswith('('):  # tuple-typed result
        end = _matching_paren(rest, 0) + 1
    else:
        end = rest.index(' ')
    result_type = rest[:end]
    tail = rest[end:].lstrip()
    open_paren = tail.index('(')
    opcode = tail[:open_paren]
    close = _matching_paren(tail, open_paren)
    return result_type, opcode, tail[open_paren + 1 : close], tail[close + 1 :]


def _sha(*parts: str) -> str:
    return hashlib.sha1('\x1f'.join(parts).encode()).hexdigest()


def summarize(hlo_text: str) -> HloSummary:
    """Count instructions and fingerprint the structure of optimized HLO text."""
    computations: dict[str, list[tuple[str, str, str, str, str, bool]]] = {}
    entry = None
    current = None
    for line in hlo_text.splitlines():
        if current is None:
            head = _COMPUTATION_HEAD.match(line)
            if head:
                current = head['name']
                computations[current] = []
                if head.group(1):
                    entry = current
            continue
        if line.strip() == '}':
            current = None
            continue
        ins = _INSTRUCTION.match(line)
        if ins is None:
            continue
        result_type, opcode, operands, attrs = _split_instruction(ins['rest'])
        attrs = _NOISE.sub('', attrs)
        computations[current].append(
            (ins['name'], result_type, opcode, operands, attrs, bool(ins['root']))
        )
    if entry is None:
        raise ValueError('no ENTRY computation in HLO text')

    comp_hash: dict[str, str] = {}

    def hash_computation(name: str) -> str:
        if name in comp_hash:
            return comp_hash[name]
        is_entry = name == entry
        hashes: dict[str, str] = {}
        root = None
        for ins_name, result_type, opcode, operands, attrs, is_root in computations[name]:
            operand_hashes = [hashes.get(ref, ref) for ref in _REFERENCE.findall(operands)]
            # Entry parameters are matched by type only: see the module docstring.
            own = '' if (is_entry and opcode == 'parameter') else operands
            own = _REFERENCE.sub('', own)
            called = [
                hash_computation(ref) if ref in computations else ref
                for ref in _REFERENCE.findall(attrs)
            ]
            attr_text = _REFERENCE.sub('', attrs)
            hashes[ins_name] = _sha(
                result_type, opcode, own, attr_text, *called, '|', *operand_hashes
            )
            if is_root:
                root = hashes[ins_name]
        comp_hash[name] = root or ''
        return comp_hash[name]

    fingerprint = hash_computation(entry)
    counts: dict[str, int] = {}
    for instructions in computations.values():
        for item in instructions:
            counts[item[2]] = counts.get(item[2], 0) + 1
    return HloSummary(
        instructions=sum(len(v) for v in computations.values()),
        entry_instructions=len(computations[entry]),
        fingerprint=fingerprint,
        opcodes=tuple(sorted(counts.items())),
    )
