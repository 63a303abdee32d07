"""Every functional ``lift.*`` against ``flax.core.lift`` as an oracle, on one scope and
on a tuple of scopes.

Each program builds its scopes with the functional core (``init``/``apply`` of a
function of a scope) and is written once over a ``(core, lift)`` pair; it runs with
Flax's and with linen's. Variables, outputs and gradients must agree (variables bit
for bit: the same key gives the same numbers), and so must the errors.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip('flax')
pytestmark = [pytest.mark.flax, pytest.mark.usefixtures('shared_compilations')]

import flax.core as flax_core  # noqa: E402
from flax.core import lift as flax_lift  # noqa: E402

import linen.core as linen_core  # noqa: E402
from linen.transforms import lift as linen_lift  # noqa: E402

FLAX = (flax_core, flax_lift)
LINEN = (linen_core, linen_lift)
KEY = jax.random.key(0)
X = jnp.arange(12.0).reshape(4, 3) / 10


def dense(scope, x, features=3):
    kernel = scope.param('kernel', jax.nn.initializers.lecun_normal(), (x.shape[-1], features))
    bias = scope.param('bias', jax.nn.initializers.normal(), (features,))
    return x @ kernel + bias.reshape((1,) * (x.ndim - 1) + bias.shape)


def noisy_dense(scope, x):
    noise = jax.random.uniform(scope.make_rng('dropout'), x.shape)
    return dense(scope, x * noise)


def pair(scopes, x):
    a, b = scopes
    return dense(a, x) + 2.0 * dense(b, x)


def _scopes(scope, multi):
    return (scope.push('a'), scope.push('b')) if multi else scope.push('dense')


def _body(multi):
    return pair if multi else dense


# ------------------------------------------------------------------- the programs


def prog_vmap(lift, multi):
    def model(scope, xs):
        lifted = lift.vmap(
            _body(multi), variable_axes={'params': 0}, split_rngs={'params': True}, in_axes=0
        )
        return lifted(_scopes(scope, multi), xs)

    return model


def prog_vmap_broadcast_params(lift, multi):
    def model(scope, xs):
        lifted = lift.vmap(
            _body(multi), variable_axes={'params': None}, split_rngs={'params': False}
        )
        return lifted(_scopes(scope, multi), xs)

    return model


def prog_scan(lift, multi):
    def step(scopes, c, x):
        h = _body(multi)(scopes, c + x)
        return jnp.tanh(h), h

    def model(scope, xs):
        lifted = lift.scan(step, variable_broadcast='params', split_rngs={'params': False})
        return lifted(_scopes(scope, multi), jnp.zeros((3,)), xs)

    return model


def prog_scan_stacked(lift, multi):
    def step(scopes, c, x):
        h = _body(multi)(scopes, c * x)
        return h, jnp.sum(h)

    def model(scope, xs):
        lifted = lift.scan(step, variable_axes={'params': 0}, split_rngs={'params': True})
        return lifted(_scopes(scope, multi), jnp.ones((3,)), xs)

    return model


def _keyed(fn):
    # Flax's lift.jit and lift.fold_rngs hand `fn` a static hash key after the scope.
    def keyed(scopes, hash_key, *args):
        assert hash_key == 'k'
        return fn(scopes, *args)

    return keyed


def prog_jit(lift, multi):
    def model(scope, x):
        return lift.jit(_keyed(_body(multi)))(_scopes(scope, multi), 'k', x)

    return model


def prog_checkpoint(lift, multi):
    def model(scope, x):
        return lift.checkpoint(_body(multi))(_scopes(scope, multi), x)

    return model


def prog_remat(lift, multi):
    def model(scope, x):
        return lift.remat(_body(multi), prevent_cse=False)(_scopes(scope, multi), x)

    return model


def _double(tree):
    return jax.tree_util.tree_map(lambda a: 2.0 * a, tree)


def prog_map_variables(lift, multi):
    def model(scope, x):
        lifted = lift.map_variables(_body(multi), 'params', _double, init=True)
        return lifted(_scopes(scope, multi), x)

    return model


def prog_map_variables_keywords(lift, multi):
    def model(scope, x):
        lifted = lift.map_variables(
            _body(multi), mapped_collections='params', map_in_fn=_double, init=True
        )
        return lifted(_scopes(scope, multi), x)

    return model


def prog_vjp(lift, multi):
    def model(scope, x):
        y, bwd = lift.vjp(_body(multi), _scopes(scope, multi), x)
        return y, bwd(jnp.ones_like(y))

    return model


def prog_vjp_aux(lift, multi):
    def fn(scopes, x):
        y = _body(multi)(scopes, x)
        return y, jnp.sum(y)

    def model(scope, x):
        y, bwd, aux = lift.vjp(fn, _scopes(scope, multi), x, has_aux=True)
        return y, aux, bwd(jnp.ones_like(y))

    return model


def prog_value_and_grad(lift, multi):
    def fn(scopes, x):
        return jnp.sum(_body(multi)(scopes, x) ** 2)

    def model(scope, x):
        return lift.value_and_grad(fn, _scopes(scope, multi), x)

    return model


def prog_value_and_grad_aux(lift, multi):
    def fn(scopes, x):
        y = _body(multi)(scopes, x)
        return jnp.sum(y**2), y

    def model(scope, x):
        return lift.value_and_grad(fn, _scopes(scope, multi), x, has_aux=True)

    return model


def prog_jvp(lift, multi):
    def model(scope, x):
        scopes = _scopes(scope, multi)
        # Create the parameters first: the tangents mirror them.
        _body(multi)(scopes, x)
        if multi:
            # One {collection: tangents} per scope, in the structure of the scopes.
            tangents = tuple({'params': _double(s.variables()['params'])} for s in scopes)
        else:
            tangents = {'params': _double(scopes.variables()['params'])}
        return lift.jvp(_body(multi), scopes, (x,), (jnp.ones_like(x),), tangents)

    return model


def prog_while_loop(lift, multi):
    def body(scopes, c):
        counted = scopes[0] if multi else scopes
        count = counted.variable('state', 'count', lambda: jnp.zeros((), jnp.int32))
        count.value += 1
        return jnp.tanh(_body(multi)(scopes, c))

    def cond(scopes, c):
        counted = scopes[0] if multi else scopes
        return counted.get_variable('state', 'count') < 3

    def model(scope, x):
        scopes = _scopes(scope, multi)
        c = body(scopes, x)  # creates the variables, as Flax's docs advise
        return lift.while_loop(cond, body, scopes, c, carry_variables='state')

    return model


def prog_cond(lift, multi):
    def double(scopes, x):
        return 2.0 * _body(multi)(scopes, x)

    def model(scope, x):
        return lift.cond(jnp.sum(x) > 0, _body(multi), double, _scopes(scope, multi), x)

    return model


def prog_switch(lift, multi):
    def double(scopes, x):
        return 2.0 * _body(multi)(scopes, x)

    def negate(scopes, x):
        return -_body(multi)(scopes, x)

    def model(scope, x):
        branches = [_body(multi), double, negate]
        return lift.switch(2, branches, _scopes(scope, multi), x)

    return model


def prog_fold_rngs(lift, multi):
    def fn(scopes, x):
        if multi:
            return noisy_dense(scopes[0], x) + noisy_dense(scopes[1], x)
        return noisy_dense(scopes, x)

    def model(scope, x):
        return lift.fold_rngs(_keyed(fn))(_scopes(scope, multi), 'k', x)

    return model


def prog_custom_vjp(lift, multi):
    def fwd(scopes, x):
        y, vjp_fn = lift.vjp(_body(multi), scopes, x)
        return y, vjp_fn

    def bwd(vjp_fn, y_t):
        params_t, *inputs_t = vjp_fn(y_t)
        return (jax.tree_util.tree_map(jnp.sign, params_t), *inputs_t)

    sign_grad = lift.custom_vjp(_body(multi), forward_fn=fwd, backward_fn=bwd)

    def model(scope, x):
        return sign_grad(_scopes(scope, multi), x)

    return model


def prog_custom_vjp_nondiff(lift, multi):
    """A non-differentiated argument: its position counts the scope as 0 (Flax's)."""

    def body(scopes, x, scale):
        return _body(multi)(scopes, x) * scale

    def fwd(scopes, x, scale):
        y, vjp_fn = lift.vjp(lambda s, x: body(s, x, scale), scopes, x)
        return y, vjp_fn

    def bwd(scale, vjp_fn, y_t):
        params_t, *inputs_t = vjp_fn(y_t)
        return (jax.tree_util.tree_map(lambda t: jnp.sign(t) * scale, params_t), *inputs_t)

    sign_grad = lift.custom_vjp(body, forward_fn=fwd, backward_fn=bwd, nondiff_argnums=(2,))

    def model(scope, x):
        return sign_grad(_scopes(scope, multi), x, 3.0)

    return model


PROGRAMS = {name[5:]: fn for name, fn in globals().items() if name.startswith('prog_')}
# Programs whose gradient is checked too: those where the lift itself changes the
# backward pass. (The others' backward pass is JAX's; checking it would only add
# compile time. A while loop has no reverse mode at all.)
GRAD = {'checkpoint', 'custom_vjp', 'custom_vjp_nondiff', 'remat', 'scan', 'vmap'}
RNGS = {'params': KEY, 'dropout': jax.random.key(7)}


def _same(a, b, exact=True):
    flat_a, tree_a = jax.tree_util.tree_flatten_with_path(a)
    flat_b, tree_b = jax.tree_util.tree_flatten_with_path(b)
    assert [jax.tree_util.keystr(p) for p, _ in flat_a] == [
        jax.tree_util.keystr(p) for p, _ in flat_b
    ]
    for (path, x), (_, y) in zip(flat_a, flat_b):
        x, y = np.asarray(x), np.asarray(y)
        assert x.shape == y.shape and x.dtype == y.dtype, jax.tree_util.keystr(path)
        if exact:
            np.testing.assert_array_equal(x, y, err_msg=jax.tree_util.keystr(path))
        else:
            np.testing.assert_allclose(x, y, rtol=2e-6, atol=1e-6)


def _run(pair_, program, multi):
    core, lift = pair_
    model = PROGRAMS[program](lift, multi)
    y, variables = core.init(model)(RNGS, X)
    variables = jax.tree_util.tree_map(jnp.asarray, dict(variables))
    params = variables['params']
    rest = {k: v for k, v in variables.items() if k != 'params'}

    def loss(params):
        out = core.apply(model, mutable=list(rest) or False)(
            {'params': params, **rest}, X, rngs={'dropout': RNGS['dropout']}
        )
        return sum(jnp.sum(jnp.sin(leaf)) for leaf in jax.tree_util.tree_leaves(out)), out

    if program not in GRAD:
        return variables, y, loss(params)[1], None
    (_, out), grads = jax.jit(jax.value_and_grad(loss, has_aux=True))(params)
    return variables, y, out, grads


CASES = [(program, multi) for program in sorted(PROGRAMS) for multi in (False, True)]


@pytest.mark.parametrize(
    ('program', 'multi'), CASES, ids=[f'{p}-{"tuple" if m else "scope"}' for p, m in CASES]
)
def test_lift_matches_flax(program, multi):
    variables_f, y_f, out_f, grads_f = _run(FLAX, program, multi)
    variables_l, y_l, out_l, grads_l = _run(LINEN, program, multi)
    _same(variables_l, variables_f)
    _same(y_l, y_f, exact=False)
    _same(out_l, out_f, exact=False)
    _same(grads_l, grads_f, exact=False)


def test_lift_jit_traces_once_across_applies():
    counts = {}

    def make(name):
        def fn(scope, hash_key, x):
            counts[name] = counts.get(name, 0) + 1
            return dense(scope, x)

        return fn

    for name, (core, lift) in (('flax', FLAX), ('linen', LINEN)):
        jitted = lift.jit(make(name))

        def model(scope, x, jitted=jitted):
            return jitted(scope.push('dense'), None, x)

        _, variables = core.init(model)(KEY, X)
        for _ in range(3):
            core.apply(model)(variables, X)
    assert counts['linen'] == counts['flax']


def test_remat_scan_matches_flax():
    def step(scope, c):
        return jnp.tanh(dense(scope, c))

    outs = []
    for core, lift in (FLAX, LINEN):

        def model(scope, x, lift=lift):
            return lift.remat_scan(step, lengths=(2, 2))(scope.push('stack'), x)

        y, variables = core.init(model)(KEY, X)
        g = jax.grad(lambda v, core=core, model=model: jnp.sum(core.apply(model)(v, X)))(variables)
        outs.append((variables, y, g))
    _same(outs[1][0], outs[0][0])
    _same(outs[1][1:], outs[0][1:], exact=False)


def test_checkpoint_static_argnums_count_as_in_flax():
    def fn(scope, x, power):
        # `power` must be static: Python control flow on it.
        for _ in range(power):
            x = x * x
        return dense(scope, x)

    outs = []
    for core, lift in (FLAX, LINEN):

        def model(scope, x, lift=lift):
            return lift.checkpoint(fn, static_argnums=(1,))(scope.push('c'), x, 2)

        outs.append(core.init(model)(KEY, X))
    _same(outs[1], outs[0])


def test_jit_takes_flax_positional_arguments():
    # Flax counts static_argnums with the scope as 0, the hash key not counted.
    outs = []
    for core, lift in (FLAX, LINEN):

        def model(scope, x, lift=lift):
            jitted = lift.jit(_keyed(dense), True, True, (2,))
            return jitted(scope.push('d'), 'k', x, 4)

        outs.append(core.init(model)(KEY, X))
    _same(outs[1], outs[0])


@pytest.mark.parametrize('transform', ['vmap', 'cond', 'scan'])
def test_a_dict_of_scopes_is_lifted_as_in_flax(transform):
    def both(scopes, x):
        return dense(scopes['a'], x) - dense(scopes['b'], x)

    def step(scopes, c, x):
        y = both(scopes, c + x)
        return y, 2.0 * y

    outs = []
    for core, lift in (FLAX, LINEN):

        def model(scope, xs, lift=lift):
            scopes = {'a': scope.push('a'), 'b': scope.push('b')}
            if transform == 'cond':
                return lift.cond(True, both, both, scopes, xs)
            if transform == 'scan':  # a tuple or list of scopes was the only pytree taken
                lifted = lift.scan(step, variable_broadcast='params', split_rngs={'params': False})
                return lifted(scopes, jnp.zeros((3,)), xs)
            lifted = lift.vmap(both, variable_axes={'params': 0}, split_rngs={'params': True})
            return lifted(scopes, xs)

        outs.append(core.init(model)(KEY, X))
    _same(outs[1][1], outs[0][1])
    _same(outs[1][0], outs[0][0], exact=False)


def _scaled_dense(scope, x, scale=1.0):
    return dense(scope, x) * scale


def _kwargs_programs(lift):
    return {
        'vmap': lambda s, x: lift.vmap(
            _scaled_dense, variable_axes={'params': 0}, split_rngs={'params': True}
        )(s, x, scale=3.0),
        'scan': lambda s, x: lift.scan(
            lambda sc, c, x, scale=1.0: (c, _scaled_dense(sc, x, scale)),
            variable_broadcast='params',
            split_rngs={'params': False},
        )(s, 0.0, x, scale=3.0)[1],
        'custom_vjp': lambda s, x: lift.custom_vjp(
            _scaled_dense,
            lambda sc, x, scale=1.0: (_scaled_dense(sc, x, scale), ()),
            lambda _, g: (None, g),
        )(s, x, scale=3.0),
        'remat': lambda s, x: lift.remat(_scaled_dense)(s, x, scale=3.0),
        'map_variables': lambda s, x: lift.map_variables(_scaled_dense, 'params', init=True)(
            s, x, scale=3.0
        ),
    }


@pytest.mark.parametrize('transform', ['vmap', 'scan', 'custom_vjp', 'remat', 'map_variables'])
def test_keyword_arguments_dropped_with_flax_warning(transform):
    import warnings

    results = []
    for core, lift in (FLAX, LINEN):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            y, variables = core.init(_kwargs_programs(lift)[transform])(KEY, X)
        results.append((y, dict(variables), [(w.category, str(w.message)) for w in caught]))
    (y_f, v_f, w_f), (y_l, v_l, w_l) = results
    assert w_l == w_f
    _same(v_l, v_f)
    _same(y_l, y_f, exact=False)
    if transform in ('vmap', 'scan', 'custom_vjp'):
        assert w_l == [
            (RuntimeWarning, f'kwargs are not supported in {transform}, so "scale" is(are) ignored')
        ]
        kernel, bias = v_l['params']['kernel'], v_l['params']['bias']
        if transform == 'vmap':
            expected = jnp.einsum('bi,bio->bo', X, kernel) + bias
        else:
            expected = X @ kernel + bias.reshape(1, -1)
        np.testing.assert_allclose(y_l, expected, rtol=1e-5, atol=1e-6)  # scale=1: dropped
    else:
        assert w_l == []


def _prober(scope, x):
    """``dense`` scaled by a 'consts' variable and counted in 'state', each made only
    where the scope may (so every filter runs), noise where 'dropout' is there; returns
    what the scope sees besides."""
    seen = [scope.has_variable('consts', 'c'), scope.has_variable('state', 'n')]
    changes = [scope.is_mutable_collection(c) for c in ('consts', 'state', 'params')]
    streams = [scope.has_rng('dropout'), scope.has_rng('params')]
    scale = 1.0
    if seen[0] or changes[0]:
        scale = scope.variable('consts', 'c', jnp.full, (1, 3), 2.0).value
    if seen[1] or changes[1]:
        count = scope.variable('state', 'n', jnp.zeros, ())
        if changes[1]:
            count.value += 1
    y = dense(scope, x) * scale
    if streams[0]:
        y = y + jax.random.uniform(scope.make_rng('dropout'), y.shape)
    return y, jnp.array(seen + changes + streams)


def _filtered(lift, transform, filters):
    def model(scope, x):
        body = scope.push('body')
        if transform == 'jit':
            return lift.jit(_keyed(_prober), **filters)(body, 'k', x)
        if transform == 'fold_rngs':
            return lift.fold_rngs(_keyed(_prober), **filters)(body, 'k', x)
        if transform == 'map_variables':
            init = scope.is_mutable_collection('params')
            return lift.map_variables(_prober, 'params', init=init, **filters)(body, x)
        return getattr(lift, transform)(_prober, **filters)(body, x)

    return model


LIFT_FILTERS = {
    'params': {'variables': 'params'},
    'no_collection': {'variables': False},
    'params_and_consts': {'variables': ['params', 'consts']},
    'state': {'variables': 'state'},
    'params_stream': {'rngs': 'params'},
    'dropout_stream': {'rngs': 'dropout'},
    'both': {'variables': ['params', 'state'], 'rngs': ['params', 'dropout']},
}


def _outcome(run):
    try:
        return 'ok', run()
    except Exception as error:
        return 'raised', error


FILTER_CASES = [
    (transform, case)
    for transform in ('jit', 'checkpoint', 'remat', 'fold_rngs', 'map_variables')
    for case in LIFT_FILTERS
    # (map_variables' rngs= is compared at module level, test_flax_transform_edges)
    if not (transform == 'map_variables' and 'rngs' in LIFT_FILTERS[case])
]


@pytest.mark.parametrize(('transform', 'case'), FILTER_CASES)
def test_lift_variables_and_rngs_filters_match_flax(transform, case):
    """The body sees (and changes) only the collections and rng streams the filters
    admit (``map_variables``: with the mapped one); linen's ``jit``, ``checkpoint``,
    ``fold_rngs`` and ``map_variables`` accepted their filters and ignored them."""
    filters = LIFT_FILTERS[case]

    def run(pair_, mutable, given):
        core, lift = pair_
        model = _filtered(lift, transform, filters)
        y, variables = core.init(model)(RNGS, X)
        variables = jax.tree_util.tree_map(jnp.asarray, dict(variables))
        passed = {c: v for c, v in variables.items() if c in given}
        out = core.apply(model, mutable=mutable)(passed, X, rngs={'dropout': RNGS['dropout']})
        return variables, y, out

    every = ('params', 'consts', 'state')
    for mutable, given in ((False, every), (['state'], every), (['consts', 'state'], ('params',))):
        flax_kind, flax_value = _outcome(lambda: run(FLAX, mutable, given))  # noqa: B023
        linen_kind, linen_value = _outcome(lambda: run(LINEN, mutable, given))  # noqa: B023
        assert linen_kind == flax_kind, (flax_value, linen_value)
        if flax_kind == 'raised':  # the same class (Flax names lifted scopes otherwise)
            assert type(linen_value).__name__ == type(flax_value).__name__
        else:
            _same(linen_value, flax_value)
