"""Flax as oracle for lifted-transform programs: Modules and Variables passed into
transformed methods (multi-scope lifting), functions lifted from compact methods,
bound methods as branches, ``check_constancy_invariants`` and setup counts.

Each program is written once, against an ``nn`` namespace, and run with ``flax.linen``
and ``linen.nn`` for the same key: same variables, outputs and errors. Under ``nn.jit``
Flax's parameters depend on the jit (its documented rng gotcha; linen's do not), so
jitted programs compare outputs on Flax's variables and the variables' shapes.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import linen.nn as linen_nn

pytestmark = [pytest.mark.flax, pytest.mark.usefixtures('shared_compilations')]
flax = pytest.importorskip('flax')
flax_nn = pytest.importorskip('flax.linen')

X = jnp.linspace(-1.0, 1.0, 6).reshape(2, 3)


def _vmapped(nn, fn, **kw):
    return nn.vmap(fn, variable_axes={'params': 0}, split_rngs={'params': True}, **kw)


def vmap_module_arg(nn):
    """A setup submodule handed to an nn.vmap-ed function: its params gain the axis."""

    class Foo(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(2)(x)

    class Top(nn.Module):
        def setup(self):
            self.foo = Foo()

        @nn.compact
        def __call__(self, x):
            return _vmapped(nn, lambda m, foo, x: foo(x), in_axes=(None, 0))(self, self.foo, x)

    return Top()


def vmap_method_module_arg(nn):
    """The decorator form, on a method taking a module (Flax: ``functools.partial``)."""

    class Top(nn.Module):
        def setup(self):
            self.dense = nn.Dense(2)

        @functools.partial(
            nn.vmap,
            variable_axes={'params': 0},
            split_rngs={'params': True},
            in_axes=(0, None),
        )
        def helper(self, x, m):
            return m(x)

        def __call__(self, x):
            return self.helper(x, self.dense)

    return Top()


def vmap_shared_module_arg(nn):
    """A module used both inside (broadcast params) and outside the transform."""

    class Top(nn.Module):
        def setup(self):
            self.d = nn.Dense(3)

        @nn.compact
        def __call__(self, x):
            f = nn.vmap(
                lambda m, d, x: d(x),
                variable_axes={'params': None},
                split_rngs={'params': False},
                in_axes=(None, 0),
            )
            return f(self, self.d, jnp.stack([x, 2 * x])).sum(0) + self.d(x)

    return Top()


def vmap_variable_arg(nn):
    """A Variable passed into nn.vmap reads the lifted scope's value."""

    class Top(nn.Module):
        @nn.compact
        def __call__(self, x):
            v = self.variable('params', 'w', lambda: jnp.arange(3.0))
            f = nn.vmap(
                lambda m, v, x: x * v.value,
                variable_axes={'params': None},
                split_rngs={'params': False},
                in_axes=(None, 0),
            )
            return f(self, v, x)

    return Top()


def vmap_field_module(nn):
    """A module given to a transformed class as a field is lifted with it."""

    class Body(nn.Module):
        dense: nn.Module

        @nn.compact
        def __call__(self, x):
            return self.dense(x) + nn.Dense(3)(x)

    class Top(nn.Module):
        @nn.compact
        def __call__(self, x):
            d = nn.Dense(3)
            return _vmapped(nn, Body)(d)(jnp.stack([x, x]))

    return Top()


def vmap_lambda_creates_submodule(nn):
    """A lambda lifted from a compact method may create submodules (compact mode)."""

    class Top(nn.Module):
        @nn.compact
        def __call__(self, x):
            return _vmapped(nn, lambda m, x: nn.Dense(2)(x))(self, x)

    return Top()


def vmap_in_vmap_setup(nn):
    class Inner(nn.Module):
        def setup(self):
            self.d = nn.Dense(2)

        def __call__(self, x):
            return self.d(x)

    class Mid(nn.Module):
        def setup(self):
            self.i = _vmapped(nn, Inner)()

        def __call__(self, x):
            return self.i(x)

    class Top(nn.Module):
        def setup(self):
            self.m = _vmapped(nn, Mid)()

        def __call__(self, x):
            return self.m(jnp.stack([x, x]))

    return Top()


def remat_module_arg(nn):
    class Top(nn.Module):
        def setup(self):
            self.d = nn.Dense(3)

        @nn.compact
        def __call__(self, x):
            return nn.remat(lambda m, d, x: 2.0 * d(x))(self, self.d, x)

    return Top()


def cond_bound_methods(nn):
    class Top(nn.Module):
        def setup(self):
            self.a = nn.Dense(2)
            self.b = nn.Dense(2)

        def left(self, x):
            return self.a(x)

        def right(self, x):
            return -self.b(x)

        def __call__(self, x):
            if self.is_initializing():
                self.a(x)
                self.b(x)
            y = nn.cond(x.sum() > 0, self.left, self.right, self, x)
            return y + nn.switch(1, [self.left, self.right], self, x)

    return Top()


def scan_constancy_checked(nn):
    class Cell(nn.Module):
        @nn.compact
        def __call__(self, c, x):
            c = jnp.tanh(nn.Dense(3)(c) + x)
            return c, c

    class Top(nn.Module):
        check: bool = True

        @nn.compact
        def __call__(self, x):
            S = nn.scan(
                Cell,
                variable_broadcast='params',
                split_rngs={'params': False},
                check_constancy_invariants=self.check,
            )
            return S()(x, jnp.stack([x, -x]))

    return Top


def scan_field_module(nn, rule):
    """A module given to an nn.scan-ed class as a field (was UnexpectedTracerError)."""

    class Body(nn.Module):
        dense: nn.Module

        @nn.compact
        def __call__(self, c, x):
            return jnp.tanh(self.dense(c) + x), c

    class Top(nn.Module):
        @nn.compact
        def __call__(self, x):
            d = nn.Dense(3)
            if rule == 'axes':
                S = nn.scan(Body, variable_axes={'params': 0}, split_rngs={'params': True})
            else:
                S = nn.scan(Body, variable_broadcast='params', split_rngs={'params': False})
            return S(d)(x[0], x)

    return Top()


def scan_field_module_axes(nn):
    return scan_field_module(nn, 'axes')


def scan_field_module_broadcast(nn):
    return scan_field_module(nn, 'broadcast')


def setup_shared_into_scan(nn):
    """A setup submodule used by the parent and, as a field, by an nn.scan-ed sibling."""

    class Block(nn.Module):
        dense: nn.Module

        def __call__(self, c, x):
            return self.dense(c) + x, c

    class Top(nn.Module):
        def setup(self):
            self.shared = nn.Dense(3)
            scan = nn.scan(Block, variable_broadcast='params', split_rngs={'params': False})
            self.s = scan(self.shared)

        def __call__(self, x):
            return self.s(self.shared(x[0]), x)

    return Top()


PROGRAMS = {
    f.__name__: f
    for f in (
        vmap_module_arg,
        vmap_method_module_arg,
        vmap_shared_module_arg,
        vmap_variable_arg,
        vmap_field_module,
        vmap_lambda_creates_submodule,
        vmap_in_vmap_setup,
        remat_module_arg,
        cond_bound_methods,
        scan_field_module_axes,
        scan_field_module_broadcast,
        setup_shared_into_scan,
    )
}


def _np(tree):
    tree = flax.core.unfreeze(tree) if hasattr(tree, 'unfreeze') else dict(tree)
    return jax.tree_util.tree_map(np.asarray, tree)


def _assert_close(a, b, rtol=1e-5, atol=1e-6):
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol)


def _init_apply(model):
    variables = model.init(jax.random.key(0), X)
    return _np(variables), model.apply(variables, X)


@pytest.mark.parametrize('name', list(PROGRAMS))
def test_same_variables_and_outputs_as_flax(name):
    ours = _init_apply(PROGRAMS[name](linen_nn))
    theirs = _init_apply(PROGRAMS[name](flax_nn))
    _assert_close(ours, theirs)


def test_vmap_module_arg_params_gain_the_axis():
    # Independent of Flax: the lifted submodule's kernel is stacked, one per row of X.
    variables = vmap_module_arg(linen_nn).init(jax.random.key(0), X)
    kernel = variables['params']['foo']['Dense_0']['kernel']
    assert kernel.shape == (2, 3, 2)
    y = vmap_module_arg(linen_nn).apply(variables, X)
    bias = variables['params']['foo']['Dense_0']['bias']
    expected = jnp.einsum('bi,bio->bo', X, kernel) + bias
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------ nn.jit


def jit_module_arg(nn):
    """Flax: a submodule passed to a jitted method (once "not an abstract array")."""

    class Foo(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(2)(x)

    class Top(nn.Module):
        def setup(self):
            self.foo = Foo()

        @nn.jit
        def helper(self, x, m):
            return m(x)

        def __call__(self, x):
            return self.helper(x, self.foo) + self.helper(2 * x, self.foo)

    return Top()


def jit_lambda_module_arg(nn):
    class Top(nn.Module):
        @nn.compact
        def __call__(self, x):
            d = nn.Dense(3, name='shared')
            f = nn.jit(lambda m, d, x: d(x) + nn.Dense(3, name='inner')(x))
            return f(self, d, d(x))

    return Top()


def jit_variable_arg(nn):
    class Top(nn.Module):
        @nn.compact
        def __call__(self, x):
            v = self.variable('state', 'count', jnp.zeros, ())

            def bump(m, v, x):
                v.value = v.value + 1.0
                return x * v.value

            return nn.jit(bump)(self, v, x)

    return Top()


def jit_field_module(nn):
    """A module given to an nn.jit-ed class as a field (was UnexpectedTracerError)."""

    class Body(nn.Module):
        dense: nn.Module

        @nn.compact
        def __call__(self, x):
            return 2.0 * self.dense(x)

    class Top(nn.Module):
        @nn.compact
        def __call__(self, x):
            d = nn.Dense(3)
            return nn.jit(Body)(d)(x) + d(x)

    return Top()


@pytest.mark.parametrize('make', [jit_module_arg, jit_lambda_module_arg, jit_field_module])
def test_jit_with_module_arguments_matches_flax_on_flax_variables(make):
    flax_vars = make(flax_nn).init(jax.random.key(0), X)
    ours_vars = make(linen_nn).init(jax.random.key(0), X)
    shapes = functools.partial(jax.tree_util.tree_map, jnp.shape)
    assert shapes(_np(ours_vars)) == shapes(_np(flax_vars))
    _assert_close(make(linen_nn).apply(flax_vars, X), make(flax_nn).apply(flax_vars, X))


def test_jit_variable_argument_is_updated_through_the_transform():
    out = []
    for nn in (flax_nn, linen_nn):
        model = jit_variable_arg(nn)
        variables = model.init(jax.random.key(0), X)
        y, state = model.apply(variables, X, mutable=['state'])
        out.append((_np(variables), y, _np(state)))
    _assert_close(out[1], out[0])
    assert float(out[1][2]['state']['count']) == 2.0  # once in init, once in apply


def test_jit_variable_argument_immutable_raises_as_flax():
    from linen.core import errors as linen_errors

    for nn, errs in ((flax_nn, flax.errors), (linen_nn, linen_errors)):
        model = jit_variable_arg(nn)
        variables = model.init(jax.random.key(0), X)
        with pytest.raises(errs.ModifyScopeVariableError, match='Cannot update variable "count"'):
            model.apply(variables, X)


# ------------------------------------------------------------------------ nn.scan


def test_scan_check_constancy_invariants_true_matches_flax():
    ours = _init_apply(scan_constancy_checked(linen_nn)(check=True))
    theirs = _init_apply(scan_constancy_checked(flax_nn)(check=True))
    _assert_close(ours, theirs)


def test_scan_without_constancy_check_applies_and_creates_no_broadcast_params():
    from linen.core import errors as linen_errors

    flax_vars = scan_constancy_checked(flax_nn)(check=True).init(jax.random.key(0), X)
    ys = [scan_constancy_checked(nn)(check=False).apply(flax_vars, X) for nn in (flax_nn, linen_nn)]
    _assert_close(ys[1], ys[0])
    # Without the run before the loop, broadcast params are never created (Flax too):
    # init returns none, and applying that fails on the missing kernel.
    for nn, errs in ((flax_nn, flax.errors), (linen_nn, linen_errors)):
        model = scan_constancy_checked(nn)(check=False)
        variables = model.init(jax.random.key(0), X)
        assert not jax.tree_util.tree_leaves(variables)
        with pytest.raises(errs.ScopeCollectionNotFound, match='Tried to access "kernel"'):
            model.apply(variables, X)


# ------------------------------------------------------------- errors and warnings


def _returns_submodule(nn, transform):
    class Top(nn.Module):
        @nn.compact
        def __call__(self, x):
            def fn(m, x):
                d = nn.Dense(2)
                return d(x), d

            if transform == 'jit':
                return nn.jit(fn)(self, x)[0]
            return _vmapped(nn, fn)(self, x)[0]

    return Top()


@pytest.mark.parametrize('transform', ['jit', 'vmap'])
def test_lifted_function_returning_a_module_raises_as_flax(transform):
    from linen.core import errors as linen_errors

    texts = []
    for nn, errs in ((flax_nn, flax.errors), (linen_nn, linen_errors)):
        with pytest.raises(errs.TransformedMethodReturnValueError) as info:
            _returns_submodule(nn, transform).init(jax.random.key(0), X)
        texts.append(str(info.value))
    assert texts[1].startswith(texts[0].split(' (https://')[0])


def test_lifted_function_in_setup_module_cannot_create_submodules_as_flax():
    from linen.core import errors as linen_errors

    def make(nn):
        class Top(nn.Module):
            def setup(self):
                self.d = nn.Dense(3)

            def __call__(self, x):  # not compact: the lambda may not create modules
                return nn.jit(lambda m, x: nn.Dense(2)(m.d(x)))(self, x)

        return Top()

    for nn, errs in ((flax_nn, flax.errors), (linen_nn, linen_errors)):
        with pytest.raises(errs.AssignSubModuleError, match='Submodule Dense must be defined'):
            make(nn).init(jax.random.key(0), X)


# ------------------------------------------------------------------ setup counts

SETUP_CALLS: list = []


def _leaf(nn):
    class Leaf(nn.Module):
        def setup(self):
            SETUP_CALLS.append(1)
            self.d = nn.Dense(3)

        def __call__(self, c, x):
            c = jnp.tanh(self.d(c) + x)
            return c, c

    return Leaf


def setup_vmap_in_scan(nn):
    V = nn.vmap(_leaf(nn), variable_axes={'params': 0}, split_rngs={'params': True})
    S = nn.scan(V, variable_broadcast='params', split_rngs={'params': False}, in_axes=1)

    class Top(nn.Module):
        @nn.compact
        def __call__(self, x):
            return S()(x, jnp.stack([x, x], 1))[1]

    return Top()


def setup_scan_stacked(nn):
    S = nn.scan(
        _leaf(nn),
        variable_axes={'params': 0},
        split_rngs={'params': True},
        length=2,
        in_axes=nn.broadcast,
    )

    class Top(nn.Module):
        @nn.compact
        def __call__(self, x):
            return S()(x, x)[0]

    return Top()


def setup_remat_vmap(nn):
    V = nn.remat(nn.vmap(_leaf(nn), variable_axes={'params': 0}, split_rngs={'params': True}))

    class Top(nn.Module):
        @nn.compact
        def __call__(self, x):
            return V()(x, x)[0]

    return Top()


def setup_scan_in_setup(nn):
    class Top(nn.Module):
        def setup(self):
            self.s = nn.scan(
                _leaf(nn),
                variable_broadcast='params',
                split_rngs={'params': False},
                length=3,
                in_axes=nn.broadcast,
            )()

        def __call__(self, x):
            return self.s(x, x)[0]

    return Top()


def _setup_counts(model):
    SETUP_CALLS.clear()
    variables = model.init(jax.random.key(0), X)
    n_init = len(SETUP_CALLS)
    SETUP_CALLS.clear()
    model.apply(variables, X)
    return n_init, len(SETUP_CALLS)


@pytest.mark.parametrize(
    'make', [setup_vmap_in_scan, setup_scan_stacked, setup_remat_vmap, setup_scan_in_setup]
)
def test_setup_call_counts_under_nested_transforms_match_flax(make):
    assert _setup_counts(make(linen_nn)) == _setup_counts(make(flax_nn))


# ------------------------------------------------- keyword arguments of lifted calls


def _kwargs_program(nn, transform):
    class Cell(nn.Module):
        @nn.compact
        def __call__(self, c, x, scale=1.0, shift=0.0):
            return c, nn.Dense(2)(x) * scale + shift

    lifted = {
        'vmap': lambda: nn.vmap(Cell, variable_axes={'params': 0}, split_rngs={'params': True}),
        'scan': lambda: nn.scan(Cell, variable_broadcast='params', split_rngs={'params': False}),
        'remat': lambda: nn.remat(Cell),
        'map_variables': lambda: nn.map_variables(Cell, 'params', init=True),
        'fold_rngs': lambda: nn.fold_rngs(Cell),
    }[transform]()

    class Top(nn.Module):
        @nn.compact
        def __call__(self, x):
            return lifted()(x, x, shift=0.5, scale=3.0)[1]

    return Top()


def _run_recording_warnings(model):
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        variables = model.init(jax.random.key(0), X)
        y = model.apply(variables, X)
    return _np(variables), y, [(w.category, str(w.message)) for w in caught]


@pytest.mark.parametrize('transform', ['vmap', 'scan', 'remat', 'map_variables', 'fold_rngs'])
def test_keyword_arguments_dropped_and_warned_where_flax_does(transform):
    ours = _run_recording_warnings(_kwargs_program(linen_nn, transform))
    theirs = _run_recording_warnings(_kwargs_program(flax_nn, transform))
    assert ours[2] == theirs[2]  # same RuntimeWarnings, same text, one per call
    _assert_close(ours[:2], theirs[:2])
    if transform in ('vmap', 'scan'):
        # Independent of Flax: the body ran with its defaults (scale=1, shift=0).
        message = f'kwargs are not supported in {transform}, so "scale, shift" is(are) ignored'
        assert ours[2] == [(RuntimeWarning, message)] * 2
        dense = ours[0]['params'][f'{transform.capitalize()}Cell_0']['Dense_0']
        if transform == 'scan':
            expected = X @ dense['kernel'] + dense['bias'].reshape(1, -1)
        else:
            expected = jnp.einsum('bi,bio->bo', X, dense['kernel']) + dense['bias']
        np.testing.assert_allclose(ours[1], expected, rtol=1e-5, atol=1e-6)
    else:
        assert ours[2] == []


def add_metadata_axis_program(nn):
    class Layer(nn.Module):
        @nn.compact
        def __call__(self, x):
            init = nn.with_partitioning(nn.initializers.lecun_normal(), (None, 'model'))
            return x @ self.param('w', init, (x.shape[-1], 2))

    Annotated = nn.add_metadata_axis(
        Layer, variable_axes={'params': 0}, metadata_params={nn.PARTITION_NAME: 'layers'}
    )

    class Top(nn.Module):
        @nn.compact
        def __call__(self, x):
            return Annotated()(x)

    return Top()


def test_add_metadata_axis_names_the_class_and_boxes_as_flax():
    # Flax composes one map_variables per collection: the submodule is
    # `Map_variablesLayer_0`, which names the rng path and so the initial values.
    ours = add_metadata_axis_program(linen_nn).init(jax.random.key(0), X)
    theirs = add_metadata_axis_program(flax_nn).init(jax.random.key(0), X)
    assert list(ours['params']) == list(theirs['params']) == ['Map_variablesLayer_0']
    box, flax_box = (
        ours['params']['Map_variablesLayer_0']['w'],
        theirs['params']['Map_variablesLayer_0']['w'],
    )
    assert box.names == flax_box.names == ('layers', None, 'model')
    np.testing.assert_array_equal(np.asarray(box.value), np.asarray(flax_box.value))


def _jit_leaf(nn):
    class Leaf(nn.Module):
        def setup(self):
            SETUP_CALLS.append(1)
            self.d = nn.Dense(3)

        def __call__(self, x):
            return self.d(x)

    return Leaf


def jit_setup_class(nn):
    J = nn.jit(_jit_leaf(nn))

    class Top(nn.Module):
        @nn.compact
        def __call__(self, x):
            return J()(x)

    return Top()


def jit_setup_method(nn):
    class Top(nn.Module):
        def setup(self):
            SETUP_CALLS.append(1)
            self.d = nn.Dense(3)

        @nn.jit
        def __call__(self, x):
            return self.d(x)

    return Top()


def jit_setup_called_twice(nn):
    """One setup submodule called twice: the second call reuses the first's trace."""
    J = nn.jit(_jit_leaf(nn))

    class Top(nn.Module):
        def setup(self):
            self.leaf = J()

        def __call__(self, x):
            return self.leaf(x) + self.leaf(x)

    return Top()


@pytest.mark.parametrize('make', [jit_setup_class, jit_setup_method, jit_setup_called_twice])
def test_setup_call_counts_under_jit_match_flax_on_apply(make):
    # Per call, setup runs twice outside the compiled function (a check on a throwaway
    # scope, then the module's own), as in Flax; once more per trace, on the clone inside.
    def counts(model):
        n_init, n_apply = _setup_counts(model)
        variables = model.init(jax.random.key(0), X)
        model.apply(variables, X)
        SETUP_CALLS.clear()
        model.apply(variables, X)  # traced already: setup outside only
        return n_init, n_apply, len(SETUP_CALLS)

    ours, theirs = counts(make(linen_nn)), counts(make(flax_nn))
    assert ours[1:] == theirs[1:]
    # Init: one more per call site that draws random numbers (see compat_notes: linen's
    # abstract trace that learns which rng paths the one compile per class takes).
    extra = 2 if make is jit_setup_called_twice else 1
    assert ours[0] == theirs[0] + extra
