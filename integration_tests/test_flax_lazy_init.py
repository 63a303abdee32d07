"""``lazy_init`` against Flax's: same arguments, same (concrete) variables."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip('flax')
pytestmark = pytest.mark.flax

import flax.linen as flax_nn  # noqa: E402
from flax import errors as flax_errors  # noqa: E402

import linen.nn as linen_nn  # noqa: E402
from integration_tests.oracle import assert_same_bits  # noqa: E402
from linen.core import config  # noqa: E402


def assert_same_variables(ours, theirs):
    """Concrete arrays (no abstract stand-ins), bit for bit ``theirs`` (a dict at the top)."""
    assert all(isinstance(a, jax.Array) for a in jax.tree_util.tree_leaves(ours))
    assert_same_bits(ours, dict(theirs))


def model(nn):
    class Net(nn.Module):
        @nn.compact
        def __call__(self, x, train: bool):
            x = nn.Dense(8)(x)
            x = nn.BatchNorm(use_running_average=not train)(x)
            x = nn.Dropout(0.5, deterministic=not train)(x)
            if train:  # a Python branch on a concrete flag
                x = nn.Dense(4, name='train_head')(x)
            return nn.Dense(2)(nn.relu(x))

    return Net()


@pytest.mark.parametrize('train', [True, False])
def test_lazy_init_gives_flax_variables(train):
    rngs = {'params': jax.random.key(0), 'dropout': jax.random.key(1)}
    sds = jax.ShapeDtypeStruct((3, 5), jnp.float32)
    ours = model(linen_nn).lazy_init(rngs, sds, train)
    theirs = model(flax_nn).lazy_init(rngs, sds, train)
    theirs = flax_nn.meta.unbox(theirs)
    assert jax.tree_util.tree_structure(ours) == jax.tree_util.tree_structure(dict(theirs))
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        assert isinstance(a, jax.Array) and isinstance(b, jax.Array)
        assert a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def lifted_model(nn, kind):
    """A model whose variables are created inside the lifted transform ``kind``.

    The forward input flows into the same JAX primitive (``remat``, ``scan``,
    ``vmap``) as the initialisers, so only an analysis through that
    primitive can tell the variables do not depend on it.
    """

    class Cell(nn.Module):
        @nn.compact
        def __call__(self, c, x):
            h = nn.Dense(3)(c + x)
            return h, h

    class Net(nn.Module):
        @nn.compact
        def __call__(self, x):
            if kind == 'remat':
                return nn.remat(nn.Dense)(3)(x)
            if kind == 'scan':
                stack = nn.scan(
                    Cell, variable_axes={'params': 0}, split_rngs={'params': True}, in_axes=0
                )
                return stack()(jnp.zeros(x.shape[1:], x.dtype), x)[1]
            if kind == 'vmap':
                return nn.vmap(nn.Dense, variable_axes={'params': 0}, split_rngs={'params': True})(
                    3
                )(x)
            raise ValueError(kind)

    return Net()


LIFTED = ['remat', 'scan', 'vmap']


@pytest.mark.parametrize('kind', LIFTED)
def test_lazy_init_sees_through_lifted_transforms_as_flax(kind):
    # Flax's partial evaluation goes inside the transform's primitive and finds the
    # variables depend on the key alone; linen must give those variables, not an error.
    sds = jax.ShapeDtypeStruct((2, 3), jnp.float32)
    key = jax.random.key(0)
    ours = lifted_model(linen_nn, kind).lazy_init(key, sds)
    theirs = flax_nn.meta.unbox(lifted_model(flax_nn, kind).lazy_init(key, sds))
    assert_same_variables(ours, theirs)
    # Under an outer jit the same analysis runs on the staged path.
    staged = jax.jit(lambda k: lifted_model(linen_nn, kind).lazy_init(k, sds))(key)
    for a, b in zip(jax.tree_util.tree_leaves(staged), jax.tree_util.tree_leaves(ours)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_lazy_init_of_nn_jit_gives_the_variables_of_init():
    # nn.jit keeps the path-derived rng in linen (docs/differences.md), so the oracle
    # here is linen's own init on a concrete input, not Flax.
    x = jnp.ones((2, 3))
    model = lifted_jit_model()
    expected = model.init(jax.random.key(0), x)
    got = model.lazy_init(jax.random.key(0), jax.ShapeDtypeStruct(x.shape, x.dtype))
    assert_same_variables(got, expected)


def lifted_jit_model():
    class Net(linen_nn.Module):
        @linen_nn.compact
        def __call__(self, x):
            return linen_nn.jit(linen_nn.Dense)(3)(x)

    return Net()


def flax_rule(module, key, sds, **kwargs):
    """What Flax's ``lazy_init`` returns for an input that a variable (or Python) reads.

    Flax 0.12.9 and later (the JAX 0.12 end) evaluate the model with zeros for the
    abstract input; Flax 0.12.8 (JAX 0.10) raises there, and its ``init`` on zeros is
    what the later releases return.
    """
    try:
        return flax_nn.meta.unbox(module.lazy_init(key, sds, **kwargs))
    except (flax_errors.LazyInitError, jax.errors.ConcretizationTypeError):
        return flax_nn.meta.unbox(module.init(key, jnp.zeros(sds.shape, sds.dtype), **kwargs))


def branches_model(nn):
    class Net(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.cond(
                jnp.sum(x) > 0,
                lambda mdl, x: nn.Dense(2, name='branch')(x),
                lambda mdl, x: -nn.Dense(2, name='branch')(x * 2),
                self,
                x,
            )

    return Net()


def python_branch_model(nn):
    class Net(nn.Module):
        @nn.compact
        def __call__(self, x):
            if jnp.sum(x) > 0:  # Python reads the input's value
                return nn.Dense(2)(x)
            return nn.Dense(4, name='other')(x)

    return Net()


def switch_model(nn):
    class Net(nn.Module):
        @nn.compact
        def __call__(self, x):
            index = (jnp.sum(x) > 0).astype(jnp.int32) + 1
            branches = [
                lambda mdl, x: nn.Dense(2, name='branch')(x),
                lambda mdl, x: nn.Dense(2, name='branch')(x * 3),
                lambda mdl, x: -nn.Dense(2, name='branch')(x),
            ]
            return nn.switch(index, branches, self, x)

    return Net()


@pytest.mark.parametrize('make', [branches_model, python_branch_model, switch_model])
def test_lazy_init_of_a_branch_chosen_by_an_abstract_input_is_flax_rule(make):
    # Flax 0.12.9+: the branch zeros choose, with init's variables there.
    sds = jax.ShapeDtypeStruct((3,), jnp.float32)
    key = jax.random.key(0)
    assert_same_variables(make(linen_nn).lazy_init(key, sds), flax_rule(make(flax_nn), key, sds))


def unlike_branches_model(nn):
    class Net(nn.Module):
        @nn.compact
        def __call__(self, x):
            # The branches make different variables under one name: lax.cond refuses
            # that wherever it traces both (init, eval_shape, a traced lazy_init).
            return nn.cond(
                jnp.sum(x) > 0,
                lambda mdl, x: nn.Dense(2, name='branch')(x),
                lambda mdl, x: -nn.Embed(3, 2, name='branch')(jnp.argmax(x)),
                self,
                x,
            )

    return Net()


def test_lazy_init_under_disable_jit_runs_the_branch_zeros_choose():
    # Under jax.disable_jit, a cond on a concrete predicate runs one branch. Flax
    # 0.12.9+'s lazy_init evaluates the model on zeros, so there it returns the branch
    # zeros choose; linen's traced first attempt met lax.cond's structure check (a
    # TypeError) and raised.
    sds = jax.ShapeDtypeStruct((3,), jnp.float32)
    key = jax.random.key(0)
    with jax.disable_jit():
        ours = unlike_branches_model(linen_nn).lazy_init(key, sds)
        theirs = unlike_branches_model(flax_nn).init(key, jnp.zeros(sds.shape, sds.dtype))
    assert set(ours['params']['branch']) == {'embedding'}
    assert_same_variables(ours, flax_nn.meta.unbox(theirs))


def sown_model(nn):
    class Net(nn.Module):
        @nn.compact
        def __call__(self, x):
            h = nn.Dense(3)(x)
            self.sow('intermediates', 'h', h)
            return h

    return Net()


def test_lazy_init_of_intermediates_sown_from_an_abstract_input_is_flax_rule():
    sds = jax.ShapeDtypeStruct((2, 3), jnp.float32)
    key = jax.random.key(0)
    mutable = ['params', 'intermediates']
    ours = sown_model(linen_nn).lazy_init(key, sds, mutable=mutable)
    assert_same_variables(ours, flax_rule(sown_model(flax_nn), key, sds, mutable=mutable))


def test_strict_lazy_init_under_a_traced_cond_names_the_branch_variables():
    # Flax 0.12.8's answer, on request (docs/differences.md).
    sds = jax.ShapeDtypeStruct((3,), jnp.float32)
    with config.temp_flip_flag('strict_lazy_init', True):
        with pytest.raises(linen_nn.errors.LazyInitError, match='params/branch/kernel'):
            branches_model(linen_nn).lazy_init(jax.random.key(0), sds)


def keyed_state_model(nn, kind):
    """``nn.vmap`` with split ``params`` keys around a layer whose variable initialiser
    is a closure that draws a key: ``SpectralNorm``'s power-iteration vector, or a
    user's ``self.variable(..., lambda: normal(self.make_rng('params'), ...))``."""

    class Noisy(nn.Module):
        @nn.compact
        def __call__(self, x):
            noise = self.variable(
                'batch_stats', 'noise', lambda: jax.random.normal(self.make_rng('params'), (3,))
            )
            return x * self.param('w', nn.initializers.normal(1.0), (3,)) + noise.value

    class Spectral(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.SpectralNorm(nn.Dense(3))(x, update_stats=True)

    inner = {'noise': Noisy, 'spectral': Spectral}[kind]
    return nn.vmap(
        inner,
        variable_axes={'params': 0, 'batch_stats': 0},
        split_rngs={'params': True},
        in_axes=0,
        out_axes=0,
    )()


@pytest.mark.parametrize('kind', ['noise', 'spectral'])
def test_lazy_init_of_a_key_drawing_initialiser_under_vmap_is_flax_and_init(kind):
    # Fuzz finding F22: the closure's first, out-of-trace attempt drew a key before it
    # met the vmap's tracer; the retry drew the next one, so lazy_init's variables
    # (the vector, its sigma and the kernel) were not init's.
    x = jax.random.normal(jax.random.key(42), (2, 3))
    sds = jax.ShapeDtypeStruct(x.shape, x.dtype)
    key = jax.random.key(0)
    ours = keyed_state_model(linen_nn, kind).lazy_init(key, sds)
    theirs = flax_nn.meta.unbox(keyed_state_model(flax_nn, kind).lazy_init(key, sds))
    init = keyed_state_model(linen_nn, kind).init(key, x)
    assert jax.tree_util.tree_structure(ours) == jax.tree_util.tree_structure(dict(theirs))
    for a, b, c in zip(*map(jax.tree_util.tree_leaves, (ours, theirs, init))):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)


def mean_model(nn):
    class Mean(nn.Module):
        @nn.compact
        def __call__(self, x):
            mean = self.variable('stats', 'mean', lambda: 1.0 + jnp.mean(x, axis=0))
            return nn.Dense(3)(x) + mean.value[None]

    return Mean()


def test_lazy_init_of_a_variable_computed_from_an_abstract_input_is_flax_rule():
    sds = jax.ShapeDtypeStruct((2, 3), jnp.float32)
    key = jax.random.key(0)
    ours = mean_model(linen_nn).lazy_init(key, sds)
    np.testing.assert_array_equal(ours['stats']['mean'], np.ones(3, np.float32))
    assert_same_variables(ours, flax_rule(mean_model(flax_nn), key, sds))
    # Under an outer jit the zeros are traced with the rest, as in Flax. Compared with
    # Flax under the same jit: a program compiled whole may round differently from
    # the op-by-op one above (it does on a TPU).
    jitted = jax.jit(lambda k: mean_model(linen_nn).lazy_init(k, sds))(key)
    assert_same_variables(jitted, jax.jit(lambda k: flax_rule(mean_model(flax_nn), k, sds))(key))


def test_strict_lazy_init_of_a_variable_computed_from_an_abstract_input_names_it():
    sds = jax.ShapeDtypeStruct((2, 3), jnp.float32)
    with config.temp_flip_flag('strict_lazy_init', True):
        with pytest.raises(linen_nn.errors.LazyInitError, match='stats/mean'):
            mean_model(linen_nn).lazy_init(jax.random.key(0), sds)
