"""Labels of real Modules in compiled HLO, through linen-module's dispatcher."""

import re
import threading

import jax
import jax.numpy as jnp
import pytest

lm = pytest.importorskip('linen.module')

from linen.core import _bus  # noqa: E402
from linen.core.hookspecs import hookimpl  # noqa: E402
from linen.profiling import (  # noqa: E402
    disable_named_call,
    named_call,
    override_named_call,
    strip_metadata,
)
from linen.profiling._state import _switch  # noqa: E402


@pytest.fixture(autouse=True)
def labels_follow_config(restore_profile_flag):
    token = _switch.set(None)
    lm.invalidate_method_wrappers()
    yield
    _switch.reset(token)
    lm.invalidate_method_wrappers(everywhere=True)


class Dense(lm.Module):
    features: int

    @lm.compact
    def __call__(self, x):
        kernel = self.param(
            'kernel', lambda key, shape: jnp.ones(shape), (x.shape[-1], self.features)
        )
        return x @ kernel

    def scaled(self, x):
        return self(x) * 2.0

    @lm.nowrap
    def helper(self, x):
        return jnp.sin(x)


class MLP(lm.Module):
    @lm.compact
    def __call__(self, x):
        x = Dense(4)(x)
        x = Dense(3, name='proj').scaled(x)
        return Dense(2).helper(x)


class WithSetup(lm.Module):
    def setup(self):
        self.dense = Dense(2)

    def __call__(self, x):
        return self.dense(x)


X = jnp.ones((2, 5))


def labels(text):
    return ' '.join(re.findall(r'op_name="([^"]*)"', text))


def hlo(module, x=X):
    variables = module.init(jax.random.key(0), x)
    text = jax.jit(module.apply).lower(variables, x).compile().as_text()
    # With trace reuse on (LINEN_REUSE_TRACES=1) a block that calls submodules is a
    # compiled program, named after the instance's label (docs/differences.md).
    return text.replace('/jit(linen_reuse)', '')


def test_instance_names_class_names_and_method_suffixes():
    text = hlo(MLP())
    assert 'op_name="jit(apply)/MLP/Dense_0/dot_general"' in text
    # An explicit name wins over the class name; a method other than __call__
    # adds its name, and its call of __call__ nests below.
    assert 'op_name="jit(apply)/MLP/proj.scaled/proj/dot_general"' in text
    assert 'op_name="jit(apply)/MLP/proj.scaled/mul"' in text


def test_nowrap_and_setup_get_no_label():
    text = hlo(MLP())
    assert 'op_name="jit(apply)/MLP/sin"' in text
    assert 'helper' not in labels(text)
    assert 'setup' not in labels(hlo(WithSetup()))
    assert 'op_name="jit(apply)/WithSetup/dense/dot_general"' in hlo(WithSetup())


def test_labels_off_in_context():
    with override_named_call(False):
        text = hlo(MLP())
    assert '/Dense_0/' not in labels(text)
    assert '/Dense_0/' in labels(hlo(MLP()))


def test_override_restores_on_exception():
    with pytest.raises(ValueError, match='inside'):
        with override_named_call(False):
            raise ValueError('inside')
    assert '/Dense_0/' in labels(hlo(MLP()))


def test_config_update_takes_effect():
    from linen.core.config import config

    config.update('linen_profile', False)
    assert '/Dense_0/' not in labels(hlo(MLP()))
    config.update('linen_profile', True)
    assert '/Dense_0/' in labels(hlo(MLP()))


def test_threads_are_isolated():
    results = {}
    barrier = threading.Barrier(2)

    def run(key, enable):
        with override_named_call(enable):
            barrier.wait(10)
            results[key] = '/Dense_0/' in labels(hlo(MLP()))

    threads = [threading.Thread(target=run, args=(k, e)) for k, e in (('on', True), ('off', False))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {'on': True, 'off': False}


class Forced(lm.Module):
    @named_call
    def __call__(self, x):
        return jnp.tanh(x)


class Following(lm.Module):
    def __call__(self, x):
        return jnp.tanh(x)

    __call__ = named_call(__call__, force=False)


def test_named_call_force_semantics_and_single_label():
    disable_named_call()
    assert 'op_name="jit(apply)/Forced/tanh"' in hlo(Forced())
    assert 'Following' not in labels(hlo(Following()))
    with override_named_call(True):
        # Labelled once, not Forced/Forced.
        assert 'op_name="jit(apply)/Forced/tanh"' in hlo(Forced())
        assert 'op_name="jit(apply)/Following/tanh"' in hlo(Following())


class UpperCaseNames:
    @staticmethod
    @hookimpl(tryfirst=True)
    def linen_profiling_name(module, method_name, method):
        if type(module).__name__ == 'Dense':
            return (module.name or 'dense').upper()
        return None  # fall through to the default rule


def test_user_name_hook_changes_labels():
    name = _bus.register(UpperCaseNames, name='test-upper-case-names')
    try:
        text = hlo(MLP())
    finally:
        _bus.unregister(name)
    assert 'op_name="jit(apply)/MLP/DENSE_0/dot_general"' in text
    assert 'op_name="jit(apply)/MLP/PROJ/PROJ/dot_general"' in text
    assert 'DENSE_0' not in labels(hlo(MLP()))


def test_labels_leave_the_optimized_hlo_unchanged():
    with override_named_call(True):
        on = hlo(MLP())
    with override_named_call(False):
        off = hlo(MLP())
    assert on != off
    assert strip_metadata(on) == strip_metadata(off)


def test_nn_jit_retraces_when_labels_are_toggled():
    """A lifted jit keys its cache on the active wrappers: no stale labels either way."""
    jit = pytest.importorskip('linen.transforms').jit
    traces = []

    class Traced(lm.Module):
        @lm.compact
        def __call__(self, x):
            traces.append(1)
            return Dense(3, name='proj')(x)

    class Outer(lm.Module):
        @lm.compact
        def __call__(self, x):
            return jit(Traced)(name='block')(x)

    variables = Outer().init(jax.random.key(0), X)

    def lowered():
        # a fresh outer function each time: only nn.jit's own cache can be reused
        fn = jax.jit(lambda v, x: Outer().apply(v, x))
        ops = labels(fn.lower(variables, X).compile().as_text()).split()
        return ' '.join(op for op in ops if op.endswith('dot_general'))

    traces.clear()
    with_labels = lowered()
    assert 'proj' in with_labels and len(traces) == 1
    with override_named_call(False):
        without = lowered()
    assert len(traces) == 2  # retraced for the new labelling state
    assert 'proj' not in without
    assert 'proj' in lowered() and len(traces) == 2  # the labelled trace is reused


def test_labels_off_runs_no_profiling_code_per_call():
    import sys

    model, x = MLP(), X
    variables = model.init(jax.random.key(0), x)
    called = set()

    def watch(frame, event, arg):
        if event == 'call' and '/linen/profiling/' in frame.f_code.co_filename.replace('\\', '/'):
            called.add(f'{frame.f_code.co_filename}:{frame.f_code.co_name}')

    with override_named_call(False):
        model.apply(variables, x)  # the wrapper chain is rebuilt here, once
        sys.setprofile(watch)
        try:
            jax.make_jaxpr(lambda v, x: model.apply(v, x))(variables, x)
        finally:
            sys.setprofile(None)
    assert called == set()
    with override_named_call(True):
        model.apply(variables, x)
        sys.setprofile(watch)
        try:
            jax.make_jaxpr(lambda v, x: model.apply(v, x))(variables, x)
        finally:
            sys.setprofile(None)
    assert any(name.endswith(':label_method_call') for name in called)  # the probe works
