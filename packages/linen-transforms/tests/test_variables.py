"""map_variables, fold_rngs and add_metadata_axis."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import linen.nn as nn
from linen.core import errors


class Linear(nn.Module):
    features: int

    @nn.compact
    def __call__(self, x):
        w = self.param('w', lambda k, s: jax.random.normal(k, s), (x.shape[-1], self.features))
        return x @ w


class CausalDense(nn.Module):
    features: int

    def apply_mask(self, variables):
        if self.is_initializing():
            return variables
        return jax.tree_util.tree_map(jnp.triu, variables)

    def setup(self):
        masked = nn.map_variables(Linear, 'params', self.apply_mask, init=self.is_initializing())
        self.dense = masked(self.features)

    def __call__(self, x):
        return self.dense(x)


def test_map_variables_masks_what_the_target_sees():
    x = jax.random.normal(jax.random.key(1), (2, 3))
    variables = CausalDense(3).init(jax.random.key(0), x)
    w = variables['params']['dense']['w']
    assert w.shape == (3, 3) and bool(jnp.any(jnp.tril(w, -1) != 0))  # stored unmasked
    np.testing.assert_allclose(CausalDense(3).apply(variables, x), x @ jnp.triu(w), rtol=1e-6)


def test_map_variables_mutable_writes_go_through_trans_out_fn():
    class Acc(nn.Module):
        @nn.compact
        def __call__(self, x):
            s = self.variable('state', 'sum', jnp.zeros, x.shape)
            s.value = s.value + x
            return s.value

    # state is stored halved: the target sees twice the stored value
    Mapped = nn.map_variables(
        Acc,
        'state',
        trans_in_fn=lambda v: jax.tree_util.tree_map(lambda a: a * 2, v),
        trans_out_fn=lambda v: jax.tree_util.tree_map(lambda a: a / 2, v),
        mutable=True,
    )
    variables = {'state': {'sum': jnp.array([1.0, 1.0])}}
    y, upd = Mapped().apply(variables, jnp.array([1.0, 3.0]), mutable='state')
    np.testing.assert_allclose(y, [3.0, 5.0])  # 2 * stored + x
    np.testing.assert_allclose(upd['state']['sum'], [1.5, 2.5])


def test_map_variables_not_mutable_keeps_the_mapped_collection_read_only():
    Mapped = nn.map_variables(Linear, 'params', lambda v: jax.tree_util.tree_map(jnp.abs, v))
    x = jnp.array([[1.0, -1.0]])
    variables = Linear(2).init(jax.random.key(0), x)
    w = variables['params']['w']
    np.testing.assert_allclose(Mapped(2).apply(variables, x), x @ jnp.abs(w), rtol=1e-6)


class Noise(nn.Module):
    @nn.compact
    def __call__(self, x):
        return x + jax.random.uniform(self.make_rng('dropout'), x.shape)


def test_fold_rngs_draws_one_key_per_stream_from_the_caller():
    class Outer(nn.Module):
        fold: bool

        @nn.compact
        def __call__(self, x):
            cls = nn.fold_rngs(Noise) if self.fold else Noise
            m = cls(name='noise')
            return m(x), m(x)

    rngs = {'dropout': jax.random.key(3)}
    x = jnp.zeros((4,))
    a, b = Outer(fold=True).apply({}, x, rngs=rngs)
    a2, b2 = Outer(fold=True).apply({}, x, rngs=rngs)
    np.testing.assert_array_equal(a, a2)  # deterministic
    assert not bool(jnp.array_equal(a, b))  # each call consumes a fresh outer key
    c, _ = Outer(fold=False).apply({}, x, rngs=rngs)
    assert not bool(jnp.array_equal(a, c))  # the inner keys are derived differently


def test_add_metadata_axis_names_the_new_axis_in_boxes():
    class PLinear(nn.Module):
        @nn.compact
        def __call__(self, x):
            init = nn.with_partitioning(nn.initializers.ones, (None, 'model'))
            return x @ self.param('w', init, (x.shape[-1], 2))

    Annotated = nn.add_metadata_axis(
        PLinear, variable_axes={'params': 0}, metadata_params={nn.PARTITION_NAME: 'layers'}
    )
    x = jnp.ones((1, 3))
    variables = Annotated().init(jax.random.key(0), x)
    box = variables['params']['w']
    assert isinstance(box, nn.Partitioned)
    assert box.names == ('layers', None, 'model')
    assert box.value.shape == (3, 2)  # only the metadata changes
    np.testing.assert_allclose(Annotated().apply(variables, x), jnp.full((1, 2), 3.0))


def test_map_variables_init_true_sees_only_the_mapped_collections_made_mutable():
    """``init=True`` in an apply: the first run's result reaches the real run only for
    mapped collections the caller made mutable (Flax's rule); a read-only one is empty."""
    doubled = nn.map_variables(
        nn.Dense,
        'params',
        trans_in_fn=lambda v: jax.tree_util.tree_map(lambda a: 2 * a, v),
        init=True,
    )(2)
    x = jnp.array([1.0, 2.0, 3.0])
    variables = doubled.init(jax.random.key(0), x)
    p = variables['params']
    want = x @ (2 * p['kernel']) + 2 * p['bias']
    np.testing.assert_allclose(doubled.apply(variables, x), want, rtol=1e-6)
    y, _ = doubled.apply(variables, x, mutable=['params'])
    np.testing.assert_allclose(y, want, rtol=1e-6)
    with pytest.raises(errors.ScopeCollectionNotFound, match='"kernel" from collection "params"'):
        doubled.apply(variables, x, mutable=['batch_stats'])


def test_map_variables_lifts_a_field_submodule_made_by_the_caller():
    class Holder(nn.Module):
        sub: nn.Module

        def __call__(self, x):
            return self.sub(x)

    class Parent(nn.Module):
        @nn.compact
        def __call__(self, x):
            tripled = nn.map_variables(
                Holder,
                'params',
                trans_in_fn=lambda v: jax.tree_util.tree_map(lambda a: 3 * a, v),
                init=self.is_initializing(),
            )
            return tripled(sub=nn.Dense(2))(x)

    x = jnp.array([[1.0, -1.0, 0.5]])
    variables = Parent().init(jax.random.key(0), x)
    p = variables['params']['Dense_0']
    np.testing.assert_allclose(
        Parent().apply(variables, x), x @ (3 * p['kernel']) + 3 * p['bias'][None], rtol=1e-6
    )


class Counter(nn.Module):
    @nn.compact
    def __call__(self, x):
        count = self.variable('state', 'n', jnp.zeros, ())
        count.value += 1
        return x + count.value


def test_errors_inside_a_lifted_scope_name_the_transforms_filter():
    """A collection the transform hides, or keeps read-only, is named as the transform's
    doing (the hint to pass it to `apply` alone would not help there)."""
    x = jnp.ones(2)
    state = {'state': {'n': jnp.zeros(())}}
    hidden = nn.map_variables(Counter, 'params', variables='params')
    with pytest.raises(errors.ScopeCollectionNotFound, match='`variables=` filter') as hid:
        hidden().apply(state, x, mutable=False)
    assert 'collection "state"' in str(hid.value)
    read_only = nn.map_variables(Counter, 'state')  # mapped, not mutable=True
    with pytest.raises(errors.ModifyScopeVariableError, match='must let it change') as ro:
        read_only().apply(state, x, mutable=['state'])
    assert 'collection "state" is immutable' in str(ro.value)
    # Outside a lifted transform, neither hint.
    with pytest.raises(errors.ScopeCollectionNotFound) as plain:
        Counter().apply({}, x)
    assert 'filter' not in str(plain.value)
    with pytest.raises(errors.ModifyScopeVariableError) as plain_write:
        Counter().apply(state, x)
    assert 'lifted' not in str(plain_write.value)
