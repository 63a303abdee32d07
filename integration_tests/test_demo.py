"""``examples/demo.py`` (what ``nox -s demo`` runs) with tiny settings, outputs checked.

Two epochs of 11 steps (batch 128): enough to cross the checkpoint and resume, and,
with the fixed seeds of the demo, to land far above chance (10 %). The run is
deterministic on CPU, so the accuracy bound cannot flake.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip('sklearn')
pytest.importorskip('orbax.checkpoint')
pytest.importorskip('rich')

EXAMPLES = Path(__file__).resolve().parent.parent / 'examples'
DEMO = EXAMPLES / 'demo.py'
EPOCHS, BATCH = 2, 128
STEPS_PER_EPOCH = 1437 // BATCH  # the 80 % training split of the 1,797 images
# JAX_LOG_COMPILES's line for each XLA compilation of the train step (older JAX
# versions leave out the "jit(...)").
TRAIN_STEP_COMPILE = re.compile(r'Compiling (?:jit\()?train_step_fn\b')


def _load(name: str, path: Path):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    # dataclasses look the module up by name while building the Modules.
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _load_demo():
    """The command line (options, requirement check, outputs)."""
    return _load('linen_demo', DEMO)


def _load_model():
    """The model, data and training loop the command line runs."""
    return _load('linen_demo_cnn', EXAMPLES / 'digits_cnn.py')


def _run_demo(out: Path) -> tuple[str, str]:
    """One tiny run of the demo into ``out`` (seeded with a previous run's files)."""
    # A previous run's files: the run must replace or remove every one of them.
    for name in _load_demo().OUTPUTS:
        (out / name).write_text('stale')
    # The demo's own output is informational; orbax's absl logging is quieted. Each
    # XLA compilation is logged (to stderr) so that the test can count them.
    env = {**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '3', 'JAX_LOG_COMPILES': '1'}
    result = subprocess.run(
        [sys.executable, str(DEMO), '--epochs', str(EPOCHS), '--batch-size', str(BATCH)]
        + ['--out', str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout, result.stderr


@pytest.fixture(scope='module')
def run(tmp_path_factory, request):
    # Under pytest-xdist each worker that gets one of these tests would run the demo
    # again; the first one runs it into the session's shared folder and the others
    # read what it wrote.
    worker = getattr(request.config, 'workerinput', None)
    if worker is None:
        out = tmp_path_factory.mktemp('demo')
        stdout, stderr = _run_demo(out)
    else:
        shared = tmp_path_factory.getbasetemp().parent / 'linen-demo-run'
        out, done = shared / 'out', shared / 'done.json'
        try:
            shared.mkdir()
        except FileExistsError:
            deadline = time.monotonic() + 900
            while not done.exists():
                assert time.monotonic() < deadline, 'the demo run of another worker never finished'
                time.sleep(1)
        else:
            out.mkdir()
            try:
                stdout, stderr = _run_demo(out)
                record = {'stdout': stdout, 'stderr': stderr, 'ok': True}
            except BaseException as exc:
                record = {'ok': False, 'error': str(exc)[-3000:]}
                raise
            finally:
                # Written whole, then renamed: a waiting worker never reads half of it.
                partial = shared / 'done.partial'
                partial.write_text(json.dumps(record))
                partial.replace(done)
        record = json.loads(done.read_text())
        assert record['ok'], record['error']
        stdout, stderr = record['stdout'], record['stderr']
    return out, stdout, json.loads((out / 'metrics.json').read_text()), stderr


def test_accuracy_far_above_chance_and_history(run):
    _, stdout, metrics, _ = run
    assert metrics['test_accuracy'] >= 0.6
    assert [h['epoch'] for h in metrics['history']] == [1, 2]
    assert metrics['history'][1]['train_loss'] < metrics['history'][0]['train_loss']
    assert metrics['steps'] == EPOCHS * STEPS_PER_EPOCH
    assert f'held-out accuracy: {metrics["test_accuracy"]:.2%}' in stdout


def test_every_output_exists_and_its_path_is_printed(run):
    out, stdout, metrics, _ = run
    keys = ['checkpoint', 'curves', 'costs', 'summary', 'times', 'trace', 'report']
    for key in keys + ['flame_png', 'flame_html', 'perfetto']:
        path = Path(metrics[key])
        assert path.exists() and path.is_relative_to(out), key
        assert str(path) in stdout, key
    assert (out / 'curves.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    assert list((out / 'trace').rglob('*.xplane.pb')), 'no profiler trace was written'


def test_reports_name_the_modules(run):
    out, _, _, _ = run
    summary = (out / 'summary.txt').read_text()
    # 3*3*32*64 kernel of the second conv, no bias; BatchNorm holds 2*64 stats.
    assert 'CheckpointConvBlock_1/Conv_0' in summary and '18,432' in summary
    assert '128 (512 B)' in summary
    for report in ['costs.txt', 'times.txt']:
        text = (out / report).read_text()
        for name in ['CheckpointConvBlock_0', 'Conv_0', 'BatchNorm_0', 'Dense_0', 'head']:
            assert name in text, (report, name)


# Every module of the demo's CNN as a label path (the remat'd blocks are
# CheckpointConvBlock, as in Flax).
MODULES = [
    'CNN',
    *(
        f'CNN/CheckpointConvBlock_{i}{sub}'
        for i in (0, 1)
        for sub in ('', '/Conv_0', '/BatchNorm_0')
    ),
    'CNN/Dense_0',
    'CNN/Dropout_0',
    'CNN/head',
]


# A 3x3 'SAME' convolution on an n x n image: of the 3 * n kernel taps per output
# row, the 2 at the borders fall on padding and multiply nothing (nor does XLA's
# cost analysis count them): 3 * n - 2 taps per spatial dimension.
def _conv_flops(size: int, c_in: int, c_out: int) -> int:
    return 2 * BATCH * c_in * c_out * (3 * size - 2) ** 2


# The first convolution: 1 -> 32 channels on the 8x8 images; the second: 32 -> 64
# channels on 4x4 images after pooling.
CONV_0 = 'CNN/CheckpointConvBlock_0/Conv_0'
CONV_0_FLOPS = _conv_flops(8, 1, 32)
CONV_1 = 'CNN/CheckpointConvBlock_1/Conv_0'
CONV_1_FLOPS = _conv_flops(4, 32, 64)
CONV_1_KERNEL_BYTES = 3 * 3 * 32 * 64 * 4


def test_joined_report_splits_costs_and_joins_time_memory_trace(run):
    out, stdout, metrics, _ = run
    text = Path(metrics['report']).read_text()
    assert text in stdout
    report = json.loads((out / 'report.json').read_text())
    assert report['columns'] == [
        'flops',
        'bytes_accessed',
        'forward_flops',
        'backward_flops',
        'recompute_flops',
        'seconds',
        'params_bytes',
        'optimizer_bytes',
        'trace_seconds',
    ]
    rows = report['rows']
    for path in MODULES:
        assert path in rows, path
        assert path.rsplit('/', 1)[-1] in text, path
        row = rows[path]
        assert row['seconds'] > 0 and row['trace_seconds'] > 0, path
        parts = row['forward_flops'] + row['backward_flops'] + row['recompute_flops']
        assert parts == pytest.approx(row['flops'], rel=1e-9), path
    # Each convolution's forward pass, once more under nn.remat (unless XLA merged the
    # recomputation with the forward one, as jaxlib 0.10's does: then it runs, and
    # counts, once), and backward the kernel gradient plus, for the second one, the
    # input gradient (the first one's input is data: JAX computes no gradient for it).
    for path, forward, backward in ((CONV_0, CONV_0_FLOPS, 1), (CONV_1, CONV_1_FLOPS, 2)):
        assert rows[path]['forward_flops'] == forward, path
        assert rows[path]['recompute_flops'] in (0, forward), path
        assert rows[path]['backward_flops'] == backward * forward, path
    conv = rows[CONV_1]
    assert rows['CNN/Dense_0']['recompute_flops'] == 0  # outside the remat'd blocks
    # Parameter bytes from the kernel's size (no bias), Adam holds two moments of it.
    assert conv['params_bytes'] == CONV_1_KERNEL_BYTES
    assert conv['optimizer_bytes'] == 2 * CONV_1_KERNEL_BYTES


def test_flame_graph_png_and_html(run):
    from PIL import Image

    _, _, metrics, _ = run
    png = Path(metrics['flame_png'])
    assert png.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    with Image.open(png) as image:
        image.verify()  # a whole, decodable PNG, not just its signature
    with Image.open(png) as image:
        width, height = image.size
        assert width > 500 and height > 50
        # Drawn boxes: far more than the white background and black text.
        assert len(image.convert('RGB').getcolors(maxcolors=1 << 16) or []) > 5
    page = Path(metrics['flame_html']).read_text()
    assert page.startswith('<!DOCTYPE html>') and '<svg' in page
    for path in MODULES:
        assert f'<title>{path}: ' in page, path


def test_perfetto_trace_has_a_track_per_module_of_the_model(run):
    _, _, metrics, _ = run
    events = json.loads(Path(metrics['perfetto']).read_text())['traceEvents']
    tracks = {e['tid']: e['args']['name'] for e in events if e['name'] == 'thread_name'}
    assert set(MODULES) <= set(tracks.values())
    ops = [e for e in events if e['ph'] == 'X']
    by_track: dict[str, set] = {}
    for event in ops:
        assert event['dur'] >= 0 and event['tid'] in tracks
        by_track.setdefault(tracks[event['tid']], set()).add((event['name'], event['ts']))
    for path in MODULES:
        assert by_track.get(path), f'no op on the track of {path}'
        # A module's track shows its submodules' work too.
        if '/' in path:
            assert by_track[path] <= by_track[path.rsplit('/', 1)[0]], path


def test_checkpoint_restores_into_a_fresh_state(run):
    import jax
    import numpy as np
    import orbax.checkpoint as ocp

    out, _, metrics, _ = run
    cnn = _load_model()
    x_train = cnn.load_digits(0)[0]
    fresh = cnn.create_state(cnn.CNN(), jax.random.key(0), x_train[:BATCH], 1e-3)
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


def test_train_step_compiles_once(run):
    # The checkpoint restore between the epochs must not change jit's cache key
    # (importing orbax there once did: it defines JAX config options).
    _, _, metrics, stderr = run
    compiles = TRAIN_STEP_COMPILE.findall(stderr)
    assert len(compiles) == 1, f'the train step compiled {len(compiles)} times'
    assert metrics['steps'] == EPOCHS * STEPS_PER_EPOCH  # and it ran every step


def test_every_output_is_this_runs(run):
    """The folder holds exactly the outputs the demo lists, none left from before."""
    out, _, metrics, _ = run
    demo = _load_demo()
    assert sorted(p.name for p in out.iterdir()) == sorted(demo.OUTPUTS)
    for name in demo.OUTPUTS:
        path = out / name
        assert path.is_dir() or path.read_bytes() != b'stale', name


def test_clear_outputs_removes_only_the_demos_files(tmp_path):
    demo = _load_demo()
    for name in demo.OUTPUTS:
        if name in ('checkpoint', 'trace'):
            (tmp_path / name / 'old').mkdir(parents=True)
        else:
            (tmp_path / name).write_text('old')
    (tmp_path / 'notes.txt').write_text('mine')
    demo.clear_outputs(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ['notes.txt']


def test_examples_page_lists_exactly_the_outputs():
    page = (EXAMPLES.parent / 'docs' / 'guides' / 'examples.md').read_text(encoding='utf-8')
    listed = set()
    for row in re.findall(r'^\| (`[^|]+`) \|', page, re.MULTILINE):
        listed |= {name.rstrip('/') for name in re.findall(r'`([^`]+)`', row)}
    assert listed - {'file'} == set(_load_demo().OUTPUTS)


def test_missing_requirements_are_named_at_once_before_any_work(tmp_path, monkeypatch):
    demo = _load_demo()
    requirements = tmp_path / 'requirements.txt'
    requirements.write_text('# a comment\noptax>=0.1\nno-such-dist-a\nno-such-dist-b  # why\n')
    monkeypatch.setattr(demo, 'REQUIREMENTS', requirements)
    out = tmp_path / 'out'
    with pytest.raises(SystemExit) as exc:
        demo.main(['--out', str(out)])
    message = str(exc.value.code)
    assert 'no-such-dist-a, no-such-dist-b: python3 -m pip install -r' in message
    assert 'optax' not in message  # installed
    assert not out.exists()  # nothing was started


def test_requirements_file_is_what_the_demo_imports():
    demo = _load_demo()
    assert demo.requirements() == [
        'scikit-learn',
        'optax',
        'orbax-checkpoint',
        'rich',
        'matplotlib',
    ]
    assert demo.missing_distributions(demo.requirements()) == []


def test_help_is_fast_and_imports_nothing_heavy():
    probe = (
        'import runpy, sys\n'
        f'sys.argv = [{str(DEMO)!r}, "--help"]\n'
        'try:\n'
        f'    runpy.run_path({str(DEMO)!r}, run_name="__main__")\n'
        'except SystemExit as exc:\n'
        '    assert exc.code == 0, exc.code\n'
        'print(sorted(m for m in ("jax", "numpy", "optax", "linen.nn") if m in sys.modules))\n'
    )
    # Fast is what the load-independent figure says: none of the heavy modules is
    # imported (a wall-time bound would only measure how busy the machine is).
    result = subprocess.run(
        [sys.executable, '-c', probe], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert 'usage: demo.py' in result.stdout
    assert result.stdout.strip().endswith('[]'), result.stdout
