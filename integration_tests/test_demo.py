"""``examples/demo.py`` (what ``nox -s demo`` runs) with tiny settings, outputs checked.

Two epochs of 11 steps (batch 128): enough to cross the checkpoint and resume, and,
with the fixed seeds of the demo, to land far above chance (10 %). The run is
deterministic on CPU, so the accuracy bound cannot flake.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip('sklearn')
pytest.importorskip('orbax.checkpoint')
pytest.importorskip('rich')

DEMO = Path(__file__).resolve().parent.parent / 'examples' / 'demo.py'
EPOCHS, BATCH = 2, 128
STEPS_PER_EPOCH = 1437 // BATCH  # the 80 % training split of the 1,797 images


def _load_demo():
    if 'linen_demo' in sys.modules:
        return sys.modules['linen_demo']
    spec = importlib.util.spec_from_file_location('linen_demo', DEMO)
    module = importlib.util.module_from_spec(spec)
    # dataclasses look the module up by name while building the Modules.
    sys.modules['linen_demo'] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope='module')
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp('demo')
    # The demo's own output is informational; orbax's absl logging is quieted.
    env = {**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '3'}
    result = subprocess.run(
        [sys.executable, str(DEMO), '--epochs', str(EPOCHS), '--batch-size', str(BATCH)]
        + ['--out', str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return out, result.stdout, json.loads((out / 'metrics.json').read_text())


def test_accuracy_far_above_chance_and_history(run):
    _, stdout, metrics = run
    assert metrics['test_accuracy'] >= 0.6
    assert [h['epoch'] for h in metrics['history']] == [1, 2]
    assert metrics['history'][1]['train_loss'] < metrics['history'][0]['train_loss']
    assert metrics['steps'] == EPOCHS * STEPS_PER_EPOCH
    assert f'held-out accuracy: {metrics["test_accuracy"]:.2%}' in stdout


def test_every_output_exists_and_its_path_is_printed(run):
    out, stdout, metrics = run
    for key in ['checkpoint', 'curves', 'costs', 'summary', 'times', 'trace']:
        path = Path(metrics[key])
        assert path.exists() and path.is_relative_to(out), key
        assert str(path) in stdout, key
    assert (out / 'curves.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    assert list((out / 'trace').rglob('*.xplane.pb')), 'no profiler trace was written'


def test_reports_name_the_modules(run):
    out, _, _ = run
    summary = (out / 'summary.txt').read_text()
    # 3*3*32*64 kernel of the second conv, no bias; BatchNorm holds 2*64 stats.
    assert 'CheckpointConvBlock_1/Conv_0' in summary and '18,432' in summary
    assert '128 (512 B)' in summary
    for report in ['costs.txt', 'times.txt']:
        text = (out / report).read_text()
        for name in ['CheckpointConvBlock_0', 'Conv_0', 'BatchNorm_0', 'Dense_0', 'head']:
            assert name in text, (report, name)


def test_checkpoint_restores_into_a_fresh_state(run):
    import jax
    import numpy as np
    import orbax.checkpoint as ocp

    out, _, metrics = run
    demo = _load_demo()
    x_train = demo.load_digits(0)[0]
    fresh = demo.create_state(demo.CNN(), jax.random.key(0), x_train[:BATCH], 1e-3)
    target = jax.tree_util.tree_map(ocp.utils.to_shape_dtype_struct, fresh)
    with ocp.StandardCheckpointer() as checkpointer:
        restored = checkpointer.restore(Path(metrics['checkpoint']), target)
    # Written after the first epoch: the step count and trained (changed) weights.
    assert int(restored.step) == STEPS_PER_EPOCH
    kernel = restored.params['head']['kernel']
    assert kernel.shape == (128, 10)
    assert not np.array_equal(kernel, fresh.params['head']['kernel'])
    assert np.all(np.isfinite(kernel))


def test_help_and_bad_options():
    demo = _load_demo()
    with pytest.raises(SystemExit) as exc:
        demo.parse_args(['--help'])
    assert exc.value.code == 0
    args = demo.parse_args([])
    assert (args.epochs, args.batch_size, args.profile) == (15, 32, True)
    assert demo.parse_args(['--no-profile']).profile is False
    for bad in (['--epochs', '0'], ['--batch-size', '5000']):
        with pytest.raises(SystemExit) as exc:
            demo.parse_args(bad)
        assert exc.value.code == 2
