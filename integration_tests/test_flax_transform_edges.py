"""Flax as oracle at the edges of the lifted transforms' arguments and results.

Each case runs the same program on Flax and on linen: both succeed with the same
variables (the same key order, the same bytes under Flax's serializer), or both
raise, linen's error an instance of Flax's class whose message starts with the
message Flax gives at run time (its documentation link left out).

- ``nn.jit``'s ``static_argnums``/``donate_argnums`` count the module as 0, for a
  Module class, its ``methods=`` and a function of a module; 0, negative and
  unpassed indices mark nothing; donation is per argument. linen's ``nn.jit``
  keeps the parameters of the model without it (Flax's does not: documented), so
  its values are compared with Flax's model without ``nn.jit``.
- ``nn.remat``'s ``static_argnums`` are placed on each call as Flax places them
  (an argument passed by keyword has no position); ``concrete=True`` is Flax's
  ``NotImplementedError``.
- ``nn.scan`` and ``nn.vmap`` that cannot tell (or disagree on) their length or
  axis size say so in Flax's words.
- The variables a lifted transform makes come out in pytree order (sorted keys),
  the variables that existed keep their place, as Flax's lifting leaves them;
  ``nn.custom_vjp`` hands back the collections its call changes.
- ``nn.jvp``, ``nn.vjp`` and ``nn.custom_vjp`` lift one module's scope: a module
  holding Modules in its fields (alone, in a list or a dict; made by its parent or
  adopted) is Flax's ``NotImplementedError``, where linen once took such a field's
  variables for constants (wrong tangents and cotangents) or failed inside JAX;
  submodules made in ``setup`` or a compact method, and fields holding none, run.
- ``nn.vjp``, ``nn.jvp``, ``nn.grad`` and ``nn.value_and_grad`` show their function
  only the collections differentiated and those ``variables=`` admits (the others are
  neither readable nor writable there) and only the rng streams ``rngs=`` admits;
  ``nn.cond`` and ``nn.switch`` show their branches the collections and streams their
  filters admit; ``nn.while_loop`` shows its body the carried and broadcast
  collections and the streams ``split_rngs`` names; ``nn.map_variables`` shows its
  target the mapped collections, those ``variables=`` admits and the streams
  ``rngs=`` admits, and ``nn.fold_rngs`` the collections and streams its filters admit.
- A gradient through a lifted derivative (``nn.grad``, ``nn.vjp``, ``nn.jvp`` of a
  layer, a shared module calling it twice under ``nn.vmap``) is Flax's to the bit,
  jitted and eager: the layers inside emit Flax's operations one by one (F36).
- ``nn.vmap`` and ``nn.scan`` refuse a list as ``in_axes`` (Flax: JAX's pytree
  structure error, a ``ValueError``), and take a list inside the tuple for a list
  argument.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip('flax')
pytestmark = [pytest.mark.flax, pytest.mark.usefixtures('shared_compilations')]

import flax.linen as flax_nn  # noqa: E402
from flax import serialization  # noqa: E402

import linen.nn as linen_nn  # noqa: E402

LIBS = {'flax': flax_nn, 'linen': linen_nn}
X = jnp.ones((3, 4))
RNGS = {'params': jax.random.key(0), 'dropout': jax.random.key(1)}


def _outcome(run):
    """``('ok', result)`` or ``('raised', error)``, warnings raised as errors."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('error')
            return 'ok', run()
    except Exception as error:
        return 'raised', error


def _flax_head(message: str) -> str:
    """The first line of Flax's message, up to the link to its documentation (linen
    puts a hint there)."""
    message = message.splitlines()[0]
    for marker in (' for more information', ' (https://'):
        message = message.split(marker)[0]
    return message.rstrip()


def _assert_same_error(flax_error: Exception, linen_error: Exception) -> None:
    assert isinstance(linen_error, type(flax_error)), (flax_error, linen_error)
    assert str(linen_error).startswith(_flax_head(str(flax_error))), (
        str(flax_error),
        str(linen_error),
    )


def _plain(tree):
    if isinstance(tree, Mapping):
        return {k: _plain(v) for k, v in tree.items()}
    return np.asarray(tree)


def _key_order(tree):
    if not isinstance(tree, Mapping):
        return None
    return [(k, _key_order(v)) for k, v in tree.items()]


def _assert_same_variables(flax_vars, linen_vars, values: bool = True) -> None:
    """Same keys in the same order at every level, and (``values``) the same bytes."""
    flax_vars, linen_vars = _plain(flax_vars), _plain(linen_vars)
    assert _key_order(linen_vars) == _key_order(flax_vars)
    if values:
        assert serialization.to_bytes(linen_vars) == serialization.to_bytes(flax_vars)
    else:
        shapes = functools.partial(jax.tree_util.tree_map, np.shape)
        assert shapes(linen_vars) == shapes(flax_vars)


def _in_pytree_order(tree):
    if isinstance(tree, Mapping):
        return {k: _in_pytree_order(tree[k]) for k in sorted(tree)}
    return tree


def _assert_same_values(expected, actual) -> None:
    """Same variables and bytes, whatever the order of the keys."""
    _assert_same_variables(_in_pytree_order(_plain(expected)), _in_pytree_order(_plain(actual)))


def _assert_same_tree(got, expected, what='') -> None:
    """The same pytree of arrays, bit for bit (tuples and lists too)."""
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(expected), what
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(expected)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=what)


def _assert_same_outcome(flax_outcome, linen_outcome, compare) -> None:
    (flax_kind, flax_value), (linen_kind, linen_value) = flax_outcome, linen_outcome
    if flax_kind == 'raised':
        assert linen_kind == 'raised', f'Flax raised {flax_value!r}; linen ran'
        _assert_same_error(flax_value, linen_value)
    else:
        assert linen_kind == 'ok', f'Flax ran; linen raised {linen_value!r}'
        compare(flax_value, linen_value)


# ------------------------------------------------------------------- nn.jit


def _flagged(nn):
    class Flagged(nn.Module):
        @nn.compact
        def __call__(self, x, training: bool):
            x = nn.Dense(4)(x)
            return nn.Dropout(rate=0.5, deterministic=not training)(x)

        @nn.compact
        def foo(self, x, training: bool):
            return self.__call__(x, training)

    return Flagged


@pytest.mark.parametrize(
    ('static_argnums', 'method'),
    [(1, None), (2, None), ((2,), None), (-1, None), ((0, 2), None), ((2, 5), None)]
    + [(1, 'foo'), (2, 'foo'), (-1, 'foo')],
)
def test_jit_static_argnums_count_the_module_as_argument_0(static_argnums, method):
    def run(nn):
        methods = [method] if method else None
        jitted = nn.jit(_flagged(nn), static_argnums=static_argnums, methods=methods)
        return jitted().init(RNGS, X, True, method=method)

    plain = _flagged(flax_nn)().init(RNGS, X, True)

    def compare(flax_vars, linen_vars):
        _assert_same_variables(flax_vars, linen_vars, values=False)
        _assert_same_values(plain, linen_vars)  # linen's nn.jit keeps the parameters

    _assert_same_outcome(_outcome(lambda: run(flax_nn)), _outcome(lambda: run(linen_nn)), compare)


@pytest.mark.parametrize('static_argnums', [2, 3, (2, 3)])
def test_jit_of_a_function_counts_the_module_as_argument_0(static_argnums):
    # Flax's jit of a function refuses the function's last two arguments (its own
    # argument count); the cases here are those it runs.
    def run(nn):
        static = []

        def fn(mdl, x, a, b, c, d):
            static.extend(i + 2 for i, f in enumerate((a, b, c, d)) if isinstance(f, bool))
            return nn.Dense(2)(x)

        class Outer(nn.Module):
            @nn.compact
            def __call__(self, x):
                return nn.jit(fn, static_argnums=static_argnums)(self, x, True, True, True, True)

        Outer().init(RNGS, X)
        return sorted(set(static))

    assert run(linen_nn) == run(flax_nn)


def _sum(nn):
    class Sum(nn.Module):
        @nn.compact
        def __call__(self, x, y):
            return nn.Dense(4)(x) + y

    return Sum


@pytest.mark.parametrize('init', [True, False], ids=['init', 'apply'])
@pytest.mark.parametrize('donate_argnums', [0, 1, 2, -1, 3, (0, 1)])
def test_jit_donate_argnums_count_the_module_as_argument_0(donate_argnums, init):
    def run(nn):
        x, y = jnp.ones((3, 4)), jnp.full((3, 4), 2.0)
        module = nn.jit(_sum(nn), donate_argnums=donate_argnums)()
        if init:
            module.init(RNGS, x, y)
        else:
            module.apply(_sum(flax_nn)().init(RNGS, X, X), x, y)
        return x.is_deleted(), y.is_deleted()

    _assert_same_outcome(
        _outcome(lambda: run(flax_nn)), _outcome(lambda: run(linen_nn)), np.testing.assert_equal
    )


# ------------------------------------------------------------------ nn.remat


def test_remat_concrete_is_flaxs_not_implemented_error():
    def run(nn):
        return nn.remat(nn.Dense, concrete=True)(3).init(jax.random.key(0), jnp.ones((1, 2)))

    flax_outcome, linen_outcome = _outcome(lambda: run(flax_nn)), _outcome(lambda: run(linen_nn))
    assert flax_outcome[0] == 'raised' and isinstance(flax_outcome[1], NotImplementedError)
    _assert_same_outcome(flax_outcome, linen_outcome, None)


def _gated(nn):
    class Gated(nn.Module):
        @nn.compact
        def __call__(self, x, train):
            x = nn.BatchNorm(use_running_average=not train)(x)
            return nn.Dense(1)(x)

    class Defaulted(nn.Module):
        @nn.compact
        def __call__(self, x, train, extra=None):
            return Gated()(x, train)

    return Gated, Defaulted


def _remat_cases():
    positional = lambda m: m.init(jax.random.key(0), X, True)
    return {  # (static_argnums, which module, the call)
        **{f'static_argnums={s}': (s, 0, positional) for s in [0, -1, -2, -3, -4, -5, -6, 3]},
        'static_argnums=(2, 5)': ((2, 5), 0, positional),
        'static_argnums=(0, 2)': ((0, 2), 0, positional),
        'static_argnums=(0, -7)': ((0, -7), 0, positional),
        'static argument by keyword': (
            (2,),
            0,
            lambda m: m.init(jax.random.key(0), X, train=True),
        ),
        'every argument by keyword': (
            (2,),
            0,
            lambda m: m.init(jax.random.key(0), x=X, train=True),
        ),
        'defaulted argument left out': ((2, 3), 1, positional),
    }


@pytest.mark.parametrize('case', list(_remat_cases()))
def test_remat_static_argnums_are_placed_on_the_call_as_flax_places_them(case):
    static_argnums, which, call = _remat_cases()[case]

    def run(nn):
        return call(nn.remat(_gated(nn)[which], static_argnums=static_argnums)())

    _assert_same_outcome(
        _outcome(lambda: run(flax_nn)), _outcome(lambda: run(linen_nn)), _assert_same_variables
    )


def test_remat_static_argnums_of_a_decorated_method_are_checked_at_the_call():
    def run(nn):
        class Bad(nn.Module):
            @functools.partial(nn.remat, static_argnums=(3,))
            @nn.compact
            def __call__(self, x, train):
                return nn.Dense(1)(x)

        return Bad().init(jax.random.key(0), X, True)

    _assert_same_outcome(_outcome(lambda: run(flax_nn)), _outcome(lambda: run(linen_nn)), None)


# ------------------------------------------------------- scan / vmap sizes


def _scan_cases(nn):
    class Step(nn.Module):
        @nn.compact
        def __call__(self, c, x):
            self.variable('stats', 'n', jnp.zeros, ())
            return nn.Dense(2)(nn.Dropout(0.5, deterministic=False)(c)), None

    class TwoXs(nn.Module):
        @nn.compact
        def __call__(self, c, x, y):
            return nn.Dense(2)(c), None

    shared = dict(variable_broadcast='params', split_rngs={'params': False})
    stacked = dict(
        variable_axes={'params': 0, 'stats': 0}, split_rngs={'params': True, 'dropout': True}
    )
    c = jnp.ones(2)
    key = jax.random.key(0)
    stacked_vars = nn.scan(Step, length=4, **stacked)().init(RNGS, c, jnp.ones((4, 2)))
    dropout = {'dropout': jax.random.key(2)}

    def applied(length, xs, **kw):
        scan = nn.scan(Step, length=length, **stacked, **kw)()
        return lambda: scan.apply(stacked_vars, c, xs, rngs=dropout)

    return {
        'length disagrees': lambda: nn.scan(TwoXs, length=4, **shared)().init(
            key, c, jnp.ones((3, 2)), jnp.ones((3,))
        ),
        'nothing to scan': lambda: nn.scan(Step, **shared)().init(RNGS, c, None),
        'arguments disagree': lambda: nn.scan(TwoXs, **shared)().init(
            key, c, jnp.ones((3, 2)), jnp.ones((4, 2))
        ),
        'split rngs, length disagrees': lambda: nn.scan(Step, length=4, **stacked)().init(
            RNGS, c, (jnp.ones((3, 2)), jnp.ones((3,)))
        ),
        'split rngs, arguments disagree': lambda: nn.scan(Step, **stacked)().init(
            RNGS, c, (jnp.ones((3, 2)), jnp.ones((4,)))
        ),
        'stacked variables, length disagrees': applied(5, jnp.ones((4, 2))),
        'stacked variables disagree with the arguments': applied(None, jnp.ones((3, 2))),
        'stacked variables, arguments disagree': applied(None, (jnp.ones((3, 2)), jnp.ones((4,)))),
        'stacked variables, nothing to scan': applied(None, None),
        'stacked variables, in_axes=1': applied(None, jnp.ones((2, 3)), in_axes=1),
    }


def _vmap_cases(nn):
    class Param(nn.Module):
        @nn.compact
        def __call__(self):
            return self.param('p', nn.initializers.normal(), (2,))

    class Pair(nn.Module):
        @nn.compact
        def __call__(self, x, y):
            self.variable('stats', 's', jnp.zeros, (2,))
            y = nn.Dropout(0.5, deterministic=False)(nn.Dense(2)(jnp.ones(2)))
            return y * x['b'][..., None] + y

    mapped = dict(variable_axes={'params': 0}, split_rngs={'params': True})
    stacked = {
        'params': {'Dense_0': {'kernel': jnp.ones((3, 2, 2)), 'bias': jnp.ones((3, 2))}},
        'stats': {'s': jnp.ones((5, 2))},
    }
    both = dict(variable_axes={'stats': 0, 'params': 0}, split_rngs={'dropout': True})
    xy = ({'a': jnp.ones(7), 'b': jnp.ones(4)}, jnp.ones(6))
    dropout = {'dropout': jax.random.key(0)}
    return {
        'nothing mapped': lambda: nn.vmap(Param, in_axes=(), **mapped)().init(jax.random.key(0)),
        'nothing mapped, no rng split': lambda: nn.vmap(
            Param, variable_axes={'params': 0}, split_rngs={'params': False}, in_axes=()
        )().init(jax.random.key(0)),
        'sizes disagree': lambda: nn.vmap(Pair, **both)().apply(stacked, *xy, rngs=dropout),
        'sizes disagree, in_axes per leaf': lambda: nn.vmap(
            Pair, in_axes=({'a': None, 'b': 0}, 0), **both
        )().apply(stacked, *xy, rngs=dropout),
        'variables disagree': lambda: nn.vmap(Pair, in_axes=None, **both)().apply(
            stacked, *xy, rngs=dropout
        ),
    }


@pytest.mark.parametrize('case', list(_scan_cases(flax_nn)))
def test_scan_length_errors_say_what_flax_says(case):
    flax_outcome = _outcome(_scan_cases(flax_nn)[case])
    assert flax_outcome[0] == 'raised'
    _assert_same_outcome(flax_outcome, _outcome(_scan_cases(linen_nn)[case]), None)


@pytest.mark.parametrize('case', list(_vmap_cases(flax_nn)))
def test_vmap_axis_size_errors_say_what_flax_says(case):
    flax_outcome = _outcome(_vmap_cases(flax_nn)[case])
    assert flax_outcome[0] == 'raised'
    _assert_same_outcome(flax_outcome, _outcome(_vmap_cases(linen_nn)[case]), None)


# ------------------------------------------------------------- key order


def _body(nn):
    class Body(nn.Module):
        """Variables made in an order that is not sorted, in three collections."""

        @nn.compact
        def __call__(self, x):
            x = nn.Dense(3, name='zeta')(x)  # kernel before bias
            self.sow('intermediates', 'zz', x)
            self.sow('intermediates', 'aa', x)
            self.variable('stats', 'z', jnp.zeros, ())
            self.variable('stats', 'a', jnp.zeros, ())
            return nn.Dense(3, name='alpha')(x)

    return Body


def _lifted(nn, name):
    Body = _body(nn)

    class Step(nn.Module):
        @nn.compact
        def __call__(self, c, x):
            return Body()(c), None

    def inner(mdl, x):
        return Body(name='b')(x)

    per_step = {'stats': 0, 'intermediates': 0}
    return {
        'plain': lambda m, x: Body()(x),
        'scan': lambda m, x: nn.scan(
            Step,
            variable_broadcast='params',
            variable_axes=per_step,
            split_rngs={'params': False},
            length=2,
        )()(x, None)[0],
        'scan, stacked': lambda m, x: nn.scan(
            Step, variable_axes={'params': 0, **per_step}, split_rngs={'params': True}, length=2
        )()(x, None)[0],
        'vmap': lambda m, x: nn.vmap(
            Body, variable_axes={'params': 0, **per_step}, split_rngs={'params': True}
        )()(jnp.stack([x, x])).sum(0),
        'jit': lambda m, x: nn.jit(Body)()(x),
        'remat': lambda m, x: nn.remat(Body)()(x),
        'remat_scan': lambda m, x: nn.remat_scan(Body, lengths=(2,))()(x),
        'map_variables': lambda m, x: nn.map_variables(
            Body, ['params', 'stats', 'intermediates'], init=m.is_initializing(), mutable=True
        )()(x),
        'map_variables of params': lambda m, x: nn.map_variables(
            Body, 'params', init=m.is_initializing()
        )()(x),
        'fold_rngs': lambda m, x: nn.fold_rngs(Body)()(x),
        'add_metadata_axis': lambda m, x: nn.add_metadata_axis(Body, variable_axes={'params': 0})()(
            x
        ),
        'cond': lambda m, x: nn.cond(True, inner, inner, m, x),
        'vjp': lambda m, x: nn.vjp(inner, m, x)[0],
        'custom_vjp': lambda m, x: nn.custom_vjp(
            inner, lambda mdl, x: (inner(mdl, x), None), lambda res, g: ({}, g)
        )(m, x),
    }[name]


def _top(nn, name):
    lifted = _lifted(nn, name)

    class Top(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.Dense(3, name='zz_before')(x)
            x = lifted(self, x)
            self.sow('intermediates', 'top', x)
            return nn.Dense(3, name='aa_after')(x)

    return Top()


def _reverse_sorted(tree):
    """The same tree, every dict's keys in reverse-sorted order (neither library's)."""
    if isinstance(tree, Mapping):
        return {k: _reverse_sorted(tree[k]) for k in sorted(tree, reverse=True)}
    return tree


def _key_order_runs(nn, name):
    top = _top(nn, name)
    x = jnp.ones((2, 3))
    variables = _plain(_top(flax_nn, name).init(RNGS, x))  # both apply Flax's variables
    given = _reverse_sorted({c: v for c, v in variables.items() if c != 'intermediates'})
    return {
        'init': top.init(RNGS, x),
        'apply, mutable stats and intermediates': top.apply(
            given, x, mutable=['stats', 'intermediates']
        )[1],
        'apply, everything mutable': top.apply(given, x, mutable=True)[1],
    }


CHANGED = [
    'scan',
    'map_variables',
    'map_variables of params',
    'fold_rngs',
    'add_metadata_axis',
    'custom_vjp',
]
ALREADY_ORDERED = ['plain', 'scan, stacked', 'vmap', 'jit', 'remat', 'remat_scan', 'cond', 'vjp']


@pytest.mark.parametrize('name', CHANGED)
def test_new_variables_come_out_of_a_lifted_transform_in_flax_order(name):
    flax_runs, linen_runs = _key_order_runs(flax_nn, name), _key_order_runs(linen_nn, name)
    for stage, flax_vars in flax_runs.items():
        _assert_same_variables(flax_vars, linen_runs[stage])


def test_every_lifted_transform_keeps_and_adds_keys_as_flax():
    for name in CHANGED + ALREADY_ORDERED:
        flax_runs, linen_runs = _key_order_runs(flax_nn, name), _key_order_runs(linen_nn, name)
        for stage, flax_vars in flax_runs.items():
            # linen's nn.jit keeps the parameters of the model without it (documented).
            values = not (name == 'jit' and stage == 'init')
            _assert_same_variables(flax_vars, linen_runs[stage], values=values)


@pytest.mark.parametrize('cell', ['LSTMCell', 'GRUCell', 'OptimizedLSTMCell'])
def test_rnn_parameters_come_in_flax_order(cell):
    def run(nn):
        rnn = nn.Bidirectional(nn.RNN(getattr(nn, cell)(4)), nn.RNN(getattr(nn, cell)(4)))
        return rnn.init(jax.random.key(0), jnp.ones((2, 5, 3)))

    _assert_same_variables(run(flax_nn), run(linen_nn))


# ------------------------------------------- nn.jvp, nn.vjp, nn.custom_vjp: fields


def _field_holders(nn):
    from typing import Any

    class Holder(nn.Module):
        sub: Any = None

        @nn.compact
        def __call__(self, x):
            subs = self.sub if isinstance(self.sub, (list, dict)) else [self.sub]
            if isinstance(subs, dict):
                subs = list(subs.values())
            y = nn.Dense(4)(x)
            for sub in subs:
                if isinstance(sub, nn.Variable):
                    y = y * sub.value
                else:
                    y = y + (0.0 if sub is None else sub(x))
            return y

    class Made(nn.Module):
        def setup(self):
            self.dense = nn.Dense(4)
            self.holder = Holder()

        def __call__(self, x):
            return self.dense(x) + self.holder(x)

    def variable(parent):
        return parent.variable('state', 'scale', lambda: jnp.full((), 2.0))

    # (each is called with the module that makes the holder, or with None outside one)
    return {
        'field': lambda _: Holder(sub=nn.Dense(4)),
        'list': lambda _: Holder(sub=[nn.Dense(4)]),
        'dict': lambda _: Holder(sub={'a': nn.Dense(4)}),
        'no_module': lambda _: Holder(),
        'made_inside': lambda _: Made(),
        # A Variable of the parent's, as Flax refuses it too (only made by a parent).
        'variable': lambda parent: Holder(sub=variable(parent)),
        'variable_list': lambda parent: Holder(sub=[variable(parent)]),
        'variable_dict': lambda parent: Holder(sub={'a': variable(parent)}),
    }


def _call(mdl, x):
    return mdl(x)


def _custom_vjp_of_call(nn):
    """``nn.custom_vjp`` of ``mdl(x)`` whose rules are ``nn.vjp``'s own."""

    def fwd(mdl, x):
        return nn.vjp(_call, mdl, x)

    def bwd(vjp_fn, t):
        return vjp_fn(t)

    return nn.custom_vjp(_call, forward_fn=fwd, backward_fn=bwd)


def _lifted_derivative(nn, transform, make, adopted):
    def call(body, x):
        if transform == 'jvp':
            params = body.variables.get('params', {})
            tangents = {'params': jax.tree_util.tree_map(jnp.ones_like, params)}
            y, t = nn.jvp(_call, body, (x,), (jnp.ones_like(x),), tangents)
            return y + t
        if transform == 'vjp':
            y, vjp_fn = nn.vjp(_call, body, x)
            grads, gx = vjp_fn(jnp.ones_like(y))
            return y + gx + sum(jnp.sum(g) for g in jax.tree_util.tree_leaves(grads))
        return _custom_vjp_of_call(nn)(body, x)

    class Top(nn.Module):
        body: nn.Module | None = None

        @nn.compact
        def __call__(self, x):
            return call(self.body if adopted else make(self), x)

    return Top(body=make(None)) if adopted else Top()


# A Variable is made by a module, so only a parent can hand one to the holder.
_HOLDERS = [
    pytest.param(holder, adopted, id=f'{holder}-{"adopted" if adopted else "made_by_parent"}')
    for holder in ('field', 'list', 'dict', 'no_module', 'made_inside')
    for adopted in (False, True)
] + [
    pytest.param(holder, False, id=f'{holder}-made_by_parent')
    for holder in ('variable', 'variable_list', 'variable_dict')
]


@pytest.mark.parametrize('holder, adopted', _HOLDERS)
@pytest.mark.parametrize('transform', ['jvp', 'vjp', 'custom_vjp'])
def test_derivatives_refuse_module_fields_as_flax(transform, holder, adopted):
    def run(nn):
        model = _lifted_derivative(nn, transform, _field_holders(nn)[holder], adopted)
        variables = model.init(RNGS, X)
        y = model.apply(variables, X)
        grads = jax.grad(lambda v: jnp.sum(model.apply(v, X)))(variables)
        return {'variables': variables, 'y': y, 'grads': grads}

    flax_outcome, linen_outcome = _outcome(lambda: run(flax_nn)), _outcome(lambda: run(linen_nn))
    if holder in ('field', 'list', 'dict') or holder.startswith('variable'):
        assert flax_outcome[0] == 'raised' and isinstance(flax_outcome[1], NotImplementedError)
        assert 'instead of passing it as a field' in str(linen_outcome[1])
    else:
        assert flax_outcome[0] == 'ok', flax_outcome
    _assert_same_outcome(flax_outcome, linen_outcome, _assert_same_values)


# ------------- nn.vjp, nn.jvp, nn.grad, nn.value_and_grad, nn.cond, nn.switch: variables=, rngs=


def _filtered(nn, transform, filters):
    class Body(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.Dense(4)(x)
            x = nn.BatchNorm(use_running_average=not self.is_initializing())(x)
            return nn.Dropout(0.5, deterministic=False)(x)

    def fn(mdl, x):
        return mdl(x)

    def call(body, x, kw):
        if transform == 'vjp':
            y, vjp_fn = nn.vjp(fn, body, x, **kw)
            return y + vjp_fn(jnp.ones_like(y))[1]
        if transform == 'jvp':
            y, t = nn.jvp(fn, body, (x,), (jnp.ones_like(x),), {}, **kw)
            return y + t
        if transform == 'cond':
            return nn.cond(jnp.sum(x) > 0, fn, lambda mdl, x: 2 * mdl(x), body, x, **kw)
        if transform == 'switch':
            return nn.switch(1, [fn, lambda mdl, x: 2 * mdl(x)], body, x, **kw)
        scalar = lambda mdl, x: jnp.sum(mdl(x))
        if transform == 'grad':
            return x + nn.grad(scalar, body, x, **kw)[0]
        return x + nn.value_and_grad(scalar, body, x, **kw)[1][0]

    class Top(nn.Module):
        @nn.compact
        def __call__(self, x):
            # The filters apply from the first apply on: init makes every collection.
            return call(Body(), x, {} if self.is_initializing() else filters)

    return Top()


# (filters, whether the body reaches something they leave out: Flax refuses it)
FILTERS = {
    'no_batch_stats': ({'variables': 'params'}, True),
    'both_collections': ({'variables': ['params', 'batch_stats']}, False),
    'no_rngs': ({'rngs': False}, True),
    'dropout_rng': ({'rngs': 'dropout'}, False),
    'other_rng': ({'rngs': 'params'}, True),
}


def _init_and_apply_as_flax(make, refused: bool) -> None:
    """``init`` and a mutable ``apply`` of ``make(nn)`` on both libraries: both refuse
    (``refused``; the same error class, as the message names the scope by its path,
    which Flax words otherwise) or both give the same variables, output and state."""

    def run(nn):
        model = make(nn)
        variables = model.init(RNGS, X)
        y, state = model.apply(variables, X, rngs={'dropout': jax.random.key(2)}, mutable=True)
        return {'variables': variables, 'y': y, 'state': state}

    flax_outcome, linen_outcome = _outcome(lambda: run(flax_nn)), _outcome(lambda: run(linen_nn))
    assert (flax_outcome[0] == 'raised') == refused, flax_outcome
    if refused:
        assert type(linen_outcome[1]).__name__ == type(flax_outcome[1]).__name__, linen_outcome
    else:
        _assert_same_outcome(flax_outcome, linen_outcome, _assert_same_values)


@pytest.mark.parametrize('case', list(FILTERS))
@pytest.mark.parametrize('transform', ['vjp', 'jvp', 'grad', 'value_and_grad', 'cond', 'switch'])
def test_lifted_transforms_apply_their_variables_and_rngs_filters_as_flax(transform, case):
    filters, refused = FILTERS[case]

    _init_and_apply_as_flax(lambda nn: _filtered(nn, transform, filters), refused)


# --------------------------- nn.grad, nn.value_and_grad: modules in fields, lifted


@pytest.mark.parametrize('jit', [False, True], ids=['eager', 'jit'])
@pytest.mark.parametrize('adopted', [False, True], ids=['made_by_parent', 'adopted'])
@pytest.mark.parametrize('storage', ['field', 'list'])
@pytest.mark.parametrize('transform', ['grad', 'value_and_grad'])
def test_grad_lifts_field_modules_that_update_their_state_as_flax(transform, storage, adopted, jit):
    def run(nn):
        from typing import Any

        class Holder(nn.Module):
            sub: Any

            @nn.compact
            def __call__(self, x):
                sub = self.sub[0] if isinstance(self.sub, (list, tuple)) else self.sub
                return sub(nn.Dense(4)(x))

        def make():
            norm = nn.BatchNorm(use_running_average=False, momentum=0.5)
            return Holder(sub=[norm] if storage == 'list' else norm)

        def scalar(mdl, x):
            y = mdl(x)
            return jnp.sum(y * y), y

        class Top(nn.Module):
            body: Any = None

            @nn.compact
            def __call__(self, x):
                body = self.body if adopted else make()
                if transform == 'grad':
                    (gx,), y = nn.grad(scalar, body, x, has_aux=True)
                else:
                    (_, y), (gx,) = nn.value_and_grad(scalar, body, x, has_aux=True)
                return y + 0.5 * gx

        model = Top(body=make()) if adopted else Top()
        variables = model.init(RNGS, X)
        apply = lambda v: model.apply(v, X, mutable=['batch_stats'])
        y, state = (jax.jit(apply) if jit else apply)(variables)
        grads = jax.grad(lambda v: jnp.sum(apply(v)[0]))(variables)
        return {'variables': variables, 'y': y, 'state': state, 'grads': grads}

    flax_outcome, linen_outcome = _outcome(lambda: run(flax_nn)), _outcome(lambda: run(linen_nn))
    assert flax_outcome[0] == 'ok', flax_outcome
    _assert_same_outcome(flax_outcome, linen_outcome, _assert_same_values)


# ------------------------------------------ nn.vmap, nn.scan: in_axes given as a list


def _mapped(nn, transform, in_axes, extra_mapped):
    class Cell(nn.Module):
        @nn.compact
        def __call__(self, c, x, extra):
            y = nn.Dense(4)(x) + extra[0] * extra[1]
            return (c + y, y) if transform == 'scan' else y

    common = {'split_rngs': {'params': False}, 'in_axes': in_axes}
    if transform == 'scan':
        lifted = nn.scan(Cell, variable_broadcast='params', **common)
    else:
        lifted = nn.vmap(Cell, variable_axes={'params': None}, **common)

    class Top(nn.Module):
        @nn.compact
        def __call__(self, xs):
            first = jnp.full(xs.shape if extra_mapped else xs.shape[1:], 2.0)
            out = lifted()(jnp.zeros(4), xs, [first, jnp.float32(3.0)])
            return {'carry': out[0], 'ys': out[1]} if transform == 'scan' else out

    return Top()


# (in_axes of (state, xs, extra) for nn.vmap, of (xs, extra) for nn.scan, whose carry
# has none; whether Flax refuses it). `extra` is a list: its own axes may be a list.
AXES = {
    'tuple': ((None, 0, None), False),
    'tuple_holding_a_list': ((None, 0, [0, None]), False),
    'list': ([None, 0, [0, None]], True),
    'list_of_one_axis_each': ([None, 0, None], True),
}


def _scan_axes(nn, axes):
    """The same axes for ``nn.scan``: none for the carry, ``nn.broadcast`` for None."""
    unmapped = lambda a: nn.broadcast if a is None else a
    return type(axes)(
        [unmapped(b) for b in a] if isinstance(a, list) else unmapped(a) for a in axes[1:]
    )


@pytest.mark.parametrize('case', list(AXES))
@pytest.mark.parametrize('transform', ['vmap', 'scan'])
def test_in_axes_given_as_a_list_is_refused_as_flax(transform, case):
    in_axes, refused = AXES[case]

    def run(nn):
        axes = _scan_axes(nn, in_axes) if transform == 'scan' else in_axes
        model = _mapped(nn, transform, axes, extra_mapped=isinstance(in_axes[2], list))
        xs = jnp.arange(12.0).reshape(3, 4)
        variables = model.init(RNGS, xs)
        return {'variables': variables, 'y': model.apply(variables, xs)}

    flax_outcome, linen_outcome = _outcome(lambda: run(flax_nn)), _outcome(lambda: run(linen_nn))
    assert (flax_outcome[0] == 'raised') == refused, flax_outcome
    if refused:  # Flax's message is JAX's pytree structure error; linen's says what to pass
        assert isinstance(flax_outcome[1], ValueError), flax_outcome
        assert isinstance(linen_outcome[1], ValueError), linen_outcome
        assert f'nn.{transform}: in_axes is the list' in str(linen_outcome[1])
        assert 'pass in_axes=(' in str(linen_outcome[1])
    else:
        _assert_same_outcome(flax_outcome, linen_outcome, _assert_same_values)


# ------------------------------ nn.while_loop: what the body sees of the collections


def _looped(nn, uses, kw):
    class Body(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.Dense(4)(x)
            if 'batch_stats' in uses:
                x = nn.BatchNorm(use_running_average=True)(x)
            if 'counter' in uses:
                n = self.variable('counter', 'n', lambda: jnp.zeros((), jnp.int32))
                if not self.is_initializing():
                    n.value += 1
            if 'dropout' in uses:
                x = nn.Dropout(0.5, deterministic=False)(x)
            return x

    class Top(nn.Module):
        @nn.compact
        def __call__(self, x):
            body = Body()
            if self.is_initializing():
                return body(x)
            step = lambda mdl, c: (c[0] + 1, mdl(c[1]))
            return nn.while_loop(lambda mdl, c: c[0] < 3, step, body, (0, x), **kw)[1]

    return Top()


# (what the body uses besides params, the loop's arguments, whether Flax refuses it)
LOOPS = {
    'defaults': ((), {}, False),
    'broadcast_params_reads_batch_stats': (
        ('batch_stats',),
        {'broadcast_variables': 'params'},
        True,
    ),
    'broadcast_both': (('batch_stats',), {'broadcast_variables': ['params', 'batch_stats']}, False),
    'broadcast_nothing': ((), {'broadcast_variables': False}, True),
    'carry_params_only': ((), {'carry_variables': 'params', 'broadcast_variables': False}, False),
    'dropout_not_named': (('dropout',), {}, True),
    'dropout_split': (('dropout',), {'split_rngs': {'dropout': True}}, False),
    'dropout_not_split': (('dropout',), {'split_rngs': {'dropout': False}}, False),
    'every_stream_split': (('dropout',), {'split_rngs': {True: True}}, False),
    'counter_carried': (('counter',), {'carry_variables': 'counter'}, False),
    'counter_not_carried': (('counter',), {}, True),
    'counter_carried_params_broadcast': (
        ('counter',),
        {'carry_variables': 'counter', 'broadcast_variables': 'params'},
        False,
    ),
}


@pytest.mark.parametrize('case', list(LOOPS))
def test_while_loop_body_sees_the_carried_and_broadcast_collections_as_flax(case):
    uses, kw, refused = LOOPS[case]

    _init_and_apply_as_flax(lambda nn: _looped(nn, uses, kw), refused)


def _nested_derivative_model(nn, layer: str, derivative: str):
    """A module applying ``derivative`` to ``layer`` (made in the function's module),
    shared and called twice under ``nn.vmap``: a gradient of it is reverse over
    reverse (or over forward, for ``jvp``) through the layer."""
    make = {
        'LayerNorm': lambda: nn.LayerNorm(),
        'RMSNorm': lambda: nn.RMSNorm(),
        'GroupNorm': lambda: nn.GroupNorm(num_groups=1),
        'Dense': lambda: nn.Dense(3),
    }[layer]

    class Derived(nn.Module):
        @nn.compact
        def __call__(self, x):
            body = make()

            def fn(mdl, x):
                y = mdl(x)
                return jnp.sum(y * y), y

            if derivative == 'grad':
                (gx,), y = nn.grad(fn, body, x, has_aux=True)
            elif derivative == 'vjp':
                y, bwd = nn.vjp(lambda mdl, x: mdl(x), body, x)
                _, gx = bwd(jnp.ones_like(y))
            else:
                y, gx = nn.jvp(lambda mdl, x: mdl(x), body, (x,), (jnp.ones_like(x),), {})
            return y + 0.5 * gx

    class Twice(nn.Module):
        @nn.compact
        def __call__(self, x):
            shared = Derived()
            return shared(shared(x))

    return nn.vmap(Twice, variable_axes={'params': 0}, split_rngs={'params': True}, in_axes=0)()


@pytest.mark.parametrize('derivative', ['grad', 'vjp', 'jvp'])
@pytest.mark.parametrize('layer', ['LayerNorm', 'RMSNorm', 'GroupNorm', 'Dense'])
def test_gradient_through_a_lifted_derivative_is_flaxs_to_the_bit(layer, derivative):
    x = jax.random.normal(jax.random.key(3), (4, 3))
    theirs = _nested_derivative_model(flax_nn, layer, derivative)
    ours = _nested_derivative_model(linen_nn, layer, derivative)
    params = theirs.init(jax.random.key(0), x)['params']

    def gradient(model):
        return jax.grad(lambda p: jnp.sum(model.apply({'params': p}, x)))

    for what, run in (('eager', lambda f: f), ('jitted', jax.jit)):
        _assert_same_tree(run(gradient(ours))(params), run(gradient(theirs))(params), what)


def _input_gradient_model(nn, inner: str):
    """A module adding to a child's output the gradient of the child's squared output
    with respect to the input, taken with the user's own ``jax.grad`` inside the
    module (a gradient penalty): the child is ``inner``, a layer under a lifted
    transform, called a second time under JAX's transform."""

    def fn(mdl, x):
        return mdl(x)

    class Child(nn.Module):
        @nn.compact
        def __call__(self, x):
            body = nn.LayerNorm() if inner == 'cond' else nn.Dense(3)
            if inner == 'custom_vjp':
                return nn.custom_vjp(
                    fn, forward_fn=lambda mdl, x: nn.vjp(fn, mdl, x),
                    backward_fn=lambda vjp_fn, t: vjp_fn(t),
                )(body, x)  # fmt: skip
            if inner == 'vjp':
                return nn.vjp(fn, body, x)[0]
            if inner == 'jvp':
                y, t = nn.jvp(fn, body, (x,), (jnp.ones_like(x),), {})
                return y + 0.5 * t
            if inner == 'cond':
                return nn.cond(jnp.sum(x) > 0, fn, lambda mdl, x: -fn(mdl, x), body, x)
            lifted = {
                'jit': lambda: nn.jit(nn.Dense)(3),
                'remat': lambda: nn.remat(nn.Dense)(3),
                'vmap': lambda: nn.vmap(
                    nn.Dense, variable_axes={'params': None}, split_rngs={'params': False}
                )(3),
            }[inner]()
            return lifted(x)

    class Penalized(nn.Module):
        @nn.compact
        def __call__(self, x):
            child = Child()
            return child(x) + 0.125 * jax.grad(lambda v: jnp.sum(child(v) ** 2))(x)

    return Penalized()


@pytest.mark.parametrize('inner', ['jit', 'remat', 'vmap', 'cond', 'vjp', 'jvp', 'custom_vjp'])
def test_lifted_transforms_under_the_users_own_grad_are_flaxs_to_the_bit(inner):
    """A gradient penalty written with ``jax.grad`` inside a module, over a child under
    a lifted transform, and the gradient of that with respect to the parameters
    (reverse over reverse, the inner derivative reaching the layer through its input
    only): Flax's values, eager and jitted, on the same parameters (linen's ``init``'s).

    ``init`` is compared with Flax's except for ``nn.jit`` (linen keeps the parameters
    of the model without it: documented) and ``nn.custom_vjp``, whose second call
    under ``jax.grad`` makes Flax's ``init`` hand back leaked tracers as parameters
    (fuzz D5, docs/differences.md); linen's are arrays."""
    x = jax.random.normal(jax.random.key(3), (4, 3))
    theirs, ours = _input_gradient_model(flax_nn, inner), _input_gradient_model(linen_nn, inner)
    params = ours.init(jax.random.key(0), x)['params']
    assert all(type(leaf) is type(x) for leaf in jax.tree_util.tree_leaves(params))
    if inner not in ('jit', 'custom_vjp'):
        _assert_same_tree(params, theirs.init(jax.random.key(0), x)['params'])

    def outputs(model):
        def loss(p):
            return jnp.sum(model.apply({'params': p}, x) ** 2)

        return lambda p: (model.apply({'params': p}, x), jax.grad(loss)(p))

    for what, run in (('eager', lambda f: f), ('jitted', jax.jit)):
        _assert_same_tree(run(outputs(ours))(params), run(outputs(theirs))(params), what)


# ------------------- nn.vmap, nn.scan: the rng streams split_rngs names, and only those


def _stream_reader(nn, transform: str, split_rngs: dict, strict: bool):
    """A ``Dense`` and a ``Dropout`` under ``transform``, deterministic where the body
    has no ``dropout`` stream (``has_rng``) unless ``strict`` (then it draws one)."""

    class Body(nn.Module):
        @nn.compact
        def __call__(self, x):
            deterministic = not (strict or self.has_rng('dropout'))
            return nn.Dropout(0.5, deterministic=deterministic)(nn.Dense(4)(x))

    class Step(nn.Module):
        @nn.compact
        def __call__(self, carry, x):
            y = Body()(x)
            return carry + y, y

    class Top(nn.Module):
        @nn.compact
        def __call__(self, x):
            if transform == 'vmap':
                return nn.vmap(Body, variable_axes={'params': 0}, split_rngs=split_rngs)()(x)
            scan = nn.scan(Step, variable_broadcast='params', split_rngs=split_rngs)
            return scan()(jnp.zeros(x.shape[1:]), x)[1]

    return Top()


STREAMS = {
    'only_params': ({}, False),
    'dropout_split': ({'dropout': True}, False),
    'dropout_shared': ({'dropout': False}, False),
    'every_stream_split': ({True: True}, False),
    'only_params_strict': ({}, True),
    'dropout_split_strict': ({'dropout': True}, True),
}


@pytest.mark.parametrize('case', list(STREAMS))
@pytest.mark.parametrize('transform', ['vmap', 'scan'])
def test_vmap_and_scan_bodies_see_only_the_streams_split_rngs_names_as_flax(transform, case):
    """A stream no ``split_rngs`` filter names is not in the body: ``has_rng`` says
    False (a layer choosing ``deterministic`` by it runs as in Flax) and drawing from
    it is Flax's ``InvalidRngError``."""
    streams, strict = STREAMS[case]
    split_rngs = {'params': transform == 'vmap', **streams}
    refused = strict and not streams
    _init_and_apply_as_flax(lambda nn: _stream_reader(nn, transform, split_rngs, strict), refused)


# ------------------------------- a gradient penalty over a layer called twice (F37)


def _shared_layer_model(nn, layer: str, inside: bool):
    """``x + f(f(x))`` for one instance ``f`` of ``layer``; ``inside``: plus the
    gradient of its squared output over ``x``, taken with ``jax.grad`` in the module."""
    make = {
        'LayerNorm': lambda: nn.LayerNorm(),
        'RMSNorm': lambda: nn.RMSNorm(),
        'GroupNorm': lambda: nn.GroupNorm(num_groups=1),
        'Dense': lambda: nn.Dense(3),
        'SelfAttention': lambda: nn.MultiHeadDotProductAttention(
            num_heads=1, qkv_features=4, out_features=3
        ),
    }[layer]

    class Shared(nn.Module):
        @nn.compact
        def __call__(self, x):
            f = make()
            y = x + f(f(x))
            if inside:
                y = y + 0.125 * jax.grad(lambda v: jnp.sum(f(f(v)) ** 2))(x)
            return y

    return Shared()


@pytest.mark.parametrize('inside', [False, True], ids=['penalty_outside', 'penalty_inside'])
@pytest.mark.parametrize('layer', ['LayerNorm', 'RMSNorm', 'GroupNorm', 'Dense', 'SelfAttention'])
def test_gradient_penalty_over_a_layer_called_twice_is_flaxs_to_the_bit(layer, inside):
    """The gradient with respect to the parameters of the squared input gradient (a
    gradient penalty), through one layer instance called twice: under JAX 0.12 linen's
    staged calls in the first call (its input carrying the inner derivative, its
    parameters the outer) summed the parameters' cotangents in another grouping than
    Flax (fuzz finding F37; a length-3 input shows it in the values)."""
    shape = (2, 3) if layer in ('GroupNorm', 'SelfAttention') else (3,)
    x = jax.random.normal(jax.random.key(0), shape)
    theirs = _shared_layer_model(flax_nn, layer, inside)
    ours = _shared_layer_model(linen_nn, layer, inside)
    params = theirs.init(jax.random.key(0), x)['params']
    _assert_same_tree(ours.init(jax.random.key(0), x)['params'], params, 'init')

    def penalty(model):
        def output(p, x):
            return jnp.sum(model.apply({'params': p}, x))

        return jax.grad(lambda p: jnp.sum(jax.grad(output, argnums=1)(p, x) ** 2))

    for what, run in (('eager', lambda f: f), ('jitted', jax.jit)):
        _assert_same_tree(run(penalty(ours))(params), run(penalty(theirs))(params), what)


def _mapped_stream_reader(nn, rngs, strict: bool):
    """``_stream_reader``'s body under ``nn.map_variables(..., rngs=rngs)``."""

    class Body(nn.Module):
        @nn.compact
        def __call__(self, x):
            deterministic = not (strict or self.has_rng('dropout'))
            return nn.Dropout(0.5, deterministic=deterministic)(nn.Dense(4)(x))

    class Top(nn.Module):
        @nn.compact
        def __call__(self, x):
            mapped = nn.map_variables(Body, 'params', init=self.is_initializing(), rngs=rngs)
            return mapped()(x)

    return Top()


MAPPED_STREAMS = {
    'every_stream': (True, False, False),
    'params_only': (['params'], False, False),
    'params_only_strict': (['params'], True, True),
    'params_and_dropout': (['params', 'dropout'], True, False),
    'no_stream': (False, False, True),
}


@pytest.mark.parametrize('case', list(MAPPED_STREAMS))
def test_map_variables_body_sees_only_the_streams_rngs_admits_as_flax(case):
    """``nn.map_variables``' ``rngs=`` filter: the others are not in the body (linen
    passed every stream)."""
    rngs, strict, refused = MAPPED_STREAMS[case]
    _init_and_apply_as_flax(lambda nn: _mapped_stream_reader(nn, rngs, strict), refused)


def _collection_prober(nn, transform, filters):
    """A body that makes its 'consts' and 'state' variables only where it may (so each
    filter runs), counts in 'state', sows, and returns what it sees, under
    ``nn.map_variables`` (of 'params') or ``nn.fold_rngs`` with ``filters``."""

    class Body(nn.Module):
        @nn.compact
        def __call__(self, x):
            seen = [self.has_variable('consts', 'c'), self.has_variable('state', 'count')]
            changes = [self.is_mutable_collection(c) for c in ('consts', 'state', 'params')]
            streams = [self.has_rng('dropout'), self.has_rng('params')]
            c = (
                self.variable('consts', 'c', jnp.full, (1, 4), 2.0)
                if seen[0] or changes[0]
                else None
            )
            if seen[1] or changes[1]:
                count = self.variable('state', 'count', jnp.zeros, ())
                if changes[1] and not self.is_initializing():
                    count.value += 1
            self.sow('intermediates', 'x', x)
            y = nn.Dense(4)(x) * (1.0 if c is None else c.value)
            if streams[0]:
                y = y + jax.random.uniform(self.make_rng('dropout'), y.shape)
            return y, jnp.array(seen + changes + streams)

    class Top(nn.Module):
        @nn.compact
        def __call__(self, x):
            if transform == 'map_variables':
                init = self.is_initializing()
                return nn.map_variables(Body, 'params', init=init, **filters)()(x)
            return getattr(nn, transform)(Body, **filters)()(x)

    return Top()


# (filters, whether Flax's init refuses them: the body needs what they leave out)
COLLECTION_FILTERS = {
    'map_variables': {
        'every_collection': ({}, False),
        'params_only': ({'variables': 'params'}, False),
        'none': ({'variables': False}, False),
        'params_and_consts': ({'variables': ['params', 'consts']}, False),
        'state_only': ({'variables': 'state'}, False),
        'state_and_consts_mutable': ({'variables': ['state', 'consts'], 'mutable': True}, False),
        'consts_mutable': ({'variables': 'consts', 'mutable': True}, False),
        'params_without_their_stream': ({'variables': 'params', 'rngs': 'dropout'}, True),
    },
    'fold_rngs': {
        'params_only': ({'variables': 'params'}, False),
        'params_and_consts': ({'variables': ['params', 'consts']}, False),
        'params_stream': ({'rngs': 'params'}, False),
        'dropout_stream': ({'rngs': 'dropout'}, True),
        'nothing': ({'variables': False, 'rngs': False}, True),
    },
}
# nn.jit, nn.remat and nn.checkpoint take the same two filters.
for _transform in ('jit', 'remat', 'checkpoint'):
    COLLECTION_FILTERS[_transform] = {
        'params_only': ({'variables': 'params'}, False),
        'state_only': ({'variables': 'state'}, True),
        'params_and_consts': ({'variables': ['params', 'consts']}, False),
        'params_stream': ({'rngs': 'params'}, False),
        'dropout_stream': ({'rngs': 'dropout'}, True),
        'params_state_and_both_streams': (
            {'variables': ['params', 'state'], 'rngs': ['params', 'dropout']},
            False,
        ),
    }


@pytest.mark.parametrize(
    'transform,case', [(t, c) for t, cases in COLLECTION_FILTERS.items() for c in cases]
)
def test_lifted_transforms_apply_their_variables_filter_as_flax(transform, case):
    """``nn.map_variables``' ``variables=`` and the ``variables=`` and ``rngs=`` of
    ``nn.fold_rngs``, ``nn.jit``, ``nn.remat`` and ``nn.checkpoint``: the body sees (and
    changes) only the collections admitted (for ``map_variables``, with the mapped
    ones) and only the streams admitted; linen accepted the filters and showed it
    everything. Flax's ``nn.jit`` draws other parameters and noise (documented), so
    there the shapes and what the body sees are compared."""
    filters, refused = COLLECTION_FILTERS[transform][case]
    assert (
        _outcome(lambda: _collection_prober(flax_nn, transform, filters).init(RNGS, X))[0]
        == 'raised'
    ) == refused

    def run(nn, mutable, given):
        model = _collection_prober(nn, transform, filters)
        variables = model.init(RNGS, X)
        passed = {c: v for c, v in variables.items() if c in given}
        applied = model.apply(passed, X, rngs={'dropout': RNGS['dropout']}, mutable=mutable)
        return {'variables': variables, 'applied': applied}

    every = ('params', 'consts', 'state')
    for mutable, given in (
        (False, every),
        (['state', 'intermediates'], every),
        (['consts', 'state'], ('params',)),
    ):
        flax_outcome = _outcome(functools.partial(run, flax_nn, mutable, given))
        linen_outcome = _outcome(functools.partial(run, linen_nn, mutable, given))
        if flax_outcome[0] == 'raised':  # the same class (Flax words the path otherwise)
            assert type(linen_outcome[1]).__name__ == type(flax_outcome[1]).__name__, (
                flax_outcome,
                linen_outcome,
            )
        elif transform == 'jit':
            _assert_same_outcome(flax_outcome, linen_outcome, _assert_same_shapes_and_seen)
        else:
            _assert_same_outcome(flax_outcome, linen_outcome, _assert_same_tree)


def _assert_same_shapes_and_seen(expected, got) -> None:
    """The same tree of the same shapes, and the same report of what the body saw."""
    shapes = functools.partial(jax.tree_util.tree_map, np.shape)
    assert shapes(got) == shapes(expected)
    out, flax_out = got['applied'], expected['applied']
    if isinstance(out[0], tuple):  # (output, mutated variables)
        out, flax_out = out[0], flax_out[0]
    np.testing.assert_array_equal(out[1], flax_out[1])


def _multi_scope_vjp(nn, holder: str, has_aux: bool):
    """``nn.vjp(..., multi_scope=True)`` of a module holding Modules in its fields."""

    class One(nn.Module):
        inner: nn.Module

        @nn.compact
        def __call__(self, x):
            return nn.Dense(4)(self.inner(x))

    class Two(nn.Module):
        a: nn.Module
        b: nn.Module

        @nn.compact
        def __call__(self, x):
            return nn.Dense(4)(self.b(nn.relu(self.a(x))))

    class Plain(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(4)(x)

    class Top(nn.Module):
        @nn.compact
        def __call__(self, x):
            mdl = {
                'plain': lambda: Plain(),
                'one_field': lambda: One(nn.Dense(4)),
                'two_fields': lambda: Two(nn.Dense(4, name='first'), nn.Dense(4, name='second')),
                'nested': lambda: One(One(nn.Dense(4))),
            }[holder]()

            def fn(m, x):
                y = m(x)
                return (y, jnp.sum(y)) if has_aux else y

            out = nn.vjp(fn, mdl, x, has_aux=has_aux, multi_scope=True)
            grads = out[1](jnp.ones((3, 4)))
            return out[0], grads, out[2:]

    return Top()


@pytest.mark.parametrize('has_aux', [False, True], ids=['plain', 'aux'])
@pytest.mark.parametrize('holder', ['plain', 'one_field', 'two_fields', 'nested'])
def test_vjp_multi_scope_lifts_field_modules_as_flax(holder, has_aux):
    """``multi_scope=True``: the field modules' scopes are lifted too and the variable
    cotangents come as a list, one dict per scope, the module's own last (linen
    ignored the flag: the module's fields were refused)."""

    def run(nn):
        model = _multi_scope_vjp(nn, holder, has_aux)
        variables = model.init(RNGS, X)
        return {'variables': variables, 'out': model.apply(variables, X)}

    flax_outcome, linen_outcome = _outcome(lambda: run(flax_nn)), _outcome(lambda: run(linen_nn))
    assert flax_outcome[0] == 'ok', flax_outcome
    _assert_same_outcome(flax_outcome, linen_outcome, _assert_same_tree)


# ------------------------- split_rngs: the first filter, in the mapping's order, decides


SPLIT_ORDERS = {
    'named_false_first': {'dropout': False, True: True},
    'true_first': {True: True, 'dropout': False},
    'params_false_first': {'params': False, True: True},
}


@pytest.mark.parametrize('order', list(SPLIT_ORDERS))
@pytest.mark.parametrize('transform', ['scan', 'vmap'])
def test_overlapping_split_rngs_filters_resolve_in_order_as_flax(transform, order):
    """Flax groups rng streams by the filters of ``split_rngs`` in order: the first that
    names a stream decides whether it is split. linen split a stream whenever any
    filter naming it said True, so ``{'dropout': False, True: True}`` gave every step
    its own dropout draw where Flax gives each the same one."""
    split = SPLIT_ORDERS[order]

    def run(nn):
        class Step(nn.Module):
            @nn.compact
            def __call__(self, c, x):
                return c, jax.random.uniform(self.make_rng('dropout'), (2,))

        class Mapped(nn.Module):
            @nn.compact
            def __call__(self, x):
                w = self.param('w', lambda key: jax.random.uniform(key, ()))
                return jax.random.uniform(self.make_rng('dropout'), (2,)) + w

        class Top(nn.Module):
            @nn.compact
            def __call__(self, x):
                if transform == 'scan':
                    scan = nn.scan(Step, split_rngs=split, variable_broadcast='params')
                    return scan()(0.0, x)[1]
                return nn.vmap(Mapped, split_rngs=split, variable_axes={'params': 0})()(x)

        rngs = {'params': jax.random.key(0), 'dropout': jax.random.key(1)}
        return Top().init_with_output(rngs, jnp.ones((3, 4)))

    (flax_y, flax_vars), (linen_y, linen_vars) = run(flax_nn), run(linen_nn)
    _assert_same_tree(linen_y, flax_y)
    _assert_same_values(flax_vars, linen_vars)
    if transform == 'scan':
        # A shared stream draws the same numbers at every step; a split one does not.
        rows = np.asarray(linen_y)
        assert bool(np.all(rows == rows[0])) == (order == 'named_false_first')


# ------------- nn.scan: what the body writes to a broadcast collection must not vary


def _broadcast_writer(nn, source: str, collection: str, when: str):
    """A scan whose step creates (``when='create'``) or updates (``'update'``: after
    ``init``) a variable of the broadcast ``collection`` from ``source``."""

    def value(mdl, c, x, w):
        return {
            'carry': lambda: c.mean(),
            'scanned_input': lambda: x.mean(),
            'scanned_param': lambda: w.mean(),
            'split_stream': lambda: jax.random.uniform(mdl.make_rng('noise')),
            'shared_stream': lambda: jax.random.uniform(mdl.make_rng('fixed')),
            'constant': lambda: jnp.ones(()),
        }[source]()

    class Step(nn.Module):
        @nn.compact
        def __call__(self, c, x):
            w = self.param('w', nn.initializers.normal(), (1, 3))
            if when == 'create':
                v = self.variable(collection, 'v', lambda: value(self, c, x, w))
            else:
                v = self.variable(collection, 'v', lambda: jnp.ones(()))
                if not self.is_initializing() and self.is_mutable_collection(collection):
                    v.value = v.value + value(self, c, x, w)
            return c * w + x * v.value, None

    class Top(nn.Module):
        @nn.compact
        def __call__(self, x):
            scan = nn.scan(
                Step,
                variable_axes={'params': 0},
                variable_broadcast=collection,
                split_rngs={'params': True, 'noise': True, 'fixed': False},
            )
            return scan()(x, jnp.stack([x, 2 * x, 3 * x]))[0]

    return Top()


BROADCAST_SOURCES = ['carry', 'scanned_input', 'scanned_param', 'split_stream', 'shared_stream',
                     'constant']  # fmt: skip


@pytest.mark.parametrize('when', ['create', 'update'])
@pytest.mark.parametrize('source', BROADCAST_SOURCES)
def test_scan_broadcast_writes_that_vary_per_step_raise_as_flax(source, when):
    """A broadcast variable is computed once, before the loop: Flax refuses one whose
    value depends on the carry, the scanned inputs or variables or a stream split per
    step (a ValueError, "broadcasted variable has a data dependency on the scan body"),
    where linen kept the first step's value."""
    x = jnp.arange(6.0).reshape(2, 3) / 6

    def run(nn):
        model = _broadcast_writer(nn, source, 'state', when)
        rngs = {'params': jax.random.key(0), 'noise': jax.random.key(1), 'fixed': jax.random.key(2)}
        variables = model.init(rngs, x)
        apply_rngs = {'noise': jax.random.key(3), 'fixed': jax.random.key(4)}
        y, state = model.apply(variables, x, rngs=apply_rngs, mutable=['state'])
        return {'variables': variables, 'y': y, 'state': state}

    flax_outcome, linen_outcome = _outcome(lambda: run(flax_nn)), _outcome(lambda: run(linen_nn))
    assert (flax_outcome[0] == 'ok') == (source in ('shared_stream', 'constant')), flax_outcome
    _assert_same_outcome(flax_outcome, linen_outcome, _assert_same_values)
    if linen_outcome[0] == 'raised':
        assert "broadcast collection 'state'" in str(linen_outcome[1])


# -------- nn.custom_vjp over a setup-style module under nn.grad (FINDINGS D8, documented)


def _custom_vjp_under_grad(nn, style: str):
    class Scale(nn.Module):
        if style == 'setup':

            def setup(self):
                self.w = self.param('w', nn.initializers.normal(0.5), (3,))

            def __call__(self, x):
                return x * self.w
        else:

            @nn.compact
            def __call__(self, x):
                return x * self.param('w', nn.initializers.normal(0.5), (3,))

    class Custom(nn.Module):
        @nn.compact
        def __call__(self, x):
            return _custom_vjp_of_call(nn)(Scale(), x)

    class Top(nn.Module):
        @nn.compact
        def __call__(self, x):
            def loss(mdl, x):
                y = mdl(x)
                return jnp.sum(y * y), y

            (gx,), y = nn.grad(loss, Custom(), x, has_aux=True)
            return y + 0.5 * gx

    return Top()


def test_custom_vjp_of_a_setup_module_under_grad_gives_flaxs_compact_values():
    """Flax refuses the setup form (its ``vjp_fn`` wraps the parameter gradients in a
    tuple there); linen runs it, with the values both give for the compact form, and
    those are ``x*w + x*w**2`` (``y = x*w``, the loss ``sum(y**2)``)."""
    x = jnp.arange(1.0, 4.0)
    flax_setup = _outcome(lambda: _custom_vjp_under_grad(flax_nn, 'setup').init(RNGS, x))
    assert flax_setup[0] == 'raised' and isinstance(flax_setup[1], TypeError), flax_setup
    compact = _custom_vjp_under_grad(flax_nn, 'compact')
    flax_vars = compact.init(RNGS, x)
    for style in ('setup', 'compact'):
        model = _custom_vjp_under_grad(linen_nn, style)
        variables = model.init(RNGS, x)
        _assert_same_values(flax_vars, variables)
        y = model.apply(variables, x)
        _assert_same_tree(y, compact.apply(flax_vars, x), style)
        w = variables['params']['Custom_0']['Scale_0']['w']
        np.testing.assert_allclose(y, x * w + x * w**2, rtol=1e-6)
