"""The benchmark harness cannot rot: its smoke variant runs here, and its HLO comparer
is checked against hand-written programs. No test looks at a time."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks._hlo import summarize  # noqa: E402

# Every measure of the table, by its JSON key; dropping one fails the test.
EXPECTED_ROWS = (
    'import',
    'trace_mlp',
    'trace_transformer',
    'pycalls_trace_mlp',
    'pycalls_trace_transformer',
    'pycalls_eager_tiny',
    'init_eager_mlp',
    'init_eager_transformer',
    'init_trace_mlp',
    'init_trace_transformer',
    'lazy_init_mlp',
    'lazy_init_transformer',
    'init_jit_first_tiny',
    'apply_eager_tiny',
    'apply_jit_tiny',
    'hlo_tiny',
    'hlo_mlp',
    'hlo_transformer',
    'step_mlp',
    'step_transformer',
    'train_trace_mlp',
    'train_trace_transformer',
    'train_step_mlp',
    'train_step_transformer',
    'compile_scan',
    'compile_unrolled',
    'compile_unrolled_over_scan',
    'jit_instances_compiles',
    'reuse_trace_transformer',
    'reuse_trace_unrolled',
    'reuse_trace_lower_transformer',
    'reuse_trace_lower_unrolled',
    'reuse_lower_compile_transformer',
    'reuse_lower_compile_unrolled',
    'reuse_train_trace_transformer',
    'reuse_train_compile_transformer',
    'reuse_hlo_transformer',
    'reuse_hlo_unrolled',
)

REFERENCE_PEERS = {'flax': 'flax', 'haiku': 'haiku', 'equinox': 'equinox'}


@pytest.fixture(scope='module')
def smoke_out(tmp_path_factory):
    out = tmp_path_factory.mktemp('bench') / 'bench-out'
    proc = subprocess.run(
        [sys.executable, '-m', 'benchmarks.run', '--smoke', '--out', str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


@pytest.mark.slow
def test_smoke_writes_table_json_and_chart(smoke_out):
    table = (smoke_out / 'results.md').read_text()
    data = json.loads((smoke_out / 'results.json').read_text())
    assert (smoke_out / 'ratios.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'

    assert tuple(data['rows']) == EXPECTED_ROWS
    body = [line for line in table.splitlines() if line.startswith('| ')]
    header, rows = body[0], body[1:]
    assert header.split(' | ')[1:6] == ['pure JAX', 'Flax Linen', 'Haiku', 'Equinox', 'linen']
    assert [r.split(' | ')[0][2:] for r in rows] == [
        data['rows'][k]['label'] for k in EXPECTED_ROWS
    ]
    # measure + five peers + target, every cell filled
    for r in rows:
        cells = r.strip('|').split(' | ')
        assert len(cells) == 7, r
        assert all(c.strip() for c in cells), r


@pytest.mark.slow
def test_smoke_measures_every_installed_reference_peer(smoke_out):
    data = json.loads((smoke_out / 'results.json').read_text())
    installed = [p for p, mod in REFERENCE_PEERS.items() if importlib.util.find_spec(mod)]
    for key, row in data['rows'].items():
        assert not row['cells']['jax'].startswith('unavailable'), key
        for peer in installed:
            assert not row['cells'][peer].startswith('unavailable'), (key, peer, row['cells'][peer])
    for key in ('trace_mlp', 'trace_transformer', 'apply_eager_tiny', 'step_mlp'):
        assert data['rows'][key]['ratios_to_jax']['jax'] == pytest.approx(1.0)
    # One compile serves ten nn.jit instances of one class, as one jax.jit serves ten
    # parameter sets; nothing compiles on a later apply.
    jit_row = data['rows']['jit_instances_compiles']
    for peer in ('jax', 'linen'):
        assert jit_row['extra'][peer] == {'first_apply': 1, 'later_apply': 0}, peer
    # Trace reuse changes no program: pure JAX's, with linen's reuse off and on.
    for model in ('transformer', 'unrolled'):
        extra = data['rows'][f'reuse_hlo_{model}']['extra']
        assert extra['linen']['identical_to_jax'] and extra['linen_reuse']['identical_to_jax']
    # The compared programs are kept for inspection.
    assert (smoke_out / 'hlo' / 'mlp_jax.hlo.txt').read_text().startswith('HloModule')
    assert (smoke_out / 'profiles' / 'trace_mlp_jax.txt').exists()


def _module_rows(section: str) -> dict[str, list[str]]:
    """The per-module table of one case: ``{module: cells}``."""
    table = section.split('| module |', 1)[1].split('\n\n', 1)[0]
    rows = [[c.strip() for c in line.strip('|').split('|')] for line in table.splitlines()[2:]]
    return {r[0].strip('`'): r for r in rows}


@pytest.mark.slow
def test_smoke_overhead_report_counts_every_module_call(smoke_out):
    # The smoke sizes: a 3-layer MLP, a 2-block transformer, the 2-layer tiny MLP.
    text = (smoke_out / 'overhead.md').read_text()
    sections = dict((part.split('\n', 1)[0], part) for part in text.split('\n## ')[1:])
    assert set(sections) == {
        'trace of apply, mlp',
        'trace of init (pure JAX: params + forward), mlp',
        'lazy_init (pure JAX: params only), mlp',
        'trace of apply, transformer',
        'trace of init (pure JAX: params + forward), transformer',
        'lazy_init (pure JAX: params only), transformer',
        'eager apply, tiny MLP (per call)',
    }
    calls = {k: float(r[1]) for k, r in _module_rows(sections['trace of apply, mlp']).items()}
    assert calls == {'MLP': 1, 'Dense': 3}
    tf = _module_rows(sections['trace of apply, transformer'])
    # per block: 2 LayerNorms, attention (4 DenseGeneral projections), 2 Denses; + final LN
    assert {k: float(r[1]) for k, r in tf.items()} == {
        'Encoder': 1,
        'EncoderBlock': 2,
        'LayerNorm': 5,
        'MultiHeadDotProductAttention': 2,
        'DenseGeneral': 8,
        'Dense': 4,
    }
    # the pure JAX counterparts ran and were timed
    assert tf['Dense'][-1] != '—' and tf['LayerNorm'][-1] != '—'
    eager = _module_rows(sections['eager apply, tiny MLP (per call)'])
    assert {k: float(r[1]) for k, r in eager.items()} == {'MLP': 1, 'Dense': 2}
    # extra calls are costed per function, and by where the code lives
    assert '| linen.module |' in sections['trace of apply, mlp']
    assert '| pure JAX |' in sections['trace of apply, mlp']


@pytest.mark.slow
@pytest.mark.flax
def test_smoke_flax_mlp_compiles_to_the_pure_jax_program(smoke_out):
    # Flax and pure JAX compute the same MLP with the same (in, out) kernel layout:
    # the comparer must see through names, metadata and parameter order.
    pytest.importorskip('flax')
    data = json.loads((smoke_out / 'results.json').read_text())
    assert data['rows']['hlo_mlp']['extra']['flax']['identical_to_jax'] is True
    if importlib.util.find_spec('equinox'):
        # (out, in) weights: a different program, and the comparer must say so.
        assert data['rows']['hlo_mlp']['extra']['equinox']['identical_to_jax'] is False


_PROGRAM_A = """HloModule jit_f, entry_computation_layout={(f32[4]{0}, f32[4]{0})->f32[4]{0}}

%fused_computation (param_0.1: f32[4], param_1.1: f32[4]) -> f32[4] {
  %param_0.1 = f32[4]{0} parameter(0)
  %param_1.1 = f32[4]{0} parameter(1)
  ROOT %add.1 = f32[4]{0} add(%param_0.1, %param_1.1), metadata={op_name="jit(f)/add"}
}

ENTRY %main.3 (w.1: f32[4], b.1: f32[4]) -> f32[4] {
  %w.1 = f32[4]{0} parameter(0), metadata={op_name="w"}
  %b.1 = f32[4]{0} parameter(1), metadata={op_name="b"}
  %exp.1 = f32[4]{0} exponential(%w.1)
  ROOT %add_fusion = f32[4]{0} fusion(%exp.1, %b.1), kind=kLoop, calls=%fused_computation
}
"""

# Same program: other names, other metadata, entry parameters numbered the other way.
_PROGRAM_B = """HloModule jit_g, entry_computation_layout={(f32[4]{0}, f32[4]{0})->f32[4]{0}}

%fused_computation.7 (param_0.9: f32[4], param_1.9: f32[4]) -> f32[4] {
  %param_0.9 = f32[4]{0} parameter(0)
  %param_1.9 = f32[4]{0} parameter(1)
  ROOT %add.9 = f32[4]{0} add(%param_0.9, %param_1.9), metadata={op_name="jit(g)/Dense_0/add" stack_frame_id=3}
}

ENTRY %main.9 (bias.1: f32[4], kernel.1: f32[4]) -> f32[4] {
  %bias.1 = f32[4]{0} parameter(0), metadata={op_name="params['bias']"}
  %kernel.1 = f32[4]{0} parameter(1), metadata={op_name="params['kernel']"}
  %exponential.3 = f32[4]{0} exponential(%kernel.1), metadata={op_name="jit(g)/exp"}
  ROOT %add_fusion.2 = f32[4]{0} fusion(%exponential.3, %bias.1), kind=kLoop, calls=%fused_computation.7
}
"""


def test_hlo_summary_counts_instructions():
    s = summarize(_PROGRAM_A)
    assert s.instructions == 7
    assert s.entry_instructions == 4
    assert dict(s.opcodes) == {'parameter': 4, 'add': 1, 'exponential': 1, 'fusion': 1}


def test_hlo_fingerprint_ignores_names_metadata_and_parameter_numbering():
    assert summarize(_PROGRAM_A).fingerprint == summarize(_PROGRAM_B).fingerprint


@pytest.mark.parametrize(
    'old, new',
    [
        ('exponential(%w.1)', 'log(%w.1)'),  # another op
        ('add(%param_0.1, %param_1.1)', 'subtract(%param_0.1, %param_1.1)'),  # inside fusion
        ('fusion(%exp.1, %b.1)', 'fusion(%b.1, %exp.1)'),  # operands swapped
    ],
)
def test_hlo_fingerprint_sees_real_differences(old, new):
    changed = _PROGRAM_A.replace(old, new)
    assert changed != _PROGRAM_A
    assert summarize(changed).fingerprint != summarize(_PROGRAM_A).fingerprint


def test_hlo_summary_rejects_text_without_entry():
    with pytest.raises(ValueError, match='no ENTRY computation'):
        summarize('HloModule empty\n')
