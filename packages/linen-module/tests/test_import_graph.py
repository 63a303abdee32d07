"""linen-module's private modules import one another without cycles.

A cycle means code in the wrong module: the helper one side reaches back for
belongs in a lower module. Imports inside functions count too (they hide a
cycle, they do not remove it).
"""

from __future__ import annotations

import ast
from pathlib import Path

import linen.module

PACKAGE = 'linen.module'
SOURCE = Path(linen.module.__file__).parent


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == PACKAGE:
                names.update(f'{PACKAGE}.{alias.name}' for alias in node.names)
            elif node.module.startswith(PACKAGE + '.'):
                names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names if a.name.startswith(PACKAGE + '.'))
    return names


def _graph() -> dict[str, set[str]]:
    modules = {f'{PACKAGE}.{p.stem}': p for p in SOURCE.glob('*.py') if p.stem != '__init__'}
    return {name: _imports(path) & set(modules) for name, path in modules.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    done: set[str] = set()

    def visit(node: str, trail: list[str]) -> list[str] | None:
        if node in trail:
            return trail[trail.index(node) :] + [node]
        if node in done:
            return None
        for target in sorted(graph[node]):
            found = visit(target, trail + [node])
            if found:
                return found
        done.add(node)
        return None

    for start in sorted(graph):
        found = visit(start, [])
        if found:
            return found
    return None


def test_no_import_cycle_between_private_modules():
    cycle = _cycle(_graph())
    assert cycle is None, ' -> '.join(cycle or [])


def test_the_checker_finds_a_cycle():
    assert _cycle({'a': {'b'}, 'b': {'c'}, 'c': {'a'}}) == ['a', 'b', 'c', 'a']
    assert _cycle({'a': {'b'}, 'b': set()}) is None
