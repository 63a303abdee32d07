"""A Markdown extension for the docs site: ``>>>`` examples in docstrings become code.

Docstrings carry doctest examples as plain indented text (they run as doctests);
Markdown would render them as prose and read ``d['a']['x']`` as a link reference.
This preprocessor fences each run of ``>>>``/``...`` lines and their output as a
``pycon`` block. mkdocs.yml names it as ``docs._doctest_fence``, so mkdocs runs
from the repository root (``python -m mkdocs``, as ``nox -s docs`` does).
"""

from __future__ import annotations

import re

from markdown import Extension
from markdown.preprocessors import Preprocessor

_PROMPT = re.compile(r'^(?P<indent>[ \t]*)>>> ')


class _FenceDoctests(Preprocessor):
    def run(self, lines: list[str]) -> list[str]:
        out: list[str] = []
        i, in_fence = 0, False
        while i < len(lines):
            line = lines[i]
            if line.lstrip().startswith('```'):
                in_fence = not in_fence
            match = None if in_fence else _PROMPT.match(line)
            if match is None:
                out.append(line)
                i += 1
                continue
            indent = match.group('indent')
            block = []
            # The example runs until a blank line, as a doctest's expected output does.
            while i < len(lines) and lines[i].strip():
                block.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
                i += 1
            out += ['', f'{indent}```pycon', *[indent + b for b in block], f'{indent}```', '']
        return out


class DoctestFenceExtension(Extension):
    def extendMarkdown(self, md):
        # Before fenced_code_block (priority 25) so the new fences are parsed.
        md.preprocessors.register(_FenceDoctests(md), 'doctest_fence', 30)


def makeExtension(**kwargs):
    return DoctestFenceExtension(**kwargs)
