import glob
import os
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from linen.profiling import label_scope, profile
from linen.profiling._trace import _newest_xplane, times_from_xspace
from linen.profiling._xplane import read_xspace
from linen.profiling.errors import (
    ProfileNoDeviceOpsError,
    ProfileTraceNotFoundError,
    ProfileUnmatchedOpsWarning,
)


def model(x, w1, w2):
    with label_scope('MLP'):
        with label_scope('Dense_0'):
            y = jnp.tanh(x @ w1)
        with label_scope('Dense_1'):
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
        times_from_xspace(data, 'jit_other', steps=1, xplane_path=times.xplane_path, hlo_text='')


def test_labels_come_from_the_compiled_hlo_of_the_program_that_ran(recorded):
    times, _ = recorded
    assert times.hlo_source == 'compiled'
    assert times.unmatched_ops == ()


def test_hlo_of_another_program_is_reported_not_silently_dropped(recorded):
    times, _ = recorded
    data = Path(times.xplane_path).read_bytes()
    other = jax.jit(lambda x: jnp.sin(x)).lower(jnp.ones(3)).compile().as_text()
    with pytest.warns(ProfileUnmatchedOpsWarning, match='name no instruction'):
        wrong = times_from_xspace(data, 'jit_model', steps=2, hlo_text=other)
    assert wrong.unmatched_ops
    assert set(wrong.by_path()) == {''}


def test_perfetto_trace_has_a_track_per_module_from_the_real_trace(recorded, tmp_path):
    import json

    from linen.profiling import perfetto_trace

    times, _ = recorded
    out = perfetto_trace(times, tmp_path / 'trace.json')
    data = json.loads(Path(out).read_text())
    names = {
        e['tid']: e['args']['name'] for e in data['traceEvents'] if e.get('name') == 'thread_name'
    }
    assert {'MLP', 'MLP/Dense_0', 'MLP/Dense_1'} <= set(names.values())
    spans = [e for e in data['traceEvents'] if e['ph'] == 'X']
    by_track = {}
    for span in spans:
        by_track.setdefault(names[span['tid']], set()).add((span['ts'], span['name'], span['dur']))
    # A module's track holds its own ops and its submodules'.
    assert by_track['MLP/Dense_0'] | by_track['MLP/Dense_1'] <= by_track['MLP']
    # Every op event of the program is drawn, with the trace's own duration.
    events = [
        e
        for plane in read_xspace(Path(times.xplane_path).read_bytes())
        for line in plane.lines
        for e in line.events
        if e.stats.get('hlo_module') == 'jit_model' and 'hlo_op' in e.stats
    ]
    drawn = set().union(*by_track.values())
    assert len(drawn) == len(events)
    assert sum(d for _, _, d in drawn) == pytest.approx(sum(e.duration_ps for e in events) / 1e6)
