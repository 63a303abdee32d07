"""The functional core against flax.core as an oracle: Scope built with Flax's
arguments, LazyRng, the filter algebra, push/child, and the config flags that
change the core's results.

Each program is written once over a ``core`` namespace and run with Flax's and
linen's; variables and outputs must agree exactly.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip('flax')
pytestmark = pytest.mark.flax

import flax  # noqa: E402
import flax.core as flax_core  # noqa: E402
import flax.core.scope as flax_scope  # noqa: E402

import linen.core as linen_core  # noqa: E402
import linen.core.scope as linen_scope  # noqa: E402
from linen.core import config as linen_config  # noqa: E402

CORES = [(flax_core, flax.config), (linen_core, linen_config)]


def dense(scope, x, features=3):
    kernel = scope.param('kernel', jax.nn.initializers.lecun_normal(), (x.shape[-1], features))
    bias = scope.param('bias', jax.nn.initializers.normal(), (features,))
    return x @ kernel + bias.reshape((1,) * (x.ndim - 1) + bias.shape)


def mlp(scope, x):
    h = scope.child(dense, 'hidden')(x, 4)
    return scope.child(dense, name='out', features=2)(jax.nn.relu(h))


def mlp_with_push(scope, x):
    # A spelling linen accepts besides Flax's: push(fn, ...) is child(fn, ...).
    h = scope.push(dense, 'hidden')(x, 4)
    return scope.push(dense, name='out', features=2)(jax.nn.relu(h))


def _same_tree(a, b):
    a, b = jax.tree_util.tree_flatten_with_path(a), jax.tree_util.tree_flatten_with_path(b)
    assert [str(p) for p, _ in a[0]] == [str(p) for p, _ in b[0]]
    for (_, x), (_, y) in zip(a[0], b[0]):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_scope_built_with_flax_arguments():
    x = jnp.ones((2, 5))
    key = jax.random.key(1)

    def run(core):
        scope = core.Scope({}, rngs={'params': key}, name=None, mutable=True, path=())
        y = dense(scope, x)
        return y, scope.variables()

    (yf, vf), (yl, vl) = run(flax_core), run(linen_core)
    _same_tree(vf, vl)
    np.testing.assert_array_equal(yf, yl)

    def frozen(core, variables):
        scope = core.Scope(variables, rngs=None, mutable=False, path=('model',))
        return dense(scope, x)

    np.testing.assert_array_equal(frozen(flax_core, vf), frozen(linen_core, vl))


def test_scope_with_lazy_rng_streams():
    key = jax.random.key(3)
    x = jnp.ones((1, 2))

    def run(core, scope_mod):
        rng = scope_mod.LazyRng.create(key, 'a', 7)
        scope = core.Scope({}, rngs={'params': rng}, mutable=True)
        dense(scope, x)
        keys = rng.as_jax_rng(), rng.clear_suffix().as_jax_rng()
        return scope.variables(), [jax.random.key_data(k) for k in keys]

    _same_tree(run(flax_core, flax_scope), run(linen_core, linen_scope))


def test_push_with_a_function_is_child():
    key = jax.random.key(0)
    x = jnp.ones((2, 3))
    yf, vf = flax_core.init(mlp)(key, x)
    yl, vl = linen_core.init(mlp_with_push)(key, x)
    _same_tree(vf, vl)
    np.testing.assert_array_equal(yf, yl)


FILTERS = [True, False, 'params', ['params', 'stats'], ('cache',), flax_core.DenyList('params')]


def _to_linen(f):
    if isinstance(f, flax_core.DenyList):
        return linen_core.DenyList(_to_linen(f.deny))
    return f


def _matches(scope_mod, f, names=('params', 'stats', 'cache', 'other')):
    return tuple(scope_mod.in_filter(f, n) for n in names)


@pytest.mark.parametrize('op', ['union_filters', 'intersect_filters', 'subtract_filters'])
@pytest.mark.parametrize('a', FILTERS)
@pytest.mark.parametrize('b', FILTERS)
def test_filter_algebra(op, a, b):
    want = _matches(flax_scope, getattr(flax_scope, op)(a, b))
    got = _matches(linen_scope, getattr(linen_core, op)(_to_linen(a), _to_linen(b)))
    assert got == want


def _form(f):
    """The filter's form, not only what it matches: ``False`` and ``set()`` differ."""
    if isinstance(f, (flax_core.DenyList, linen_core.DenyList)):
        return ('DenyList', _form(f.deny))
    if isinstance(f, (bool, str)):
        return (type(f).__name__, f)
    return (type(f).__name__, sorted(f))


FORM_FILTERS = [
    *FILTERS,
    ['a', 'b'],
    ['b', 'c'],
    'a',
    flax_core.DenyList(['a', 'b']),
    flax_core.DenyList(['b', 'c']),
    flax_core.DenyList(False),
]


@pytest.mark.parametrize('op', ['union_filters', 'intersect_filters', 'subtract_filters'])
@pytest.mark.parametrize('a', FORM_FILTERS)
@pytest.mark.parametrize('b', FORM_FILTERS)
def test_filter_algebra_results_take_flax_forms(op, a, b):
    # Code that tests a result with `is False`, or compares it to a DenyList or a
    # set, sees what it sees on Flax.
    want = getattr(flax_scope, op)(a, b)
    got = getattr(linen_core, op)(_to_linen(a), _to_linen(b))
    assert _form(got) == _form(want)


def test_group_collections():
    xs = {'params': 1, 'stats': 2, 'cache': 3}
    filters = ['params', True]
    want = flax_scope.group_collections(xs, filters)
    got = linen_core.group_collections(xs, filters)
    assert [dict(g) for g in got] == [dict(g) for g in want]


def test_array_is_jax_array():
    # Flax's is the annotation Union[jax.Array, Any]; linen's is jax.Array itself,
    # which annotates the same and also works with isinstance.
    assert linen_core.Array is jax.Array
    assert jax.Array in flax_core.Array.__args__


@pytest.mark.parametrize('flag', [True, False])
def test_fix_rng_separator_changes_keys_as_in_flax(flag):
    key = jax.random.key(0)
    x = jnp.ones((1, 3))
    out = []
    for core, config in CORES:
        with config.temp_flip_flag('fix_rng_separator', flag):
            out.append(core.init(mlp)(key, x)[1])
    _same_tree(*out)
    with linen_config.temp_flip_flag('fix_rng_separator', True):
        on = linen_core.init(mlp)(key, x)[1]
    off = linen_core.init(mlp)(key, x)[1]
    assert not np.array_equal(on['params']['hidden']['kernel'], off['params']['hidden']['kernel'])


@pytest.mark.parametrize('flag', [True, False])
def test_return_frozendict(flag):
    key = jax.random.key(0)
    x = jnp.ones((1, 3))
    kinds = []
    for core, config in CORES:
        with config.temp_flip_flag('return_frozendict', flag):
            _, variables = core.init(mlp)(key, x)
            _, state = core.apply(mlp, mutable=['params'])(variables, x)
        kinds.append((type(variables).__name__, type(state).__name__))
    assert kinds[0] == kinds[1]
    assert kinds[1] == (('FrozenDict',) * 2 if flag else ('dict',) * 2)


def test_temp_flip_flag_restores():
    for _, config in CORES:
        with config.temp_flip_flag('preserve_adopted_names', True):
            assert config.flax_preserve_adopted_names is True
        assert config.flax_preserve_adopted_names is False


def test_unknown_flag_is_a_lookup_error():
    for _, config in CORES:
        with pytest.raises(LookupError):
            config.update('flax_no_such_flag', True)


@pytest.mark.parametrize('f', FILTERS + [[], ()])
def test_is_filter_empty(f):
    assert linen_scope.is_filter_empty(_to_linen(f)) == flax_scope.is_filter_empty(f)


def test_lift_vmap_over_a_tuple_of_scopes():
    from flax.core import lift as flax_lift

    from linen.transforms import lift as linen_lift

    xs = jnp.arange(12.0).reshape(4, 3) / 10

    def make(lift):
        def pair(scopes, x):
            a, b = scopes
            return dense(a, x) + dense(b, x) * 2.0

        def model(scope, xs):
            lifted = lift.vmap(
                pair, variable_axes={'params': 0}, split_rngs={'params': True}, in_axes=0
            )
            return lifted((scope.push('a'), scope.push('b')), xs)

        return model

    yf, vf = flax_core.init(make(flax_lift))(jax.random.key(0), xs)
    yl, vl = linen_core.init(make(linen_lift))(jax.random.key(0), xs)
    _same_tree(vf, vl)
    np.testing.assert_allclose(yf, yl, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(
        flax_core.apply(make(flax_lift))(vf, xs),
        linen_core.apply(make(linen_lift))(vl, xs),
        rtol=1e-6,
        atol=1e-6,
    )


def _variable_alias(core):
    scope = core.Scope({}, mutable='state')
    child = scope.push(name='a')
    grandchild = child.push(name='b')
    child.put_variable('state', 'x', 0.0)
    grandchild.put_variable('state', 'y', 0.0)
    before = (child.get_variable('state', 'x'), grandchild.get_variable('state', 'y'))
    # the parent replaces the child's whole subtree: the child (and its own
    # child) read the new values, as the parent does
    scope.put_variable('state', 'a', {'x': jnp.array(1.0), 'b': {'y': jnp.array(2.0)}})
    after = (
        float(child.variables()['state']['x']),
        float(child.get_variable('state', 'x')),
        float(grandchild.get_variable('state', 'y')),
        float(scope.variables()['state']['a']['x']),
    )
    child.put_variable('state', 'x', jnp.array(3.0))  # and writes land in it
    return before, after, float(scope.variables()['state']['a']['x'])


def test_variable_alias_like_flax():
    assert _variable_alias(linen_core) == _variable_alias(flax_core)


def _bad_variables(core, variables):
    def f(scope):
        scope.param('kernel', jax.nn.initializers.ones, (4,))

    try:
        core.apply(f)(variables)
        return 'ok'
    except Exception as error:  # the class name and Flax's first sentence are compared
        return type(error).__name__, str(error).split(' (https://flax')[0].split('. ')[0].rstrip(
            '.'
        )


@pytest.mark.parametrize(
    'variables',
    [
        {'params': {'kernel': np.ones(4)}},
        {'params': {'params': {'kernel': np.ones(4)}}},
        {'params': {'params': {'kernel': np.ones(4)}, 'other': {}}},
        {'params': {'x': {'params': {}}}},
        {'params': 3},
        {'params': {'kernel': np.ones(4)}, 'state': 3},
    ],
)
def test_apply_variables_structure_like_flax(variables):
    want = _bad_variables(flax_core, variables)
    got = _bad_variables(linen_core, variables)
    if want == 'ok':
        assert got == 'ok'
    else:
        assert got[0] == want[0]
        assert got[1].startswith(want[1])


def _rng_check(core, key):
    try:
        core.init(lambda scope: scope.make_rng('params'))(key)
        return 'ok'
    except Exception as error:  # the kind and Flax's first sentence are compared
        return isinstance(error, ValueError), str(error).split('. ')[0].rstrip('.')


@pytest.mark.parametrize(
    'make_key',
    [
        lambda: jax.random.key(0),
        lambda: jax.random.PRNGKey(0),
        lambda: jax.random.key_data(jax.random.key(0)),
        lambda: jax.random.split(jax.random.key(0)),
        lambda: jax.random.split(jax.random.PRNGKey(0)),
        lambda: jax.random.split(jax.random.key_data(jax.random.key(0))),
    ],
)
def test_rng_check_with_old_and_new_keys_like_flax(make_key):
    # One key (typed, raw PRNGKey, raw key data) is valid; a batch of keys is not.
    assert _rng_check(linen_core, make_key()) == _rng_check(flax_core, make_key())
