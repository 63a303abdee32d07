"""Module: variables, sow/perturb, init/apply/bind, method=, clone/copy/repr, JAX interop."""

from __future__ import annotations

import hashlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import linen.nn as nn
from linen.core import errors


def key_for(root, *path):
    raw = b''.join(
        p.encode() if isinstance(p, str) else p.to_bytes((p.bit_length() + 7) // 8, 'big')
        for p in path
    )
    return jax.random.fold_in(root, int.from_bytes(hashlib.sha1(raw).digest()[:4], 'big'))


def normal_init(key, shape):
    return jax.random.normal(key, shape)


class Linear(nn.Module):
    features: int

    @nn.compact
    def __call__(self, x):
        w = self.param('w', normal_init, (x.shape[-1], self.features))
        return x @ w


# ------------------------------------------------------------------ variables


def test_variable_api_inside_a_module():
    seen = {}

    class M(nn.Module):
        @nn.compact
        def __call__(self, x):
            seen['init'] = self.is_initializing()
            seen['params_mut'] = self.is_mutable_collection('params')
            seen['path'] = self.path
            v = self.variable('state', 'total', jnp.zeros, ())
            v.value = v.value + x.sum()
            self.put_variable('state', 'last', x.sum())
            seen['last'] = self.get_variable('state', 'last')
            seen['missing'] = self.get_variable('state', 'nope', 'dflt')
            seen['has'] = self.has_variable('state', 'last')
            seen['has_rng'] = self.has_rng('params')
            seen['vars'] = jax.tree_util.tree_map(jnp.shape, self.variables)
            return v.value

    x = jnp.arange(3.0)
    y, variables = M().init_with_output(jax.random.key(0), x)
    assert float(y) == 3.0
    assert seen['init'] is True and seen['params_mut'] is True and seen['path'] == ()
    assert float(seen['last']) == 3.0 and seen['missing'] == 'dflt' and seen['has']
    assert seen['has_rng'] is True
    assert seen['vars'] == {'state': {'total': (), 'last': ()}}
    y, upd = M().apply(variables, x, mutable='state')
    assert float(y) == 6.0 and float(upd['state']['total']) == 6.0
    assert seen['init'] is False and seen['params_mut'] is False and seen['has_rng'] is False


def test_path_of_nested_modules():
    paths = []

    class Leaf(nn.Module):
        @nn.compact
        def __call__(self):
            paths.append(self.path)

    class Mid(nn.Module):
        @nn.compact
        def __call__(self):
            Leaf(name='leaf')()

    class Top(nn.Module):
        @nn.compact
        def __call__(self):
            Mid()()

    Top().init(jax.random.key(0))
    assert paths == [('Mid_0', 'leaf')]


def test_make_rng_in_submodule_follows_prng_rule():
    out = {}

    class Noisy(nn.Module):
        @nn.compact
        def __call__(self):
            out['a'] = self.make_rng('noise')
            out['b'] = self.make_rng('noise')
            out['p'] = self.make_rng('missing')  # falls back to 'params'

    class Top(nn.Module):
        @nn.compact
        def __call__(self):
            Noisy()()

    pkey, nkey = jax.random.key(1), jax.random.key(2)
    Top().init({'params': pkey, 'noise': nkey})
    same = lambda a, b: np.array_equal(jax.random.key_data(a), jax.random.key_data(b))
    assert same(out['a'], key_for(nkey, 'Noisy_0', 1))
    assert same(out['b'], key_for(nkey, 'Noisy_0', 2))
    assert same(out['p'], key_for(pkey, 'Noisy_0', 1))


def test_sow_default_appends_tuple_and_custom_reduce():
    class M(nn.Module):
        @nn.compact
        def __call__(self, x):
            self.sow('intermediates', 'h', x)
            self.sow('intermediates', 'h', 2 * x)
            self.sow('stats', 'sum', x, reduce_fn=lambda a, b: a + b, init_fn=lambda: 0.0)
            self.sow('stats', 'sum', x, reduce_fn=lambda a, b: a + b, init_fn=lambda: 0.0)
            return x

    x = jnp.ones(2)
    _, variables = M().init_with_output(jax.random.key(0), x)
    # init's default mutable excludes intermediates
    assert 'intermediates' not in variables
    np.testing.assert_array_equal(variables['stats']['sum'], 2 * x)
    _, state = M().apply({}, x, mutable=['intermediates', 'stats'])
    h = state['intermediates']['h']
    assert isinstance(h, tuple) and len(h) == 2
    np.testing.assert_array_equal(h[1], 2 * x)
    # sow on an immutable collection is a no-op that returns False
    res = {}

    class N(nn.Module):
        @nn.compact
        def __call__(self):
            res['stored'] = self.sow('intermediates', 'x', 1)

    assert N().apply({}) is None
    assert res['stored'] is False


def test_perturb_gradient_equals_gradient_of_intermediate():
    class M(nn.Module):
        @nn.compact
        def __call__(self, x):
            w = self.param('w', lambda k: jnp.array([1.0, 2.0, 3.0]))
            h = x * w
            h = self.perturb('h', h)
            return jnp.sum(jnp.sin(h))

    x = jnp.array([0.5, -1.0, 2.0])
    variables = M().init(jax.random.key(0), x)
    assert set(variables) == {'params', 'perturbations'}
    np.testing.assert_array_equal(variables['perturbations']['h'], jnp.zeros(3))
    grads = jax.grad(lambda v: M().apply(v, x))(variables)
    h = x * jnp.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(grads['perturbations']['h'], jnp.cos(h), rtol=1e-6)
    np.testing.assert_allclose(grads['params']['w'], jnp.cos(h) * x, rtol=1e-6)
    # without the perturbations collection, perturb is the identity
    y = M().apply({'params': variables['params']}, x)
    np.testing.assert_allclose(y, jnp.sum(jnp.sin(h)), rtol=1e-6)


# ---------------------------------------------------------------- init / apply


class WithState(nn.Module):
    @nn.compact
    def __call__(self, x):
        s = self.variable('state', 'n', lambda: 0)
        if self.is_mutable_collection('state'):
            s.value += 1
        return Linear(2)(x)


def test_init_with_output_and_init_agree():
    x = jnp.ones((1, 3))
    y, v1 = WithState().init_with_output(jax.random.key(0), x)
    v2 = WithState().init(jax.random.key(0), x)
    np.testing.assert_array_equal(v1['params']['Linear_0']['w'], v2['params']['Linear_0']['w'])
    np.testing.assert_allclose(y, x @ v1['params']['Linear_0']['w'], rtol=1e-6)
    assert type(v1) is dict


def test_apply_returns_pair_exactly_when_mutable():
    x = jnp.ones((1, 3))
    v = WithState().init(jax.random.key(0), x)
    y = WithState().apply(v, x)
    assert isinstance(y, jax.Array)
    y, upd = WithState().apply(v, x, mutable=['state'])
    assert upd == {'state': {'n': 2}}
    y, upd = WithState().apply(v, x, mutable=True)
    assert set(upd) == {'params', 'state'}
    assert v['state']['n'] == 1  # input untouched


def test_init_mutable_argument_limits_collections():
    class P(nn.Module):
        @nn.compact
        def __call__(self, x):
            return self.perturb('h', Linear(2)(x))

    x = jnp.ones((1, 3))
    assert set(P().init(jax.random.key(0), x)) == {'params', 'perturbations'}
    assert set(P().init(jax.random.key(0), x, mutable=['params'])) == {'params'}
    with pytest.raises(errors.ScopeCollectionNotFound, match='"n" from collection "state"'):
        WithState().init(jax.random.key(0), x, mutable=['params'])


def test_lazy_init_gives_the_variables_of_init_and_takes_concrete_flags():
    class Flagged(nn.Module):
        @nn.compact
        def __call__(self, x, double: bool):
            y = Linear(5)(x)
            if double:  # a Python branch: the flag must arrive concrete
                y = Linear(5, name='second')(y)
            return y

    key = jax.random.key(0)
    sds = jax.ShapeDtypeStruct((2, 3), jnp.float32)
    lazy = Flagged().lazy_init(key, sds, True)
    eager = Flagged().init(key, jnp.ones((2, 3)), double=True)
    assert set(lazy['params']) == {'Linear_0', 'second'}
    for a, b in zip(jax.tree_util.tree_leaves(lazy), jax.tree_util.tree_leaves(eager)):
        assert isinstance(a, jax.Array)  # values, not ShapeDtypeStructs
        np.testing.assert_array_equal(a, b)
    assert set(Flagged().lazy_init(key, sds, double=False)['params']) == {'Linear_0'}


def test_free_functions_apply_init_init_with_output():
    x = jnp.ones((1, 3))
    model = Linear(2)

    def fn(module, x):
        return module(x) * 2

    y, v = nn.init_with_output(fn, model)(jax.random.key(0), x)
    v2 = nn.init(fn, model)(jax.random.key(0), x)
    np.testing.assert_array_equal(v['params']['w'], v2['params']['w'])
    out = nn.apply(fn, model)(v, x)
    np.testing.assert_allclose(out, 2 * (x @ v['params']['w']), rtol=1e-6)
    np.testing.assert_allclose(out, y, rtol=1e-6)
    out, upd = nn.apply(fn, model, mutable=True)(v, x)
    assert set(upd) == {'params'}


def test_method_as_string_bound_unbound_and_outside_function():
    class Twice(nn.Module):
        @nn.compact
        def __call__(self, x):
            return Linear(2, name='lin')(x)

        def double(self, x):
            return 2 * self(x)

    x = jnp.ones((1, 3))
    model = Twice()
    v = model.init(jax.random.key(0), x)
    want = 2 * (x @ v['params']['lin']['w'])
    for method in ('double', Twice.double, model.double, lambda m, x: m.double(x)):
        np.testing.assert_allclose(model.apply(v, x, method=method), want, rtol=1e-6)
    v2 = model.init(jax.random.key(0), x, method='double')
    np.testing.assert_array_equal(v2['params']['lin']['w'], v['params']['lin']['w'])


def test_bind_and_unbind():
    x = jnp.ones((1, 3))
    v = Linear(2).init(jax.random.key(0), x)
    bound = Linear(2).bind(v)
    np.testing.assert_allclose(bound(x), x @ v['params']['w'], rtol=1e-6)
    assert bound.variables['params']['w'].shape == (3, 2)
    module, variables = bound.unbind()
    assert module.scope is None
    np.testing.assert_array_equal(variables['params']['w'], v['params']['w'])
    np.testing.assert_allclose(module.apply(variables, x), bound(x), rtol=1e-6)


def test_bind_setup_attributes_available():
    class S(nn.Module):
        def setup(self):
            self.dense = Linear(4)
            self.scale = 3.0

        def __call__(self, x):
            return self.scale * self.dense(x)

    x = jnp.ones((1, 2))
    v = S().init(jax.random.key(0), x)
    bound = S().bind(v)
    assert bound.scale == 3.0
    np.testing.assert_allclose(bound.dense(x), x @ v['params']['dense']['w'], rtol=1e-6)


def test_bind_with_rngs_and_mutable():
    class Noisy(nn.Module):
        @nn.compact
        def __call__(self):
            return self.make_rng('noise')

    key = jax.random.key(4)
    bound = Noisy().bind({}, rngs={'noise': key})
    np.testing.assert_array_equal(
        jax.random.key_data(bound()), jax.random.key_data(key_for(key, 1))
    )


# ------------------------------------------------------------ interop with jax


def test_apply_under_jit_grad_vmap():
    model = Linear(2)
    x = jnp.arange(6.0).reshape(2, 3)
    v = model.init(jax.random.key(0), x)
    w = v['params']['w']
    np.testing.assert_allclose(jax.jit(model.apply)(v, x), x @ w, rtol=1e-6)
    g = jax.grad(lambda v: model.apply(v, x).sum())(v)
    np.testing.assert_allclose(g['params']['w'], x.sum(0)[:, None] * jnp.ones((1, 2)), rtol=1e-6)
    ys = jax.vmap(model.apply, in_axes=(None, 0))(v, x)
    np.testing.assert_allclose(ys, x @ w, rtol=1e-6)
    vs = jax.vmap(lambda k: model.init(k, x))(jax.random.split(jax.random.key(0), 3))
    assert vs['params']['w'].shape == (3, 3, 2)


# ----------------------------------------------------------- clone, copy, repr


def test_clone_and_copy():
    m = Linear(3, name='a')
    c = m.clone(features=5)
    assert c.features == 5 and c.name == 'a' and c is not m
    assert m.features == 3
    d = m.copy(features=7)
    assert d.features == 7 and d.name is None


def test_repr_shows_nested_tree():
    class Inner(nn.Module):
        features: int

    class Outer(nn.Module):
        inner: nn.Module
        rate: float = 0.5

    text = repr(Outer(Inner(3)))
    assert text.startswith('Outer(')
    assert 'inner = Inner(' in text and 'features = 3' in text and 'rate = 0.5' in text

    class Holder(nn.Module):
        def setup(self):
            self.child = Linear(2)

        def __call__(self, x):
            return self.child(x)

    bound = Holder().bind(Holder().init(jax.random.key(0), jnp.ones((1, 2))))
    assert bound.child is not None  # triggers setup
    assert 'child = Linear(' in repr(bound)


def test_frozen_attributes():
    m = Linear(3).bind({})
    with pytest.raises(
        errors.SetAttributeFrozenModuleError,
        match=r"Can't set features=.* for Module of type Linear",
    ):
        m.features = 4
    with pytest.raises(
        errors.SetAttributeFrozenModuleError, match=r"Can't set other=.* for Module of type Linear"
    ):
        m.other = 1
    # `del` is not setting: as on Flax's plain dataclass, the value goes (integration
    # test: test_flax_module_lifecycle.py); where linen keeps the binding, it refuses.
    del m.features
    assert 'features' not in m.__dict__
    for bookkeeping in ('scope', 'parent', 'name'):
        with pytest.raises(AttributeError, match=f"Can't delete '{bookkeeping}' of Module Linear"):
            delattr(m, bookkeeping)
    assert m.scope is not None and m.name is None


# ------------------------------------------------------------------ sharing


def test_module_reuse_shares_params():
    class Shared(nn.Module):
        @nn.compact
        def __call__(self, x):
            lin = Linear(3, name='shared')
            return lin(lin(x))

    x = jnp.ones((1, 3))
    v = Shared().init(jax.random.key(0), x)
    assert list(v['params']) == ['shared']
    w = v['params']['shared']['w']
    np.testing.assert_allclose(Shared().apply(v, x), x @ w @ w, rtol=1e-5)


def test_setup_submodule_called_twice_shares_params():
    class Shared(nn.Module):
        def setup(self):
            self.lin = Linear(3)

        def __call__(self, x):
            return self.lin(self.lin(x))

    x = jnp.ones((1, 3))
    v = Shared().init(jax.random.key(0), x)
    w = v['params']['lin']['w']
    np.testing.assert_allclose(Shared().apply(v, x), x @ w @ w, rtol=1e-5)


def test_modules_passed_as_attributes_are_adopted():
    class Seq(nn.Module):
        layers: tuple

        def __call__(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    x = jnp.ones((1, 3))
    model = Seq((Linear(4), Linear(2)))
    v = model.init(jax.random.key(0), x)
    assert list(v['params']) == ['layers_0', 'layers_1']
    p = v['params']
    np.testing.assert_allclose(
        model.apply(v, x), x @ p['layers_0']['w'] @ p['layers_1']['w'], rtol=1e-5
    )
    np.testing.assert_array_equal(
        p['layers_1']['w'], normal_init(key_for(jax.random.key(0), 'layers_1', 1), (4, 2))
    )


def test_module_attribute_shared_between_parents():
    class Wrapper(nn.Module):
        inner: nn.Module

        def __call__(self, x):
            return self.inner(x)

    class Top(nn.Module):
        @nn.compact
        def __call__(self, x):
            lin = Linear(3, name='lin')
            a = Wrapper(lin, name='a')(x)
            return a + lin(x)

    x = jnp.ones((1, 3))
    v = Top().init(jax.random.key(0), x)
    assert list(v['params']) == ['lin']


def test_share_scope():
    class Inner(nn.Module):
        @nn.compact
        def __call__(self, x):
            return Linear(2, name='proj')(x)

    class Outer(nn.Module):
        def setup(self):
            self.inner = Inner()
            nn.share_scope(self, self.inner)

        def __call__(self, x):
            return self.inner(x)

    x = jnp.ones((1, 3))
    v = Outer().init(jax.random.key(0), x)
    assert list(v['params']) == ['proj']
    with pytest.raises(errors.CallShareScopeOnUnboundModuleError, match='unbound'):
        nn.share_scope(Inner(), Inner())


def test_merge_param():
    assert nn.merge_param('rate', 0.5, None) == 0.5
    assert nn.merge_param('rate', None, 0.1) == 0.1
    with pytest.raises(ValueError) as both:
        nn.merge_param('rate', 0.5, 0.1)
    assert str(both.value) == (
        'Parameter "rate" was passed to the constructor and at call time. Should be passed just once.'
    )
    with pytest.raises(errors.MergeParamError) as neither:
        nn.merge_param('rate', None, None)
    assert (
        str(neither.value) == 'Parameter "rate" must be passed to the constructor or at call time.'
    )


def test_bound_tree_is_freed_with_its_binding_without_gc():
    # A child holds its parent weakly (as in Flax) and the adoption cache lives
    # with the binding: after apply, nothing keeps the bound modules alive, so no
    # traced value can leak through them even with the garbage collector off.
    import gc
    import weakref

    seen = []

    class Probe(nn.Module):
        @nn.compact
        def __call__(self, x):
            seen.append(weakref.ref(self))
            return x

    class Holder(nn.Module):
        layers: tuple

        def setup(self):
            self.extra = Probe()

        def __call__(self, x):
            for layer in self.layers:
                x = layer(x)
            seen.append(weakref.ref(self))
            return self.extra(x)

    model = Holder(layers=(Linear(2), Probe()))
    x = jnp.ones((1, 2))
    variables = model.init(jax.random.key(0), x)
    gc.disable()
    try:
        seen.clear()
        model.apply(variables, x)
        assert len(seen) == 3
        assert [ref() for ref in seen] == [None, None, None]
        assert model.layers[1].parent is None  # the given module stays unattached
    finally:
        gc.enable()


def test_parent_reads_the_module_and_pickles_strongly():
    import pickle

    class Holder(nn.Module):
        def setup(self):
            self.child = Linear(2)

        def __call__(self, x):
            return self.child(x)

    x = jnp.ones((1, 2))
    bound = Holder().bind(Holder().init(jax.random.key(0), x))
    child = bound.child
    assert child.parent is bound
    assert type(child.__dict__['parent']) is weakref_type()
    copy = pickle.loads(pickle.dumps(Linear(3)))
    assert copy.features == 3 and copy.parent is None


def weakref_type():
    import weakref

    return weakref.ReferenceType
