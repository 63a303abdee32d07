"""The two scripts of docs/migrating.md: only the import lines differ, and the loss
curves of the Flax and the linen run are the same for the same seeds."""

from __future__ import annotations

import difflib
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip('flax')
pytest.importorskip('optax')

DOCS = Path(__file__).resolve().parent.parent / 'docs'
PAGE = DOCS / 'migrating.md'


def _docs_runner():
    # The docs runner's fence parser, loaded under its own name: pytest imports
    # docs/test_docs.py as a test module too, and the two must not collide.
    spec = importlib.util.spec_from_file_location('_linen_docs_runner', DOCS / 'test_docs.py')
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


pytestmark = pytest.mark.flax

CHANGED = [
    ('import flax.linen as nn', 'import linen.nn as nn'),
    ('from flax import traverse_util', 'from linen.core import traverse_util'),
    ('from flax.training import train_state', 'from linen.training import train_state'),
]


def _scripts() -> tuple[str, str]:
    blocks = [
        b
        for b in _docs_runner().code_blocks(PAGE.read_text(encoding='utf-8'))
        if b.info[:1] == ('python',)
    ]
    flax_script, linen_script = blocks[0].code, blocks[1].code
    assert 'import flax.linen as nn' in flax_script and 'import linen.nn as nn' in linen_script
    return flax_script, linen_script


def test_only_the_import_lines_differ():
    flax_script, linen_script = _scripts()
    removed, added = [], []
    for line in difflib.ndiff(flax_script.splitlines(), linen_script.splitlines()):
        if line.startswith('- '):
            removed.append(line[2:])
        elif line.startswith('+ '):
            added.append(line[2:])
    assert list(zip(removed, added)) == CHANGED


def _run(script: str, name: str) -> dict:
    import types

    module = types.ModuleType(name)
    # Dataclasses (Modules, the TrainState subclass) look their module up by name.
    sys.modules[name] = module
    try:
        exec(compile(script, f'{PAGE}:{name}', 'exec'), module.__dict__)
    finally:
        sys.modules.pop(name, None)
    return module.__dict__


def test_same_loss_curve_for_the_same_seeds(capsys):
    flax_script, linen_script = _scripts()
    flax_run = _run(flax_script, '_migration_flax')
    linen_run = _run(linen_script, '_migration_linen')
    assert len(flax_run['losses']) == len(linen_run['losses']) == 60
    # Float32 training for 60 steps; the implementations agree to rounding.
    np.testing.assert_allclose(linen_run['losses'], flax_run['losses'], rtol=1e-5, atol=1e-7)
    assert linen_run['losses'][-1] < linen_run['losses'][0] / 1.5
    assert sorted(linen_run['flat']) == sorted(flax_run['flat'])
    for key in flax_run['flat']:
        np.testing.assert_allclose(
            linen_run['flat'][key], flax_run['flat'][key], rtol=1e-5, atol=1e-6
        )
