"""``roofline`` against hand-computed rates; profiling errors pickle."""

import pickle

import pytest

from linen.profiling import errors, roofline
from linen.profiling._costs import CostRow, ModuleCosts
from linen.profiling._trace import ModuleTimes, TimeRow


def _cost(path, flops, nbytes):
    return CostRow(path, flops, 0.0, nbytes, flops, 0.0, nbytes, 1)


COSTS = ModuleCosts(
    rows=(_cost('M/matmul', 8e9, 1e6), _cost('M/norm', 1e6, 4e8)),
    flops=8.001e9,
    transcendentals=0.0,
    bytes_accessed=4.01e8,
)
TIMES = ModuleTimes(
    rows=(TimeRow('M/matmul', 0.04, 0.04, 2), TimeRow('M/norm', 0.02, 0.02, 2)),
    steps=2,
    total_seconds=0.06,
    logdir='',
    xplane_path='',
    program='jit_f',
    hlo_source='compiled',
)


def test_rates_shares_and_time_lost_by_hand():
    report = roofline(
        COSTS, TIMES, peak_flops_per_second=1e12, peak_bytes_per_second=1e11, device_kind='x'
    )
    matmul = report['M/matmul']
    assert matmul.seconds == 0.02  # 0.04 s over 2 steps
    assert matmul.flops_per_second == pytest.approx(8e9 / 0.02)
    assert matmul.flops_share == pytest.approx(8e9 / 0.02 / 1e12)
    assert matmul.intensity == pytest.approx(8e3)
    assert matmul.bound == 'compute'
    assert matmul.roofline_seconds == pytest.approx(8e-3)  # 8e9 / 1e12
    assert matmul.lost_seconds == pytest.approx(0.012)
    norm = report['M/norm']
    assert norm.bound == 'memory'
    assert norm.roofline_seconds == pytest.approx(4e-3)  # 4e8 / 1e11
    assert norm.lost_seconds == pytest.approx(0.006)
    assert [row.path for row in report.rows] == ['M/matmul', 'M/norm']  # most time lost first
    assert 'Roofline' in str(report)


def test_device_table_and_unknown_device():
    h100 = roofline(COSTS, TIMES, device_kind='NVIDIA H100 80GB HBM3')
    assert h100.peak_flops_per_second == 989e12
    with pytest.raises(errors.UnknownDevicePeakError, match="device kind 'cpu'.*peak_flops"):
        roofline(COSTS, TIMES, device_kind='cpu')


@pytest.mark.parametrize(
    'error',
    [
        errors.ProfileTraceNotFoundError('/tmp/x'),
        errors.ProfileNoDeviceOpsError('jit_f', '/tmp/x.pb', ['jit_g']),
        errors.UnknownDevicePeakError('cpu', ['H100']),
        errors.UncostedInstructionWarning(('cc (custom-call)',)),
        errors.ProfileUnmatchedOpsWarning('jit_f', ('fusion.1',)),
    ],
)
def test_errors_pickle_with_their_message(error):
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error)
