"""``Report``: costs, memory and trace time joined per module; JSON, pandas, diff."""

import io
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import pytest

nn = pytest.importorskip('linen.nn')

from linen.profiling import Report, module_costs, module_memory, trace_times  # noqa: E402

B, D = 2, 4


def _report(width):
    class MLP(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.Dense(width, use_bias=False)(x)
            return nn.Dense(D, use_bias=False, name='head')(x)

    model, x = MLP(), jnp.ones((B, D))
    variables = model.init(jax.random.key(0), x)
    return Report.join(
        costs=module_costs(model.apply, variables, x),
        memory=module_memory(variables),
        trace=trace_times(model.apply, variables, x),
    )


@pytest.fixture(scope='module')
def reports():
    return _report(8), _report(16)


def test_joined_rows_carry_each_parts_numbers(reports):
    report, _ = reports
    head = report.rows['MLP/head']
    assert head['flops'] == 2 * B * 8 * D
    assert head['params_bytes'] == 8 * D * 4  # matched to the variable path 'head'
    # The root's row holds the whole tree (its label has no variable path of its own).
    assert report.rows['MLP']['params_bytes'] == (D * 8 + 8 * D) * 4
    assert head['trace_seconds'] > 0
    assert 'seconds' not in report.columns  # no profile given: no column, not zeros
    assert 'MLP/head' in report.to_text(width=None)
    assert '  head ' in str(report)  # the tree, indented


def test_json_round_trip_and_pandas(reports):
    report, _ = reports
    again = Report.from_json(report.to_json())
    assert again.rows == report.rows and again.columns == report.columns
    pd = pytest.importorskip('pandas')
    frame = report.to_pandas()
    assert isinstance(frame, pd.DataFrame)
    assert frame.loc['MLP/Dense_0', 'flops'] == 2 * B * D * 8


def test_diff_is_per_module_after_minus_before(reports):
    before, after = reports
    change = before.diff(after)
    assert change.rows['MLP/Dense_0']['flops'] == 2 * B * D * (16 - 8)
    assert change.rows['MLP/head']['params_bytes'] == (16 - 8) * D * 4
    assert 'Change per module' in str(change)


def test_renders_with_rich(reports):
    from rich.console import Console

    buffer = io.StringIO()
    Console(file=buffer, width=200).print(reports[0])
    assert 'Profile per module' in buffer.getvalue() and 'head' in buffer.getvalue()


def _remat_model():
    class Block(nn.Module):
        @nn.compact
        def __call__(self, x, train: bool):
            return nn.Dense(D)(x)

    block = nn.remat(Block, static_argnums=(2,))

    class Net(nn.Module):
        @nn.compact
        def __call__(self, x):
            return block()(x, True)

    return Net()


def test_lambda_method_rows_fold_into_their_module():
    """nn.remat calls the block through a lambda; its trace time is the block's."""
    model, x = _remat_model(), jnp.ones((B, D))
    variables = model.init(jax.random.key(0), x)

    def grads(variables, x):
        return jax.grad(lambda v: model.apply(v, x).sum())(variables)

    trace = trace_times(grads, variables, x)
    by_path = {row.path: row for row in trace.rows}
    lambdas = [path for path in by_path if path.endswith('.<lambda>')]
    assert lambdas == ['Net/CheckpointBlock_0.<lambda>']  # what the trace part records
    report = Report.join(costs=module_costs(grads, variables, x), trace=trace)
    assert not [path for path in report.rows if '<lambda>' in path]
    block = by_path['Net/CheckpointBlock_0'].inclusive_seconds
    extra = by_path['Net/CheckpointBlock_0.<lambda>'].inclusive_seconds
    assert report.rows['Net/CheckpointBlock_0']['trace_seconds'] == pytest.approx(block + extra)
    assert '<lambda>' not in str(report)


def _wide_report():
    columns = (
        'flops', 'bytes_accessed', 'forward_flops', 'backward_flops', 'recompute_flops',
        'seconds', 'params_bytes', 'optimizer_bytes', 'trace_seconds',
    )  # fmt: skip
    row = dict(zip(columns, (2.6e8, 7.4e7, 7.2e7, 1.3e8, 6e7, 0.0128, 2.1e5, 4.2e5, 0.0276)))
    paths = [
        'Classifier',
        'Classifier/CheckpointResidualBlock_0',
        'Classifier/CheckpointResidualBlock_0/BatchNorm_0',
        'Classifier/CheckpointResidualBlock_0/' + 'AModuleWithAVeryLongName' * 4,
        '',
    ]
    return Report(rows={path: dict(row) for path in paths}, columns=columns)


def test_table_fits_120_columns_by_default_and_is_wider_on_request():
    report = _wide_report()
    narrow = str(report).splitlines()
    assert max(len(line) for line in narrow) <= 120
    assert any(
        line.startswith('    AModuleWithAVeryLongName') and '\u2026' in line for line in narrow
    )
    assert max(len(line) for line in report.to_text(width=100).splitlines()) <= 100
    wide = report.to_text(width=None)
    assert 'Classifier/CheckpointResidualBlock_0/BatchNorm_0' in wide
    assert 'recompute_flops' in wide and max(len(line) for line in wide.splitlines()) > 120
    # Three significant digits in the narrow table, the full figures in the wide one.
    assert '12.8 ms' in str(report) and '12.800 ms' in wide


def test_no_module_row_is_explained():
    text = str(_wide_report())
    assert '(no module): work outside every module' in text
    assert 'can exceed the root' in text
    rows = {'Net': {'flops': 1.0}}
    assert 'outside every module' not in str(Report(rows=rows, columns=('flops',)))


def test_lambda_rows_of_a_part_without_the_owner_become_the_owners_row():
    trace = SimpleNamespace(rows=(SimpleNamespace(path='A.<lambda>', inclusive_seconds=0.5),))
    report = Report.join(trace=trace)
    assert report.rows == {'A': {'trace_seconds': 0.5}}
