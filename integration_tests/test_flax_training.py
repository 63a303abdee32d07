"""linen.core.traverse_util and linen.training.TrainState against Flax's, as a black box."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

flax_traverse_util = pytest.importorskip('flax.traverse_util')
flax_train_state = pytest.importorskip('flax.training.train_state')
flax_serialization = pytest.importorskip('flax.serialization')
flax_core = pytest.importorskip('flax.core')

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402

from linen.core import FrozenDict, serialization, traverse_util  # noqa: E402
from linen.training import TrainState  # noqa: E402

pytestmark = pytest.mark.flax

TREES = [
    {'b': {'y': 1, 'x': {}}, 'a': 2, 'c': {'d': {'e': 3, 'f': {}}}},
    {},
    {'params': {'Dense_0': {'kernel': 1, 'bias': 2}, 'Conv_0': {'kernel': 3}}},
]


@pytest.mark.parametrize('tree', TREES)
@pytest.mark.parametrize('keep_empty_nodes', [False, True])
@pytest.mark.parametrize('sep', [None, '/', '.'])
def test_flatten_unflatten_match_flax(tree, keep_empty_nodes, sep):
    ours = traverse_util.flatten_dict(tree, keep_empty_nodes=keep_empty_nodes, sep=sep)
    theirs = flax_traverse_util.flatten_dict(tree, keep_empty_nodes=keep_empty_nodes, sep=sep)
    # Same keys in the same order; empty nodes are each library's own marker.
    assert list(ours) == list(theirs)
    for key in ours:
        if ours[key] is traverse_util.empty_node:
            assert theirs[key] is flax_traverse_util.empty_node
        else:
            assert ours[key] == theirs[key]
    assert traverse_util.unflatten_dict(ours, sep=sep) == flax_traverse_util.unflatten_dict(
        theirs, sep=sep
    )


def test_flatten_is_leaf_and_frozen_dict_match_flax():
    tree = TREES[0]

    def is_leaf(path, x):
        return path == ('c', 'd')

    assert traverse_util.flatten_dict(tree, is_leaf=is_leaf) == flax_traverse_util.flatten_dict(
        tree, is_leaf=is_leaf
    )
    assert traverse_util.flatten_dict(FrozenDict(tree)) == flax_traverse_util.flatten_dict(
        flax_core.FrozenDict(tree)
    )


def test_path_aware_map_matches_flax():
    def label(path, x):
        return ('decay' if path[-1] == 'kernel' else 'none', path, x)

    for tree in TREES:
        assert traverse_util.path_aware_map(label, tree) == flax_traverse_util.path_aware_map(
            label, tree
        )


# Flax deprecates its traversals and warns on construction; ours is the oracle's twin.
@pytest.mark.filterwarnings('ignore::DeprecationWarning')
def test_model_param_traversal_matches_flax():
    params = TREES[2]['params'] | {'empty': {}}

    def fn(path, _):
        return 'kernel' in path

    ours, theirs = (
        traverse_util.ModelParamTraversal(fn),
        flax_traverse_util.ModelParamTraversal(fn),
    )
    assert list(ours.iterate(params)) == list(theirs.iterate(params))
    assert ours.update(lambda x: -x, params) == theirs.update(lambda x: -x, params)
    assert ours.set([7, 8], params) == theirs.set([7, 8], params)


def _model_params():
    keys = jax.random.split(jax.random.key(0), 3)
    return {
        'Dense_0': {
            'kernel': jax.random.normal(keys[0], (3, 4)),
            'bias': jax.random.normal(keys[1], (4,)),
        },
        'scale': jax.random.normal(keys[2], (4,)),
    }


def _optimizer(params):
    # AdamW with weight decay on kernels only: the mask every Flax example builds.
    mask = traverse_util.path_aware_map(lambda path, _: path[-1] == 'kernel', params)
    return optax.chain(
        optax.clip_by_global_norm(1.0), optax.adamw(1e-2, weight_decay=0.1, mask=mask)
    )


class OurState(TrainState):
    batch_stats: Any = None


class FlaxState(flax_train_state.TrainState):
    batch_stats: Any = None


def _loss(params, x):
    y = x @ params['Dense_0']['kernel'] + params['Dense_0']['bias'].reshape(1, 4)
    return jnp.mean(jnp.tanh(y * params['scale'].reshape(1, 4)) ** 2)


def _train(cls, steps=4):
    params = _model_params()
    state = cls.create(
        apply_fn=_loss, params=params, tx=_optimizer(params), batch_stats={'n': jnp.zeros(())}
    )

    @jax.jit
    def step(state, x):
        loss, grads = jax.value_and_grad(state.apply_fn)(state.params, x)
        return state.apply_gradients(
            grads=grads, batch_stats={'n': state.batch_stats['n'] + 1}
        ), loss

    losses = []
    for i in range(steps):
        x = jax.random.normal(jax.random.key(10 + i), (8, 3))
        state, loss = step(state, x)
        losses.append(float(loss))
    return state, losses


def test_train_state_steps_match_flax():
    ours, our_losses = _train(OurState)
    theirs, their_losses = _train(FlaxState)
    np.testing.assert_allclose(our_losses, their_losses, rtol=1e-6, atol=1e-7)
    assert int(ours.step) == int(theirs.step) == 4
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)

    # The same pytree layout, so jax.tree_util code written for Flax's state carries over.
    def paths(state):
        return [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(state)]

    assert paths(ours) == paths(theirs)


def test_train_state_checkpoints_cross_load_with_flax():
    ours, _ = _train(OurState, steps=2)
    theirs, _ = _train(FlaxState, steps=2)
    assert (
        serialization.to_state_dict(ours).keys() == flax_serialization.to_state_dict(theirs).keys()
    )
    fresh_flax, _ = _train(FlaxState, steps=0)
    loaded = flax_serialization.from_bytes(fresh_flax, serialization.to_bytes(ours))
    for a, b in zip(jax.tree_util.tree_leaves(loaded), jax.tree_util.tree_leaves(ours)):
        np.testing.assert_array_equal(a, b)
    fresh_ours, _ = _train(OurState, steps=0)
    back = serialization.from_bytes(fresh_ours, flax_serialization.to_bytes(theirs))
    for a, b in zip(jax.tree_util.tree_leaves(back), jax.tree_util.tree_leaves(theirs)):
        np.testing.assert_array_equal(a, b)


class _InitOnly:
    """A ``tx`` with ``init`` and no ``update``: Flax creates the state, then fails."""

    def init(self, params):
        return ()


def _raised(fn):
    with pytest.raises(Exception) as info:
        fn()
    return info.value


def test_train_state_with_a_non_optimizer_fails_where_flax_does():
    from linen.core.errors import TrainStateOptimizerError

    params = {'w': jnp.ones(2)}
    # No `init`: both refuse at create; ours is Flax's AttributeError too.
    theirs = _raised(
        lambda: flax_train_state.TrainState.create(apply_fn=None, params=params, tx=0.1)
    )
    ours = _raised(lambda: TrainState.create(apply_fn=None, params=params, tx=0.1))
    assert type(ours) is TrainStateOptimizerError and isinstance(ours, type(theirs))
    # No `update`: created in both; apply_gradients fails in both, the same way.
    grads = {'w': jnp.ones(2)}
    flax_state = flax_train_state.TrainState.create(apply_fn=None, params=params, tx=_InitOnly())
    state = TrainState.create(apply_fn=None, params=params, tx=_InitOnly())
    assert state.opt_state == flax_state.opt_state == ()
    theirs = _raised(lambda: flax_state.apply_gradients(grads=grads))
    ours = _raised(lambda: state.apply_gradients(grads=grads))
    assert type(ours) is type(theirs) is AttributeError
