"""User ``linen_profiling_name`` rules that read the instance: each instance gets its own label."""

import re

import jax
import jax.numpy as jnp
import pytest

lm = pytest.importorskip('linen.module')

from linen.core import register_plugin, unregister_plugin  # noqa: E402
from linen.core.hookspecs import hookimpl  # noqa: E402
from linen.profiling import module_costs, override_named_call  # noqa: E402


class Dense(lm.Module):
    features: int

    @lm.compact
    def __call__(self, x):
        kernel = self.param('kernel', lambda key, s: jnp.ones(s), (x.shape[-1], self.features))
        return x @ kernel


class Block(lm.Module):
    features: int

    @lm.compact
    def __call__(self, x):
        return Dense(self.features)(x)


class Net(lm.Module):
    @lm.compact
    def __call__(self, x):
        # Two unnamed Blocks (Block_0, Block_1), each holding an unnamed Dense_0.
        x = Block(16)(x)
        return Block(4)(x)


class PathRule:
    @staticmethod
    @hookimpl(tryfirst=True)
    def linen_profiling_name(module, method_name, method):
        if isinstance(module, Dense):
            return 'at_' + '.'.join(module.path)
        return None


class FieldRule:
    @staticmethod
    @hookimpl(tryfirst=True)
    def linen_profiling_name(module, method_name, method):
        if isinstance(module, Dense):
            return f'Dense[{module.features}]'
        return None


def _dense_labels(rule):
    x = jnp.ones((2, 8))
    variables = Net().init(jax.random.key(0), x)
    name = register_plugin(rule, name=f'test-{rule.__name__}')
    try:
        with override_named_call(True):
            # Twice: a cache keyed by class and name would answer the second call.
            for _ in range(2):
                text = jax.jit(Net().apply).lower(variables, x).compile().as_text()
                costs = module_costs(Net().apply, variables, x)
    finally:
        unregister_plugin(name)
    # With trace reuse on (LINEN_REUSE_TRACES=1) a block that calls submodules is a
    # compiled program, named after the instance's label (docs/differences.md).
    text = text.replace('/jit(linen_reuse)', '')
    ops = set(re.findall(r'op_name="jit\(apply\)/([^"]*)/dot_general"', text))
    return ops, costs


def test_path_rule_labels_every_instance_by_its_own_path():
    ops, costs = _dense_labels(PathRule)
    assert ops == {'Net/Block_0/at_Block_0.Dense_0', 'Net/Block_1/at_Block_1.Dense_0'}
    assert costs['Net/Block_0/at_Block_0.Dense_0'].flops == 2 * 2 * 8 * 16
    assert costs['Net/Block_1/at_Block_1.Dense_0'].flops == 2 * 2 * 16 * 4


def test_field_rule_labels_every_instance_by_its_own_field():
    ops, costs = _dense_labels(FieldRule)
    assert ops == {'Net/Block_0/Dense[16]', 'Net/Block_1/Dense[4]'}
    assert costs['Net/Block_1/Dense[4]'].flops == 2 * 2 * 16 * 4


def test_default_rule_comes_back_after_the_user_rule_is_removed():
    _dense_labels(FieldRule)
    x = jnp.ones((2, 8))
    variables = Net().init(jax.random.key(0), x)
    with override_named_call(True):
        text = jax.jit(Net().apply).lower(variables, x).compile().as_text()
    text = text.replace('/jit(linen_reuse)', '')  # (as in _dense_labels)
    ops = set(re.findall(r'op_name="jit\(apply\)/([^"]*)/dot_general"', text))
    assert ops == {'Net/Block_0/Dense_0', 'Net/Block_1/Dense_0'}
