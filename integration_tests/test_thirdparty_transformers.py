"""Hugging Face transformers' Flax models run on linen exactly as they run on Flax.

transformers 4.x (the last line with Flax models) is the largest body of real
third-party Linen code. Each case of ``_transformers_worker.py`` builds a small
random-init model (nothing downloaded) and runs it twice, in two fresh interpreters:
once on Flax, once with ``flax.linen``, ``flax.core``, ``flax.struct``, ... aliased to
linen's modules before transformers is imported. The two runs must agree bit for
bit: the parameter tree (paths, shapes, dtypes, values for the same seed), outputs
with every hidden state and attention map, dropout with the same ``dropout_rng``,
gradients (compiled, and op by op), incremental decoding through
``init_cache``/``past_key_values``, ``generate``, and checkpoints.

Checkpoints: both runs ``save_pretrained`` (whole, and in shards with an index) and
``from_pretrained`` Flax's. Flax reading linen's is covered by the files being the
same bytes: Flax reading them is Flax reading its own.

transformers has no model built with ``nn.scan`` (no ``scan_layers`` option in its
Flax models); the lifted transform it uses is ``remat`` (gradient checkpointing),
and ``generate`` runs ``apply`` inside JAX's own loops.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

if importlib.util.find_spec('transformers') is None or importlib.util.find_spec('flax') is None:
    pytest.skip('needs transformers 4.x and flax (noxfile TEST_DEPS)', allow_module_level=True)

pytestmark = [pytest.mark.flax, pytest.mark.slow]

WORKER = Path(__file__).resolve().with_name('_transformers_worker.py')


def _worker_module():
    # The worker imports nothing heavy at the top: reading its table starts no JAX.
    spec = importlib.util.spec_from_file_location('_transformers_worker', WORKER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_WORKER = _worker_module()
# At the oldest JAX end CI runs three cases (``LINEN_TRANSFORMERS_CASES``, set by the
# noxfile), the ones that reach the most of linen: checkpoints (bert), the lifted
# remat (roberta_remat), the decoding cache under ``generate`` (gpt2); all six at the
# newest. The six took 446 s of the suite's 3,840 worker-seconds at JAX 0.10.
_SELECTED = os.environ.get('LINEN_TRANSFORMERS_CASES')
CASES = [c for c in _WORKER.CASES if _SELECTED is None or c in _SELECTED.split(',')]
assert CASES, f'LINEN_TRANSFORMERS_CASES={_SELECTED!r} names none of {list(_WORKER.CASES)}'

# The kinds of comparison, each a test of its own, by the top-level parts of a case's
# results they read; 'model' reads every other part. A difference of one kind is
# then reported (or known) without hiding the others of the same case.
PARTS = {
    # Gradients taken op by op, as ``jax.grad`` runs outside ``jax.jit``.
    'eager gradients': ('grads_eager',),
    'checkpoints': ('saved', 'loaded'),
}

# Known differences, not yet fixed in linen: (case, kind) -> what differs. The test is
# ``xfail(strict=True)``, so that the fix turns it red until its entry goes.
KNOWN: dict[tuple[str, str], str] = {}


def _run(library: str, case: str, out: Path, env: dict, load: Path | None = None) -> None:
    command = [sys.executable, str(WORKER), library, case, str(out)]
    if load is not None:
        command += ['--load', str(load)]
    # The environment is this process's (the root conftest's rank promotion, host
    # devices and XLA flags, the same for both libraries) and ``env``.
    result = subprocess.run(
        command, capture_output=True, text=True, env=dict(os.environ, **env), timeout=600
    )
    assert result.returncode == 0, (
        f'{library} worker of {case} failed:\n{result.stdout[-3000:]}{result.stderr[-5000:]}'
    )
    meta = json.loads((out / 'meta.json').read_text())
    assert meta['error'] is None, f'{case} raised under {library}:\n{meta["error"]}'
    assert meta['foreign_modules'] == [], (library, meta['foreign_modules'])


def _shared_run(case: str, tmp_path_factory, request) -> Path:
    """Both libraries' results of ``case``, computed once per session.

    Several tests read each case; under pytest-xdist they may land on two workers.
    The first one to claim the case's folder runs it, the others wait for its record
    (the pattern of ``test_demo.py``). Flax runs first: linen's run loads the
    checkpoints Flax's saved.
    """
    base = tmp_path_factory.getbasetemp()
    if getattr(request.config, 'workerinput', None) is not None:
        base = base.parent  # shared by the workers of one session
    root = base / 'linen-transformers' / case
    done = root / 'done.json'
    try:
        root.mkdir(parents=True)
    except FileExistsError:
        deadline = time.monotonic() + 900
        while not done.exists():
            assert time.monotonic() < deadline, f'the run of {case} by another worker never ended'
            time.sleep(0.5)
    else:
        record: dict = {'error': None}
        # Both runs in the run's shared compilation cache (integration_tests/conftest.py):
        # linen's compiles Flax's programs again, but for their labels.
        env = request.getfixturevalue('tools').compilation_cache_env()
        try:
            _run('flax', case, root / 'flax', env)
            _run('linen', case, root / 'linen', env, load=root / 'flax')
        except BaseException as exc:
            record['error'] = str(exc)[-8000:]
            raise
        finally:
            # Written whole, then renamed: a waiting worker never reads half of it.
            partial = root / 'done.partial'
            partial.write_text(json.dumps(record))
            partial.replace(done)
    error = json.loads(done.read_text())['error']
    assert error is None, error
    return root


def _leaves(out: Path) -> dict[str, tuple[str, str, tuple[int, ...], bytes]]:
    """A run's leaves by tree path: type, dtype, shape, raw bytes."""
    meta = json.loads((out / 'meta.json').read_text())
    with np.load(out / 'arrays.npz') as arrays:
        data = [arrays[f'arr_{i}'].tobytes() for i in range(len(meta['leaves']))]
    return {
        row['path']: (row['type'], row['dtype'], tuple(row['shape']), raw)
        for row, raw in zip(meta['leaves'], data)
    }


def _describe(dtype: str, shape, a: bytes, b: bytes) -> str:
    import jax.numpy as jnp  # for bfloat16 and the other dtypes NumPy lacks

    x = np.frombuffer(a, jnp.dtype(dtype)).reshape(shape)
    y = np.frombuffer(b, jnp.dtype(dtype)).reshape(shape)
    if not (jnp.issubdtype(x.dtype, jnp.number) or x.dtype == bool):
        return 'different values'
    gap = np.abs(x.astype(np.float64) - y.astype(np.float64)).max()
    return f'{int((x != y).sum())} of {x.size} values differ, largest gap {gap:.3g}'


def _differences(flax: dict, linen: dict) -> list[str]:
    """Every way ``linen``'s leaves differ from ``flax``'s (paths, types, dtypes, shapes, bytes)."""
    found = [f'missing under linen: {p}' for p in flax if p not in linen]
    found += [f'only under linen: {p}' for p in linen if p not in flax]
    for path in flax.keys() & linen.keys():
        (of, dtype, shape, a), (of2, dtype2, shape2, b) = flax[path], linen[path]
        if (of, dtype, shape) != (of2, dtype2, shape2):
            found.append(
                f'{path}: {of} {dtype}{list(shape)} under Flax, {of2} {dtype2}{list(shape2)} here'
            )
        elif a != b:
            found.append(f'{path}: {_describe(dtype, shape, a, b)}')
    return sorted(found)


def _of_kind(leaves: dict, kind: str) -> dict:
    def kind_of(path: str) -> str:
        part = path.split("']", 1)[0].removeprefix("['")
        return next((k for k, parts in PARTS.items() if part in parts), 'model')

    return {p: v for p, v in leaves.items() if kind_of(p) == kind}


def _comparisons() -> list:
    """(case, kind) for every kind a case computes: checkpoints only where it saves some."""
    return [
        pytest.param(
            case, kind,
            marks=[pytest.mark.xfail(strict=True, reason=KNOWN[case, kind])]
            if (case, kind) in KNOWN else [],
        )
        for case in CASES
        for kind in ('model', *PARTS)
        if kind != 'checkpoints' or case in _WORKER.CHECKPOINTING
    ]  # fmt: skip


@pytest.mark.parametrize(('case', 'kind'), _comparisons())
def test_same_as_on_flax(case, kind, tmp_path_factory, request):
    """``model``: parameters, outputs, dropout, compiled gradients, decoding, generation."""
    root = _shared_run(case, tmp_path_factory, request)
    leaves = [_leaves(root / lib) for lib in ('flax', 'linen')]
    if kind == 'model':
        metas = [json.loads((root / lib / 'meta.json').read_text()) for lib in ('flax', 'linen')]
        assert metas[1]['containers'] == metas[0]['containers']
        # The worker's list of the cases that save checkpoints is what they do.
        assert bool(_of_kind(leaves[0], 'checkpoints')) == (case in _WORKER.CHECKPOINTING)
    flax, linen = (_of_kind(side, kind) for side in leaves)
    assert flax, f'case {case} computed no {kind}'
    found = _differences(flax, linen)
    assert not found, f'{len(found)} differences:\n  ' + '\n  '.join(found[:40])
