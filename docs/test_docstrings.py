"""Runs every ``>>>`` example in the docstrings of every distribution's sources.

Each module under ``packages/*/src/linen`` is imported by its real name
(``linen.core._scope``), never by file path: pytest's ``--doctest-modules`` under
``--import-mode=importlib`` would import a second copy of each module of the
``linen`` namespace, with its own classes and plugin registrations. Each docstring
that holds examples is one test, so a failure names the object; the examples run
under the suite's conditions (strict rank promotion, warnings as errors).

An example sees its module's globals plus ``jax``, ``jnp``, ``np`` and ``nn``
(``linen.nn``), the way a reader of the docstring would have them.
``test_every_example_is_collected`` checks that the examples found are all the
``>>>`` lines of the sources, so none is silently left out.
"""

from __future__ import annotations

import doctest
import importlib
import io
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

PACKAGES = Path(__file__).resolve().parents[1] / 'packages'
SOURCES = sorted(PACKAGES.glob('*/src/linen/**/*.py'))
# An example of an error shows its class; the message (and the module the class
# lives in) is the error's own test's business, so it may be elided.
OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE | doctest.IGNORE_EXCEPTION_DETAIL
_PROMPT = re.compile(r'^\s*>>>', re.MULTILINE)


def module_name(path: Path) -> str:
    """``packages/linen-core/src/linen/core/_scope.py`` -> ``linen.core._scope``."""
    src = next(p for p in path.parents if p.name == 'src')
    parts = path.relative_to(src).with_suffix('').parts
    return '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)


def collect() -> list[doctest.DocTest]:
    """The docstrings with examples of every source module, in a stable order."""
    finder = doctest.DocTestFinder(exclude_empty=True)
    found: dict[tuple, doctest.DocTest] = {}
    for path in SOURCES:
        name = module_name(path)
        module = importlib.import_module(name)
        for test in sorted(finder.find(module, name), key=lambda t: t.name):
            # A function that is also a Module field's default is found a second time,
            # as the class attribute the dispatcher wrapped: one docstring, one test.
            if test.examples:
                found.setdefault((test.filename, test.docstring), test)
    return sorted(found.values(), key=lambda t: t.name)


DOCTESTS = collect()


def _globs(test: doctest.DocTest) -> dict:
    import linen.nn as nn

    return {'jax': jax, 'jnp': jnp, 'np': np, 'nn': nn, **test.globs}


@pytest.mark.parametrize('test', DOCTESTS, ids=[t.name for t in DOCTESTS])
def test_docstring_examples(test: doctest.DocTest, doc_sandbox) -> None:
    test.globs = _globs(test)
    report = io.StringIO()
    runner = doctest.DocTestRunner(optionflags=OPTIONS)
    try:
        result = runner.run(test, out=report.write, clear_globs=True)
    finally:
        test.globs = {}
    assert result.failed == 0, report.getvalue()


def test_every_example_is_collected() -> None:
    """Every ``>>>`` line of the sources is an example found above (none is unreachable)."""
    prompts = sum(len(_PROMPT.findall(path.read_text(encoding='utf-8'))) for path in SOURCES)
    examples = sum(len(t.examples) for t in DOCTESTS)
    assert prompts > 200
    assert examples == prompts


def test_no_example_is_skipped() -> None:
    skipped = [
        f'{t.name} (line {(t.lineno or 0) + e.lineno + 1})'
        for t in DOCTESTS
        for e in t.examples
        if e.options.get(doctest.SKIP)
    ]
    assert not skipped, 'examples marked +SKIP do not run: ' + ', '.join(skipped)
