"""Scope: variables, collections, mutability, naming, init/apply/bind."""

from __future__ import annotations

import hashlib
import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from linen.core import DenyList, FrozenDict, Scope, apply, bind, config, errors, init, lazy_init


def zeros(key, shape):
    return jnp.zeros(shape)


def fold(key, raw: bytes):
    return jax.random.fold_in(key, int.from_bytes(hashlib.sha1(raw).digest()[:4], 'big'))


def dense(scope, x, features):
    kernel = scope.param('kernel', jax.random.normal, (x.shape[-1], features))
    bias = scope.param('bias', zeros, (features,))
    return x @ kernel + bias[None]


def mlp(scope, x):
    h = scope.child(dense, 'hidden')(x, 3)
    return scope.child(dense, 'out')(jnp.tanh(h), 2)


def test_init_builds_tree_and_values_follow_prng_rule():
    key = jax.random.key(0)
    x = jnp.ones((4, 5))
    y, variables = init(mlp)(key, x)
    assert jax.tree_util.tree_map(jnp.shape, variables) == {
        'params': {
            'hidden': {'kernel': (5, 3), 'bias': (3,)},
            'out': {'kernel': (3, 2), 'bias': (2,)},
        }
    }
    k_hidden = jax.random.normal(fold(key, b'hidden\x01'), (5, 3))
    k_out = jax.random.normal(fold(key, b'out\x01'), (3, 2))
    np.testing.assert_array_equal(variables['params']['hidden']['kernel'], k_hidden)
    np.testing.assert_array_equal(variables['params']['out']['kernel'], k_out)
    np.testing.assert_allclose(y, jnp.tanh(x @ k_hidden) @ k_out, rtol=1e-6)
    # apply gives the same output, and returns only y when nothing is mutable
    y2 = apply(mlp)(variables, x)
    np.testing.assert_allclose(y2, y, rtol=1e-6)


def test_returned_variables_are_plain_dicts_and_input_not_mutated():
    def counter(scope):
        v = scope.variable('state', 'n', lambda: jnp.zeros((), jnp.int32))
        v.value = v.value + 1
        return v.value

    _, variables = init(counter)(jax.random.key(0))
    assert type(variables) is dict and type(variables['state']) is dict
    assert int(variables['state']['n']) == 1
    frozen = FrozenDict(variables)
    nested = {'state': {'n': jnp.asarray(1)}}
    for given in (frozen, nested):
        y, updated = apply(counter, mutable='state')(
            given,
        )
        assert int(y) == 2 and int(updated['state']['n']) == 2
        assert type(updated) is dict and type(updated['state']) is dict
        assert int(given['state']['n']) == 1


def test_apply_without_mutable_returns_only_output():
    out = apply(lambda scope: 3)({'params': {}})
    assert out == 3
    out = apply(lambda scope: 3, mutable=['params'])({'params': {}})
    assert out == (3, {'params': {}})


def test_writing_immutable_collection_raises():
    def fn(scope):
        scope.push('sub').put_variable('batch_stats', 'mean', 1.0)

    with pytest.raises(
        errors.ModifyScopeVariableError, match=r'"mean" in "/sub".*"batch_stats" is immutable'
    ):
        apply(fn, mutable='params')({'batch_stats': {'sub': {'mean': 0.0}}})


def test_variable_value_write_on_immutable_raises():
    def fn(scope):
        v = scope.variable('counter', 'n', lambda: 0)
        assert not v.is_mutable()
        v.value = 5

    with pytest.raises(errors.ModifyScopeVariableError, match='mutable=\\["counter"\\]'):
        apply(fn)({'counter': {'n': 0}})


def test_param_shape_mismatch_raises():
    x = jnp.ones((2, 5))
    variables = init(mlp)(jax.random.key(0), x)[1]
    with pytest.raises(
        errors.ScopeParamShapeError,
        match=r'"kernel" in "/hidden".*expected to generate shape \(4, 3\).*has shape \(5, 3\)',
    ):
        apply(mlp)(variables, jnp.ones((2, 4)))


def test_param_shape_check_can_be_switched_off_by_flag():
    def fn(scope):
        return scope.param('w', zeros, (3,))

    out = apply(fn, flags={'shape_check': False})({'params': {'w': jnp.ones((2,))}})
    assert out.shape == (2,)


def test_param_shape_check_is_cached_across_calls():
    # The second apply with the same initializer arguments must not re-trace it.
    calls = []

    def counting_init(key, shape):
        calls.append(shape)
        return jnp.zeros(shape)

    def fn(scope):
        return scope.param('w', counting_init, (7,))

    variables = {'params': {'w': jnp.ones((7,))}}
    apply(fn)(variables)
    n = len(calls)
    apply(fn)(variables)
    apply(fn)(variables)
    assert len(calls) == n


def test_missing_param_raises_not_found():
    def fn(scope):
        scope.param('present', zeros, ())
        return scope.param('absent', zeros, ())

    with pytest.raises(errors.ScopeParamNotFoundError, match=r'"absent" in scope "/"'):
        apply(fn)({'params': {'present': jnp.zeros(())}})


def test_missing_param_below_a_path_the_variables_lack_is_not_found():
    # The collection exists (at another path): Flax reports the parameter, not the collection.
    def fn(scope):
        return scope.push('b').param('kernel', zeros, ())

    with pytest.raises(errors.ScopeParamNotFoundError, match=r'"kernel" in scope "/b"'):
        apply(fn)({'params': {'a': {'kernel': jnp.zeros(())}}})
    with pytest.raises(errors.ScopeParamNotFoundError, match=r'"kernel" in scope "/b"'):
        apply(fn)({'params': {'a': {}, 'b': {}}})


def test_missing_collection_raises():
    def fn(scope):
        return scope.push('bn').variable('batch_stats', 'mean', lambda: 0.0)

    with pytest.raises(
        errors.ScopeCollectionNotFound,
        match=r'"mean" from collection "batch_stats" in "/bn"',
    ):
        apply(fn)({'params': {}})
    with pytest.raises(errors.ScopeCollectionNotFound, match='collection "params"'):
        apply(lambda scope: scope.param('w', zeros, ()))({'other': {}})


def test_missing_variable_in_present_collection_raises():
    def fn(scope):
        return scope.variable('batch_stats', 'var', lambda: 0.0)

    with pytest.raises(errors.ScopeVariableNotFoundError, match='"var" for collection'):
        apply(fn)({'batch_stats': {'mean': 0.0}})
    with pytest.raises(errors.ScopeVariableNotFoundError, match='No Variable named "x"'):
        bind({'a': {}}).get_variable('a', 'x')


@pytest.mark.parametrize('bad', [jnp.ones(3), [1, 2], 3])
def test_variables_not_a_mapping(bad):
    with pytest.raises(errors.ApplyScopeInvalidVariablesTypeError, match='mapping of collections'):
        apply(lambda scope: None)(bad)


def test_variables_values_not_collections():
    # Flax's class (a TypeError) for a collection that is no mapping.
    with pytest.raises(errors.ApplyScopeInvalidVariablesTypeError, match=r"\{'params': params\}"):
        apply(lambda scope: None)({'kernel': jnp.ones(3)})


@pytest.mark.parametrize(
    'variables',
    [{'params': {'params': {'w': jnp.ones(3)}}}, {'params': {'params': {}, 'Dense_0': {}}}],
)
def test_variables_with_an_extra_params_layer(variables):
    with pytest.raises(
        errors.ApplyScopeInvalidVariablesStructureError, match='but got a dict with an extra params'
    ):
        apply(lambda scope: None)(variables)
    with pytest.raises(errors.ApplyScopeInvalidVariablesStructureError):
        bind(variables)


def test_variable_get_put_has():
    def fn(scope):
        assert not scope.has_variable('state', 'a')
        scope.put_variable('state', 'a', 1)
        assert scope.has_variable('state', 'a')
        assert scope.get_variable('state', 'a') == 1
        assert scope.get_variable('state', 'b', 'default') == 'default'
        child = scope.push('c')
        child.put_variable('state', 'b', 2)
        return scope.variables(), child.variables(), scope.collections()

    (root_vars, child_vars, cols), updated = apply(fn, mutable=True)({})
    assert root_vars == {'state': {'a': 1, 'c': {'b': 2}}}
    assert child_vars == {'state': {'b': 2}}
    assert cols == ('state',)
    assert updated == {'state': {'a': 1, 'c': {'b': 2}}}


def test_mutable_filters_select_returned_collections():
    def fn(scope):
        scope.put_variable('a', 'x', 1)
        return scope.get_variable('b', 'x')

    y, upd = apply(fn, mutable=DenyList('b'))({'b': {'x': 0}})
    assert y == 0 and upd == {'a': {'x': 1}}
    with pytest.raises(errors.ModifyScopeVariableError, match='collection "a"'):
        apply(fn, mutable=['b'])({'b': {'x': 0}})


def test_is_mutable_collection_and_path():
    scope = bind({'params': {}}, mutable=['cache'])
    assert scope.is_mutable_collection('cache')
    assert not scope.is_mutable_collection('params')
    child = scope.push('a').push('b')
    assert child.path == ('a', 'b')
    # Flax's spelling, with the root as '/'
    assert (child.path_text, scope.path_text) == ('/a/b', '/')
    assert child.root is scope
    assert child.mutable == ['cache']


def test_reserve_and_default_name():
    scope = bind({})
    scope.reserve('Dense_0')
    assert scope.default_name('Dense_') == 'Dense_1'
    # Flax's core raises ValueError with this text; linen's class is one (and a NameInUseError)
    with pytest.raises(ValueError, match='^Duplicate use of scope name: "Dense_0" in scope "/"'):
        scope.reserve('Dense_0')
    # a variable name may repeat across collections, not within one
    scope.reserve('w', 'params')
    scope.reserve('w', 'cache')
    with pytest.raises(errors.DuplicateScopeNameError, match='"w".*collection "params"'):
        scope.reserve('w', 'params')
    with pytest.raises(TypeError, match='must be str'):
        scope.reserve(3)


def test_push_same_name_twice_raises_unless_reuse():
    scope = bind({})
    scope.push('a')
    with pytest.raises(errors.NameInUseError, match='Duplicate use of scope name: "a"'):
        scope.push('a')
    inner = scope.push('a', reuse=True)
    inner.push('b')
    with pytest.raises(ValueError, match='in scope "/a", claimed again for a child scope'):
        inner.push('b')
    assert scope.push('a', reuse=True).path == ('a',)
    assert scope.push(prefix='auto_').name == 'auto_0'


def test_rewound_allows_names_again_and_keeps_rng_counters():
    key = jax.random.key(1)
    scope = bind({}, rngs=key, mutable=True)
    scope.reserve('x')
    k1 = scope.make_rng()
    again = scope.rewound()
    again.reserve('x')  # no error
    k2 = again.make_rng()
    np.testing.assert_array_equal(jax.random.key_data(k1), jax.random.key_data(fold(key, b'\x01')))
    np.testing.assert_array_equal(jax.random.key_data(k2), jax.random.key_data(fold(key, b'\x02')))
    k3 = scope.rewound(rewind_rngs=True).make_rng()
    np.testing.assert_array_equal(jax.random.key_data(k3), jax.random.key_data(fold(key, b'\x01')))


def test_child_runs_under_named_scope():
    def inner(scope, x):
        return jnp.sin(x)

    def outer(scope, x):
        return scope.child(inner, 'block')(x)

    text = (
        jax.jit(lambda x: init(outer)(jax.random.key(0), x)[0])
        .lower(jnp.ones(3))
        .as_text(debug_info=True)
    )
    assert 'block' in text
    text_off = (
        jax.jit(
            lambda x: init(lambda s, x: s.child(inner, 'blk2', named_call=False)(x))(
                jax.random.key(0), x
            )[0]
        )
        .lower(jnp.ones(3))
        .as_text(debug_info=True)
    )
    assert 'blk2' not in text_off


def test_child_default_name_from_function():
    def block(scope):
        return scope.path

    def fn(scope):
        return scope.child(block)(), scope.child(block)()

    assert apply(fn)({}) == (('block_0',), ('block_1',))


def test_scope_invalid_after_apply():
    kept = {}

    def fn(scope):
        kept['scope'] = scope

    apply(fn, mutable=True)({})
    with pytest.raises(errors.InvalidScopeError, match='no longer valid'):
        kept['scope'].put_variable('a', 'b', 1)
    with pytest.raises(errors.InvalidScopeError):
        kept['scope'].push('x')


def test_bind_copies_mutable_collections():
    src = {'state': {'n': 1}, 'params': {'w': 2}}
    scope = bind(src, mutable='state')
    scope.put_variable('state', 'n', 5)
    assert src['state']['n'] == 1
    assert scope.get_variable('state', 'n') == 5
    assert scope.mutable_variables() == {'state': {'n': 5}}


def test_lazy_init_gives_the_variables_of_init():
    key = jax.random.key(0)
    lazy = lazy_init(mlp)(key, jax.ShapeDtypeStruct((4, 5), jnp.float32))
    eager = init(mlp)(key, jnp.ones((4, 5)))[1]
    assert jax.tree_util.tree_structure(lazy) == jax.tree_util.tree_structure(eager)
    for a, b in zip(jax.tree_util.tree_leaves(lazy), jax.tree_util.tree_leaves(eager)):
        assert isinstance(a, jax.Array)
        np.testing.assert_array_equal(a, b)


@pytest.fixture
def strict_lazy_init():
    config.update('linen_strict_lazy_init', True)
    try:
        yield
    finally:
        config.update('linen_strict_lazy_init', False)


def keeps_input(scope, x):
    scope.variable('cache', 'x', lambda: x * 2)
    return x


def reads_input(scope, x):
    w = scope.param('w', lambda k: jax.random.normal(k, (2,)))
    scope.param('p', lambda k: x + w)
    return x


SDS = jax.ShapeDtypeStruct((2,), jnp.float32)


def test_lazy_init_computes_a_variable_that_needs_an_abstract_input_from_zeros():
    # Flax's rule since 0.12.9: the abstract input counts as zeros.
    out = lazy_init(keeps_input)(jax.random.key(0), SDS)
    np.testing.assert_array_equal(out['cache']['x'], np.zeros(2, np.float32))
    lazy = lazy_init(reads_input)(jax.random.key(0), SDS)
    w = jax.random.normal(fold(jax.random.key(0), b'\x01'), (2,))  # the root's first draw
    np.testing.assert_array_equal(lazy['params']['w'], w)
    np.testing.assert_array_equal(lazy['params']['p'], w)  # zeros + w
    # A concrete input is used as it is.
    out = lazy_init(keeps_input)(jax.random.key(0), jnp.array([1.0, 2.0]))
    np.testing.assert_array_equal(out['cache']['x'], [2.0, 4.0])


def test_lazy_init_lets_python_read_an_abstract_input_as_zeros():
    def branches(scope, x):
        if jnp.sum(x) > 0:  # a Python branch on the input's value
            scope.param('positive', lambda k: jnp.ones(3))
        else:
            scope.param('not_positive', lambda k: jnp.full(2, 7.0))
        return x

    out = lazy_init(branches)(jax.random.key(0), SDS)
    assert list(out['params']) == ['not_positive']
    np.testing.assert_array_equal(out['params']['not_positive'], [7.0, 7.0])


def test_lazy_init_runs_again_on_zeros_only_for_an_abstract_input():
    calls = []

    def branches(scope, x):
        calls.append(x)
        return scope.param('p', lambda k: jnp.ones(2)) if jnp.sum(x) > 0 else x

    # An input traced by an outer jit, read by Python: JAX's error, from the one run.
    with pytest.raises(jax.errors.TracerBoolConversionError):
        jax.jit(lambda x: lazy_init(branches)(jax.random.key(0), x))(jnp.ones(2))
    assert len(calls) == 1
    calls.clear()
    # An abstract one: traced first, then run on the zeros.
    assert lazy_init(branches)(jax.random.key(0), SDS) == {}
    assert len(calls) == 2
    np.testing.assert_array_equal(calls[1], np.zeros(2, np.float32))


def test_lazy_init_under_jit_computes_from_zeros_inside_the_trace():
    out = jax.jit(lambda k: lazy_init(reads_input)(k, SDS))(jax.random.key(0))
    eager = lazy_init(reads_input)(jax.random.key(0), SDS)
    np.testing.assert_array_equal(out['params']['p'], eager['params']['p'])
    np.testing.assert_array_equal(out['params']['p'], out['params']['w'])


@pytest.mark.usefixtures('strict_lazy_init')
def test_strict_lazy_init_names_the_variable_that_needs_an_abstract_input():
    with pytest.raises(errors.LazyInitError, match='cache/x') as info:
        lazy_init(keeps_input)(jax.random.key(0), SDS)
    again = pickle.loads(pickle.dumps(info.value))
    assert str(again) == str(info.value)
    # A concrete input is fine: the cache gets its value.
    out = lazy_init(keeps_input)(jax.random.key(0), jnp.array([1.0, 2.0]))
    np.testing.assert_array_equal(out['cache']['x'], [2.0, 4.0])


@pytest.mark.usefixtures('strict_lazy_init')
def test_strict_lazy_init_names_a_param_reading_an_abstract_input_and_a_concrete_one_works():
    # Initialisers run outside the shape trace when they can; one that reads the
    # abstract input cannot, runs again inside it, and its parameter is named.
    with pytest.raises(errors.LazyInitError, match='params/p'):
        lazy_init(reads_input)(jax.random.key(0), SDS)
    x = jnp.array([1.0, 2.0])
    lazy = lazy_init(reads_input)(jax.random.key(0), x)
    eager = init(reads_input)(jax.random.key(0), x)[1]
    for name in ('w', 'p'):
        np.testing.assert_array_equal(lazy['params'][name], eager['params'][name])
    np.testing.assert_array_equal(lazy['params']['p'], x + eager['params']['w'])


@pytest.mark.usefixtures('strict_lazy_init')
def test_strict_lazy_init_lets_jax_refuse_python_reading_an_abstract_input():
    def branches(scope, x):
        return x if jnp.sum(x) > 0 else -x

    with pytest.raises(jax.errors.TracerBoolConversionError):
        lazy_init(branches)(jax.random.key(0), SDS)


def test_apply_under_jit_grad_vmap():
    x = jnp.arange(10.0).reshape(2, 5)
    variables = init(mlp)(jax.random.key(0), x)[1]
    f = apply(mlp)
    np.testing.assert_allclose(jax.jit(f)(variables, x), f(variables, x), rtol=1e-6)
    g = jax.grad(lambda v: f(v, x).sum())(variables)
    p = variables['params']
    h = jnp.tanh(x @ p['hidden']['kernel'] + p['hidden']['bias'][None])
    # d/d(out.bias) of sum(y) is the number of rows for each output
    np.testing.assert_allclose(g['params']['out']['bias'], jnp.full((2,), 2.0))
    np.testing.assert_allclose(
        g['params']['out']['kernel'], h.sum(0)[:, None] * jnp.ones((1, 2)), rtol=1e-5
    )
    ys = jax.vmap(f, in_axes=(None, 0))(variables, x[:, None, :])
    np.testing.assert_allclose(ys[:, 0, :], f(variables, x), rtol=1e-6)


def test_scope_repr_and_root():
    scope = bind({})
    assert repr(scope.push('a')) == "Scope(path='a')"
    assert isinstance(scope, Scope)


def test_scope_takes_flax_constructor_arguments():
    import jax.numpy as jnp

    from linen.core import Scope, errors

    key = jax.random.key(0)
    scope = Scope({}, rngs={'params': key}, name=None, mutable=True, path=('a', 'b'))
    w = scope.param('w', jax.nn.initializers.ones, (2,))
    assert scope.path == ('a', 'b')
    assert jnp.array_equal(scope.variables()['params']['w'], w)
    frozen = Scope({'params': {'w': w}}, mutable=False)
    with pytest.raises(errors.ModifyScopeVariableError):
        frozen.put_variable('params', 'w', w)
    with pytest.raises(errors.ApplyScopeInvalidVariablesTypeError):
        Scope([1, 2])


def test_push_with_a_function_binds_a_child_scope():
    from linen.core import init

    def leaf(scope, x, scale):
        return x * scope.param('s', jax.nn.initializers.ones, ())

    def model(scope, x):
        a = scope.push(leaf, 'first', scale=1)(x)
        b = scope.push(leaf, prefix='leaf_', named_call=False, scale=2)(x)
        c = scope.push(name='plain')
        return a + b, c.path

    (y, path), variables = init(model)(jax.random.key(0), 1.0)
    assert set(variables['params']) == {'first', 'leaf_0'}
    assert path == ('plain',)
    assert y == 2.0


def test_binding_cache_is_shared_by_the_binding_and_dropped_with_it():
    root = bind({'params': {}})
    child = root.push('a')
    root.binding_cache['k'] = 'v'
    assert child.binding_cache == {'k': 'v'}
    assert bind({}).binding_cache == {}  # another binding, another cache
    root.invalidate()
    assert child.binding_cache == {}  # nothing kept there outlives the binding


def test_parent_replacing_a_child_subtree_is_seen_below():
    root = Scope({}, mutable='state')
    child = root.push('a')
    child.put_variable('state', 'x', 0.0)
    assert child.get_variable('state', 'x') == 0.0  # (now cached in the child)
    root.put_variable('state', 'a', {'x': 1.0})
    assert child.get_variable('state', 'x') == 1.0
    assert child.variables()['state'] == {'x': 1.0}
    child.put_variable('state', 'y', 2.0)
    assert root.variables()['state']['a'] == {'x': 1.0, 'y': 2.0}
