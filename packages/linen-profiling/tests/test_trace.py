import glob
from pathlib import Path
import os

import jax
import jax.numpy as jnp
import pytest

from linen.profiling import profile
from linen.profiling._trace import _newest_xplane, times_from_xspace
from linen.profiling._xplane import read_xspace
from linen.profiling.errors import ProfileNoDeviceOpsError, ProfileTraceNotFoundError


def model(x, w1, w2):
    with jax.named_scope('MLP'):
        with jax.named_scope('Dense_0'):
            y = jnp.tanh(x @ w1)
        with jax.named_scope('Dense_1'):
            y = y @ w2
    return y.sum()


ARGS = (jnp.ones((128, 256)), jnp.ones((256, 256)), jnp.ones((256, 32)))


@pytest.fixture(scope='module')
def recorded(tmp_path_factory):
    logdir = tmp_path_factory.mktemp('trace')
    times = profile(model, *ARGS, steps=2, logdir=logdir, print_table=False)
    return times, logdir


def test_writes_a_trace_tensorboard_can_open(recorded):
    times, logdir = recorded
    # TensorBoard's profile plugin reads <logdir>/plugins/profile/<run>/<host>.xplane.pb.
    found = glob.glob(os.path.join(logdir, 'plugins', 'profile', '*', '*.xplane.pb'))
    assert found == [times.xplane_path]
    planes = {plane.name for plane in read_xspace(Path(found[0]).read_bytes())}
    assert '/host:metadata' in planes


def test_time_per_module_from_the_cpu_trace(recorded):
    times, _ = recorded
    assert times.hlo_source == 'trace'
    assert times.program == 'jit_model'
    assert times.steps == 2
    for path in ('MLP', 'MLP/Dense_0', 'MLP/Dense_1'):
        assert path in times.by_path()
    assert times['MLP/Dense_0'].seconds > 0
    assert times['MLP/Dense_1'].seconds > 0
    assert times['MLP'].inclusive_seconds == pytest.approx(
        times['MLP'].seconds + times['MLP/Dense_0'].seconds + times['MLP/Dense_1'].seconds
    )
    assert times.total_seconds == pytest.approx(sum(row.seconds for row in times.rows))


def test_table(recorded, capsys):
    times, _ = recorded
    table = str(times)
    assert table.splitlines()[0].startswith('Time per module (jit_model, 2 steps')
    assert '  Dense_0' in table
    assert table.splitlines()[-1].startswith('total')


def test_no_trace_in_directory_raises(tmp_path):
    with pytest.raises(ProfileTraceNotFoundError, match=r'No "\*\.xplane\.pb" trace'):
        _newest_xplane(str(tmp_path), after=0.0)


def test_program_without_events_raises(recorded):
    times, _ = recorded
    data = Path(times.xplane_path).read_bytes()
    with pytest.raises(ProfileNoDeviceOpsError, match="no XLA op events of program 'jit_other'"):
        times_from_xspace(data, 'jit_other', steps=1, xplane_path=times.xplane_path)


def test_without_hlo_in_the_trace_falls_back_to_the_compiled_hlo(recorded):
    times, _ = recorded
    data = Path(times.xplane_path).read_bytes()
    compiled = jax.jit(model).lower(*ARGS).compile().as_text()
    planes_without_hlo = data.replace(b'Hlo Proto', b'Hlo Gone!')
    fallback = times_from_xspace(
        planes_without_hlo, 'jit_model', steps=2, fallback_hlo_text=compiled
    )
    assert fallback.hlo_source == 'compiled'
    assert set(fallback.by_path()) == set(times.by_path())
