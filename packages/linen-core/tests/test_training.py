"""linen.training.TrainState against optimizer steps computed by hand."""

from __future__ import annotations

import doctest
import subprocess
import sys
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from linen.core import errors, serialization
from linen.training import TrainState, train_state


def _params():
    return {'w': jnp.array([1.0, -2.0]), 'b': jnp.array(0.5)}


def test_create_and_sgd_step_match_hand_computation():
    state = TrainState.create(apply_fn=None, params=_params(), tx=optax.sgd(0.1))
    assert state.step == 0
    grads = {'w': jnp.array([0.5, 1.0]), 'b': jnp.array(-1.0)}
    state = jax.jit(lambda s, g: s.apply_gradients(grads=g))(state, grads)
    assert int(state.step) == 1
    np.testing.assert_allclose(state.params['w'], [0.95, -2.1], rtol=1e-6)
    np.testing.assert_allclose(state.params['b'], 0.6, rtol=1e-6)


def test_momentum_state_carries_between_steps():
    state = TrainState.create(apply_fn=None, params={'w': jnp.array(0.0)}, tx=optax.sgd(1.0, 0.5))
    for _ in range(2):
        state = state.apply_gradients(grads={'w': jnp.array(1.0)})
    # trace = g + 0.5 * trace: 1 then 1.5; w = -(1 + 1.5)
    np.testing.assert_allclose(state.params['w'], -2.5, rtol=1e-6)


def test_bfloat16_params_stay_bfloat16():
    state = TrainState.create(
        apply_fn=None, params={'w': jnp.ones(2, jnp.bfloat16)}, tx=optax.sgd(0.5)
    )
    state = state.apply_gradients(grads={'w': jnp.ones(2, jnp.float32)})
    assert state.params['w'].dtype == jnp.bfloat16


class StateWithStats(TrainState):
    batch_stats: Any = None


def test_subclass_fields_pytree_and_replace():
    state = StateWithStats.create(
        apply_fn=abs, params=_params(), tx=optax.adam(1e-2), batch_stats={'mean': jnp.zeros(2)}
    )
    state = state.apply_gradients(grads=_params(), batch_stats={'mean': jnp.ones(2)})
    assert state.batch_stats['mean'].tolist() == [1.0, 1.0]
    leaves, treedef = jax.tree_util.tree_flatten(state)
    rebuilt = jax.tree_util.tree_unflatten(treedef, leaves)
    assert rebuilt.apply_fn is abs and rebuilt.tx is state.tx
    assert state.replace(step=7).step == 7


def test_serialization_round_trip_is_exact():
    state = TrainState.create(apply_fn=None, params=_params(), tx=optax.adam(1e-2))
    state = state.apply_gradients(grads=_params())
    fresh = TrainState.create(apply_fn=None, params=_params(), tx=optax.adam(1e-2))
    restored = serialization.from_bytes(fresh, serialization.to_bytes(state))
    for a, b in zip(jax.tree_util.tree_leaves(restored), jax.tree_util.tree_leaves(state)):
        np.testing.assert_array_equal(a, b)
    assert set(serialization.to_state_dict(state)) == {'step', 'params', 'opt_state'}


def test_create_rejects_a_non_optimizer():
    with pytest.raises(
        errors.TrainStateOptimizerError, match='needs an optax GradientTransformation'
    ):
        TrainState.create(apply_fn=None, params=_params(), tx=0.1)


def test_docstring_examples_run():
    result = doctest.testmod(train_state)
    assert result.attempted > 0 and result.failed == 0


def test_linen_training_needs_no_optax():
    # linen-core alone (no optax) must import linen.training: optax is only the
    # source of the `tx` a user passes. A None entry in sys.modules blocks an import.
    code = (
        'import sys; sys.modules["optax"] = None\n'
        'import jax.numpy as jnp\n'
        'from linen.training import TrainState\n'
        'class Sgd:\n'
        '    def init(self, params): return ()\n'
        '    def update(self, g, s, p=None): return {"w": -g["w"]}, s\n'
        's = TrainState.create(apply_fn=None, params={"w": jnp.ones(1)}, tx=Sgd())\n'
        'print(float(s.apply_gradients(grads={"w": jnp.ones(1)}).params["w"][0]))\n'
    )
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == '0.0'
