"""The declared JAX range is the tested range: every distribution declares the same
range, its floor is the version the nox ``tests`` session pins, and the JAX this
suite runs on lies inside it."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import jax
import pytest

ROOT = Path(__file__).resolve().parent.parent
PYPROJECTS = sorted((ROOT / 'packages').glob('*/pyproject.toml'))


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r'\d+', text)[:3])


def _jax_requirement(pyproject: Path) -> str:
    deps = tomllib.loads(pyproject.read_text())['project']['dependencies']
    (req,) = [d for d in deps if re.match(r'jax\s*[<>=!~]', d)]
    return req.replace(' ', '')


def _nox_oldest() -> str:
    tree = ast.parse((ROOT / 'noxfile.py').read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == 'JAX_OLDEST' for t in node.targets
        ):
            return ast.literal_eval(node.value)
    raise AssertionError('noxfile.py defines no JAX_OLDEST')


@pytest.mark.parametrize('pyproject', PYPROJECTS, ids=[p.parent.name for p in PYPROJECTS])
def test_every_distribution_declares_the_tested_range(pyproject):
    requirement = _jax_requirement(pyproject)
    assert requirement.startswith(f'jax>={_nox_oldest()},<'), (
        f'{pyproject.parent.name} declares {requirement!r}; its floor must be the JAX '
        f'the oldest nox run pins ({_nox_oldest()}) and it must have an upper bound'
    )


def test_the_running_jax_is_inside_the_declared_range():
    requirement = _jax_requirement(PYPROJECTS[0])
    low, high = re.match(r'jax>=([^,]+),<(.+)', requirement).groups()
    assert _version(low) <= _version(jax.__version__) < _version(high)


def test_the_floor_is_no_newer_than_flax_s():
    # Flax's own floor (jax 0.10.0 for the Flax this project tracks): a user pinned to
    # what Flax supports must be able to install linen.
    assert _version(_nox_oldest()) <= (0, 10, 0)
