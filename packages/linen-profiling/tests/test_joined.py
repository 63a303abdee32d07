"""``Report``: costs, memory and trace time joined per module; JSON, pandas, diff."""

import io

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
    assert 'MLP/head' in str(report)


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
