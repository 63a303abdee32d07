"""Config flags that change Module behaviour, against flax.linen as an oracle."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

pytest.importorskip('flax')
pytestmark = pytest.mark.flax

import flax  # noqa: E402
import flax.linen as flax_nn  # noqa: E402

import linen.nn as linen_nn  # noqa: E402
from linen.core import config as linen_config  # noqa: E402

SIDES = [(flax_nn, flax.config), (linen_nn, linen_config)]


def adopting_model(nn, class_preserve=None):
    class Parent(nn.Module):
        child: nn.Module

        def __call__(self, x):
            return self.child(x)

    if class_preserve is not None:
        Parent.preserve_adopted_names = class_preserve
    return Parent(nn.Dense(2, name='encoder'))


@pytest.mark.parametrize('flag', [True, False])
@pytest.mark.parametrize('class_preserve', [None, True, False])
def test_preserve_adopted_names(flag, class_preserve):
    x = jnp.ones((1, 3))
    trees = []
    for nn, config in SIDES:
        with config.temp_flip_flag('preserve_adopted_names', flag):
            variables = adopting_model(nn, class_preserve).init(jax.random.key(0), x)
        trees.append(jax.tree_util.tree_structure(jax.tree_util.tree_map(jnp.shape, variables)))
    assert trees[0] == trees[1]
    wanted = flag if class_preserve is None else class_preserve
    assert ("'encoder'" in str(trees[1])) is wanted


@pytest.mark.parametrize('flag', [True, False])
def test_return_frozendict_from_module_init_and_apply(flag):
    x = jnp.ones((1, 3))
    kinds = []
    for nn, config in SIDES:
        with config.temp_flip_flag('return_frozendict', flag):
            model = nn.BatchNorm(use_running_average=False)
            variables = model.init(jax.random.key(0), x)
            _, state = model.apply(variables, x, mutable=['batch_stats'])
            bound_vars = model.bind(variables).variables
        kinds.append(tuple(type(v).__name__ for v in (variables, state, bound_vars)))
    assert kinds[0] == kinds[1]
    assert kinds[1][0] == ('FrozenDict' if flag else 'dict')
