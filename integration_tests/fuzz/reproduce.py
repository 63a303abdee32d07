"""Writing and running the standalone reproducer scripts of ``reproducers/``.

A reproducer is a Python file holding the shrunk program's source (``SOURCE``, with
``import flax.linen as nn``; linen runs it with that line swapped), the stage and
kind of the difference it shows (``STAGE``, ``KIND``) and its class (``CLASS``); one
found under JAX settings other than the defaults (64-bit mode, the key reuse
checker, ...) also holds them (``SETTINGS = {'jax_enable_x64': True}``) and is run
under them, where the suite runs under JAX's defaults. Run as a script it prints
every difference and exits 1 while the one it was written for remains. A
hand-written reproducer may define ``check()`` instead, returning the differences it
finds as strings.
"""

from __future__ import annotations

import re
import runpy
from pathlib import Path
from typing import Any

import jax

from integration_tests.fuzz.compare import Difference
from integration_tests.oracle import jax_settings

REPRODUCERS = Path(__file__).resolve().parent / 'reproducers'

_TEMPLATE = '''"""Fuzz reproducer {name}: {stage} / {kind}.

{detail}

Found by `nox -s fuzz` ({seed}), shrunk. `python {relpath}` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = {klass!r}
STAGE = {stage!r}
KIND = {kind!r}
{settings}SOURCE = {source}

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND{settings_arg}))
'''


def _triple_quoted(text: str) -> str:
    # Double quotes: what `ruff format` (`nox -s lint`) writes for a triple-quoted string.
    return '"""\\\n' + text.replace('\\', '\\\\').replace('"""', '\\"\\"\\"') + '"""'


def write_reproducer(klass: str, diff: Difference, source: str, seed: str, out: Path) -> Path:
    """A new file ``<stage>_<kind>_<n>.py`` under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    stem = re.sub(r'[^a-z0-9]+', '_', f'{diff.stage}_{diff.kind}'.lower())
    n = 1
    while (out / f'{stem}_{n}.py').exists():
        n += 1
    path = out / f'{stem}_{n}.py'
    settings = current_settings()
    try:
        relpath = path.relative_to(Path.cwd())
    except ValueError:
        relpath = path
    detail = '\n'.join(f'    {line}'.rstrip() for line in str(diff).splitlines()[:6])
    path.write_text(
        _TEMPLATE.format(
            name=path.stem,
            stage=diff.stage,
            kind=diff.kind,
            detail=f'First seen:\n{detail}',
            seed=seed,
            relpath=relpath,
            klass=klass,
            settings=f'SETTINGS = {settings!r}\n' if settings else '',
            settings_arg=', settings=SETTINGS' if settings else '',
            source=_triple_quoted(source),
        )  # fmt: skip
    )
    return path


def load(path: Path) -> dict:
    """The module-level names of a reproducer file, without running its main."""
    return runpy.run_path(str(path), run_name='fuzz_reproducer')


# The JAX settings a campaign may run under (by JAX's environment variables, see
# the README), with their defaults, the same at both ends of the supported range.
DEFAULT_SETTINGS = {
    'jax_enable_x64': False,
    'jax_numpy_dtype_promotion': 'standard',
    'jax_default_prng_impl': 'threefry2x32',
    'jax_threefry_partitionable': True,
    'jax_debug_key_reuse': False,
    'jax_check_tracer_leaks': False,
    'jax_enable_checks': False,
    'jax_disable_jit': False,
}


def current_settings() -> dict[str, Any]:
    """The settings of :data:`DEFAULT_SETTINGS` this process runs with other values of."""
    now = {name: getattr(jax.config, name) for name in DEFAULT_SETTINGS}
    return {name: value for name, value in now.items() if value != DEFAULT_SETTINGS[name]}


def _differences(
    source: str, stages: tuple[str, ...] | None, settings: dict[str, Any]
) -> list[Difference]:
    from integration_tests.fuzz.runner import differences

    with jax_settings(settings):
        return differences(source, stages)


def remaining(namespace: dict) -> list[str]:
    """The differences the reproducer was written for that still show."""
    if 'check' in namespace:
        return list(namespace['check']())
    stage, kind = namespace['STAGE'], namespace['KIND']
    return [
        str(d)
        for d in _differences(namespace['SOURCE'], (stage,), namespace.get('SETTINGS', {}))
        if (d.stage, d.kind) == (stage, kind)
    ]


def existing_classes(folder: Path = REPRODUCERS) -> set[str]:
    found = set()
    for path in sorted(folder.glob('*.py')):
        match = re.search(r"^CLASS = '([^']*)'", path.read_text(), re.M)
        if match:
            found.add(match.group(1))
    return found


def main(source: str, stage: str, kind: str, settings: dict[str, Any] | None = None) -> int:
    diffs = _differences(source, None, settings or {})
    for d in diffs:
        print(d)
    if not diffs:
        print('no difference between Flax and linen')
    return 1 if any((d.stage, d.kind) == (stage, kind) for d in diffs) else 0


__all__ = [
    'DEFAULT_SETTINGS',
    'REPRODUCERS',
    'current_settings',
    'existing_classes',
    'load',
    'main',
    'remaining',
    'write_reproducer',
]
