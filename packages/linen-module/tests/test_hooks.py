"""The method-wrapping and profiling-name hooks, and the two wrappers linen-module ships."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import linen.nn as nn
from linen.core import _bus
from linen.core.config import config
from linen.core.hookspecs import hookimpl
from linen.module import _dispatch, derive_profiling_name
from linen.module.hookspecs import MethodWrapper


def ones_init(key, shape):
    return jnp.ones(shape)


class Leaf(nn.Module):
    @nn.compact
    def __call__(self, x):
        return x * self.param('w', ones_init, x.shape[-1:])

    @nn.nowrap
    def helper(self, x):
        return x


class Tree(nn.Module):
    def setup(self):
        self.left = Leaf()
        self.right = Leaf()

    def __call__(self, x):
        return self.right(self.left(self.helper(x)))

    def helper(self, x):
        return self.left.helper(x) + 1


@pytest.fixture
def labels_off():
    """Switch the siblings' wrappers off: linen-profiling's labels and linen-transforms'
    trace reuse (on when the suite runs with ``LINEN_REUSE_TRACES=1``); no-ops without them."""
    before = config.linen_profile, config.linen_reuse_traces
    config.update('linen_profile', False)
    config.update('linen_reuse_traces', False)
    _dispatch.invalidate_method_wrappers(everywhere=True)
    yield
    config.update('linen_profile', before[0])
    config.update('linen_reuse_traces', before[1])
    _dispatch.invalidate_method_wrappers(everywhere=True)


@pytest.fixture
def plugin():
    names = []

    def register(obj, name):
        names.append(_bus.register(obj, name=name))

    yield register
    for name in names:
        _bus.unregister(name)


def test_no_plugin_active_means_no_runner(labels_off):
    assert _dispatch.get_runner() is None
    assert _dispatch.get_runner() is None  # cached


def test_no_runner_in_fresh_interpreter_without_profiling():
    env = dict(
        os.environ, LINEN_DISABLE_PLUGINS='profiling', LINEN_REUSE_TRACES='0', JAX_PLATFORMS='cpu'
    )
    code = (
        'import json; from linen.module import _dispatch; '
        'print(json.dumps(_dispatch.get_runner() is None))'
    )
    out = subprocess.run(
        [sys.executable, '-c', code], capture_output=True, text=True, env=env, check=True
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) is True


def test_wrapper_plugin_sees_every_wrapped_call(labels_off, plugin):
    calls = []

    def wrapper(next_fn, args, kwargs, context):
        calls.append((type(context.module).__name__, context.module.path, context.method_name))
        # the plain function; Flax's bound ``orig_method`` is the interceptors' context
        assert not hasattr(context, 'orig_method')
        assert getattr(type(context.module), context.method_name).__wrapped__ is context.method
        return next_fn(*args, **kwargs)

    plugin(types.SimpleNamespace(linen_method_wrapper=hookimpl(lambda: wrapper)), 'test-wrap')
    assert _dispatch.get_runner() is not None
    x = jnp.ones(2)
    v = Tree().init(jax.random.key(0), x)
    assert calls == [
        ('Tree', (), '__call__'),
        ('Tree', (), 'helper'),
        ('Leaf', ('left',), '__call__'),
        ('Leaf', ('right',), '__call__'),
    ]  # no setup, no @nowrap helper
    _bus.unregister('test-wrap')
    calls.clear()
    Tree().apply(v, x)
    assert calls == []


def test_wrapper_plugin_can_change_args_and_result(labels_off, plugin):
    def wrapper(next_fn, args, kwargs, context):
        if isinstance(context.module, Leaf):
            return next_fn(args[0] * 10, **kwargs) + 1
        return next_fn(*args, **kwargs)

    plugin(types.SimpleNamespace(linen_method_wrapper=hookimpl(lambda: wrapper)), 'test-change')
    x = jnp.array([1.0, 2.0])
    y = Leaf().apply({'params': {'w': jnp.array([2.0, 3.0])}}, x)
    np.testing.assert_allclose(y, x * 10 * jnp.array([2.0, 3.0]) + 1)


def test_method_wrapper_options(labels_off, plugin):
    seen = []

    def on_unbound(next_fn, args, kwargs, context):
        seen.append(('unbound-too', context.method_name, context.module.scope is None))
        return next_fn(*args, **kwargs)

    def bound_only(next_fn, args, kwargs, context):
        seen.append(('bound-only', context.method_name, context.module.scope is None))
        return next_fn(*args, **kwargs)

    wrappers = [MethodWrapper(on_unbound, wraps_unbound=True), bound_only]  # a plain callable too
    for i, wrapper in enumerate(wrappers):
        plugin(types.SimpleNamespace(linen_method_wrapper=hookimpl(lambda w=wrapper: w)), f'w{i}')

    class Plain(nn.Module):
        def triple(self, x):
            return 3 * x

    assert Plain().triple(2) == 6  # unbound: only the wrapper that asks for it
    assert seen == [('unbound-too', 'triple', True)]
    seen.clear()
    assert Plain().apply({}, 2, method='triple') == 6
    assert sorted(seen) == [('bound-only', 'triple', False), ('unbound-too', 'triple', False)]
    assert {type(w) for w in _dispatch.active_wrappers()} == {MethodWrapper}
    assert not _dispatch.wrappers_are_relative()  # neither has an at_boundary half


def test_wraps_setup_option(labels_off, plugin):
    seen = []

    def with_setup(next_fn, args, kwargs, context):
        seen.append(('with-setup', type(context.module).__name__, context.method_name, args))
        return next_fn(*args, **kwargs)

    def without_setup(next_fn, args, kwargs, context):
        seen.append(('without', type(context.module).__name__, context.method_name))
        return next_fn(*args, **kwargs)

    wrappers = [MethodWrapper(with_setup, wraps_setup=True), without_setup]
    for i, wrapper in enumerate(wrappers):
        plugin(types.SimpleNamespace(linen_method_wrapper=hookimpl(lambda w=wrapper: w)), f's{i}')
    x = jnp.array([1.0, 2.0])
    variables = Tree().init(jax.random.key(0), x)
    seen.clear()
    Tree().apply(variables, x)
    setups = [entry for entry in seen if 'setup' in entry]
    # Tree defines setup (once per binding, before its first method); Leaf does not.
    assert setups == [('with-setup', 'Tree', 'setup', ())]
    assert seen.index(setups[0]) == 0
    assert ('without', 'Tree', '__call__') in seen


def test_before_setup_option(labels_off, plugin):
    seen = []

    def record(next_fn, args, kwargs, context):
        seen.append(('record', context.module.name, context.method_name))
        return next_fn(*args, **kwargs)

    def answer_tree(next_fn, args, kwargs, context):
        # Answers Tree's calls itself; every other call goes on through the chain.
        seen.append(('early', context.module.name, context.method_name))
        if isinstance(context.module, Tree) and context.method_name == '__call__':
            return -args[0]
        return next_fn(*args, **kwargs)

    x = jnp.array([1.0, 2.0])
    variables = Tree().init(jax.random.key(0), x)
    # Registered last, so outermost (the leading run of before_setup wrappers).
    plugin(types.SimpleNamespace(linen_method_wrapper=hookimpl(lambda: MethodWrapper(record, wraps_setup=True))), 'rec')  # fmt: skip
    plugin(types.SimpleNamespace(linen_method_wrapper=hookimpl(lambda: MethodWrapper(answer_tree, before_setup=True))), 'early')  # fmt: skip
    bound = Tree().bind(variables)
    np.testing.assert_array_equal(bound(x), -x)
    # Answered before setup: Tree's setup did not run, nor anything inside it.
    assert seen == [('early', None, '__call__')]
    # Something needs the submodules: setup runs then, through the wrappers asking for it.
    seen.clear()
    np.testing.assert_array_equal(bound.left(x), x * variables['params']['left']['w'])
    assert seen[0] == ('record', None, 'setup')
    # A module already set up goes through the whole chain in order; a call the
    # early wrapper passes on runs setup first, then the other wrappers.
    seen.clear()
    bound.helper(x)
    assert seen == [('early', None, 'helper'), ('record', None, 'helper')]
    seen.clear()
    Leaf().apply({'params': variables['params']['left']}, x)
    assert seen == [('early', None, '__call__'), ('record', None, '__call__')]


def test_wrapper_returning_none_is_inactive(labels_off, plugin):
    plugin(types.SimpleNamespace(linen_method_wrapper=hookimpl(lambda: None)), 'test-none')
    assert _dispatch.get_runner() is None


def test_intercept_methods_sees_module_and_method_and_can_change_output(labels_off):
    seen = []

    def record(next_fun, args, kwargs, context):
        seen.append((context.module.name, context.method_name))
        return next_fun(*args, **kwargs)

    def double_leaves(next_fun, args, kwargs, context):
        y = next_fun(*args, **kwargs)
        return 2 * y if isinstance(context.module, Leaf) else y

    x = jnp.array([1.0, 2.0])
    v = Tree().init(jax.random.key(0), x)
    with nn.intercept_methods(record):
        with nn.intercept_methods(double_leaves):
            y = Tree().apply(v, x)
    assert seen == [
        (None, 'setup'),  # Tree's lazy setup, as Flax's interceptors see it
        (None, '__call__'),
        (None, 'helper'),
        ('left', '__call__'),
        ('right', '__call__'),
    ]
    # (x + 1) doubled by each leaf
    np.testing.assert_allclose(y, 4 * (x + 1))
    assert _dispatch.get_runner() is None  # deactivated on exit


def test_intercept_methods_nesting_order(labels_off):
    order = []

    def make(tag):
        def interceptor(next_fun, args, kwargs, context):
            order.append(f'{tag}>')
            out = next_fun(*args, **kwargs)
            order.append(f'<{tag}')
            return out

        return interceptor

    v = {'params': {'w': jnp.ones(1)}}
    with nn.intercept_methods(make('outer')), nn.intercept_methods(make('inner')):
        Leaf().apply(v, jnp.ones(1))
    assert order == ['outer>', 'inner>', '<inner', '<outer']


def test_capture_intermediates_true_and_filter():
    x = jnp.array([1.0, 2.0])
    v = Tree().init(jax.random.key(0), x)
    y, state = Tree().apply(v, x, capture_intermediates=True)
    inter = state['intermediates']
    np.testing.assert_allclose(inter['__call__'][0], y)
    np.testing.assert_allclose(inter['left']['__call__'][0], x + 1)
    np.testing.assert_allclose(inter['right']['__call__'][0], x + 1)
    assert 'helper' not in inter

    _, state = Tree().apply(v, x, capture_intermediates=lambda m, name: name == 'helper')
    assert jax.tree_util.tree_map(jnp.shape, state['intermediates']) == {'helper': ((2,),)}
    _, v2 = Tree().init_with_output(jax.random.key(0), x, capture_intermediates=True)
    assert 'intermediates' in v2


@pytest.fixture
def default_name_rule(plugin):
    """linen-profiling's rule, or a stand-in registered trylast when it is not installed."""
    pm = _bus.get_plugin_manager()
    hook = getattr(pm.hook, 'linen_profiling_name', None)
    if hook is None or not hook.get_hookimpls():

        @hookimpl(trylast=True)
        def linen_profiling_name(module, method_name, method):
            base = module.name or type(module).__name__
            return base if method_name == '__call__' else f'{base}.{method_name}'

        plugin(types.SimpleNamespace(linen_profiling_name=linen_profiling_name), 'test-default')


def test_profiling_name_default_and_override(default_name_rule, plugin):
    leaf = Leaf(name='enc')
    assert derive_profiling_name(leaf, '__call__', Leaf.__call__) == 'enc'
    assert derive_profiling_name(Leaf(), 'helper', Leaf.helper) == 'Leaf.helper'

    @hookimpl(tryfirst=True)
    def linen_profiling_name(module, method_name, method):
        if isinstance(module, Leaf):
            return f'custom:{method_name}'
        return None  # falls through to the default

    plugin(types.SimpleNamespace(linen_profiling_name=linen_profiling_name), 'test-names')
    assert derive_profiling_name(leaf, '__call__', Leaf.__call__) == 'custom:__call__'
    assert derive_profiling_name(Tree(), 'helper', Tree.helper) == 'Tree.helper'
    _bus.unregister('test-names')
    assert derive_profiling_name(leaf, '__call__', Leaf.__call__) == 'enc'


def test_profiling_name_hook_error_names_plugin(default_name_rule, plugin):
    @hookimpl(tryfirst=True)
    def linen_profiling_name(module, method_name, method):
        raise RuntimeError('bad name rule')

    plugin(types.SimpleNamespace(linen_profiling_name=linen_profiling_name), 'test-bad-names')
    with pytest.raises(nn.errors.PluginHookError, match='"test-bad-names".*bad name rule'):
        derive_profiling_name(Leaf(), '__call__', Leaf.__call__)
