"""A third-party plugin overriding the profiling-name hook, installed from its wheel.

``fixtures/linen-plugin-pathnames`` labels each Module call by its full module path.
It is built and installed with pip into a directory only a subprocess sees (as the
other plugin fixtures), and the labels are read from the compiled HLO's ``op_name``
metadata of ``jax.jit(model.apply)``.
"""

from __future__ import annotations

import pytest

MODEL = """
import json, re
import jax, jax.numpy as jnp
import linen.nn as nn


class Block(nn.Module):
    def setup(self):
        self.dense = nn.Dense(4)
        self.proj = nn.Dense(4)

    def __call__(self, x):
        return jnp.tanh(self.dense(x))

    def encode(self, x):
        return self.proj(x)


class Distinct(nn.Module):
    @nn.compact
    def __call__(self, x):
        {distinct}


class SameNames(nn.Module):
    @nn.compact
    def __call__(self, x):
        {same_names}


def labels(model):
    x = jnp.ones((2, 4))
    variables = jax.jit(model.init)(jax.random.key(0), x)
    hlo = jax.jit(model.apply).lower(variables, x).compile().as_text()
    # With trace reuse on (LINEN_REUSE_TRACES=1) a repeated block is one compiled
    # program, a `jit(linen_reuse)` component between its label and its submodules'
    # (docs/differences.md); the labels themselves are the same.
    hlo = hlo.replace('/jit(linen_reuse)', '')
    return sorted(set(re.findall(r'op_name="jit\\(apply\\)/([^"]*)/[^/"]*"', hlo)))


print(json.dumps({{'distinct': labels(Distinct()), 'same_names': labels(SameNames())}}))
"""

# One instance per (class, name) pair: every label is distinct even for a cache
# keyed on the class and the instance name.
DISTINCT = """
        x = Block(name='first')(x)
        return Block(name='second').encode(x)
"""

# Two instances of Block each holding a Dense named dense: the same class and
# name, told apart only by their paths.
SAME_NAMES = """
        x = Block()(x)
        return Block()(x)
"""


SCRIPT = MODEL.format(distinct=DISTINCT.strip(), same_names=SAME_NAMES.strip())


@pytest.fixture(scope='module')
def with_plugin(plugin_site, tools):
    # One interpreter compiles both models: each probe pays for importing JAX.
    return tools.run_probe(SCRIPT, sites=[plugin_site('linen-plugin-pathnames')])


def test_path_labels_replace_the_default_in_hlo(with_plugin, needs_module):
    names = with_plugin['distinct']
    # The root keeps the default label (the plugin returns None there); every
    # other label is the path rule's, nested as the calls are.
    assert 'Distinct/at-first/at-first-dense' in names
    assert 'Distinct/at-second.encode/at-second-proj' in names
    assert not any(
        part in {'first', 'second', 'dense', 'proj'} for n in names for part in n.split('/')
    )


def test_default_labels_without_the_plugin(probe, needs_module):
    names = probe(SCRIPT)['distinct']
    assert 'Distinct/first/dense' in names
    assert 'Distinct/second.encode/proj' in names


def test_every_instance_gets_its_own_path_label(with_plugin, needs_module):
    names = with_plugin['same_names']
    assert 'SameNames/at-Block_0/at-Block_0-dense' in names
    assert 'SameNames/at-Block_1/at-Block_1-dense' in names
