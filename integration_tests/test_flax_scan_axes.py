"""Flax as oracle for what ``nn.scan`` hands its body: broadcast Python arguments stay
Python values on every step, and the lift-level ``In``/``Out`` axis markers
(``nn.partitioning.ScanIn``/``ScanOut``) lift a collection one way only.

Each program is written once against an ``nn`` namespace and run with ``flax.linen``
and ``linen.nn`` for the same key: variables, outputs and errors are compared bit for
bit.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import linen.nn as linen_nn
from integration_tests.oracle import assert_same_bits
from linen.layers import partitioning as linen_partitioning

pytestmark = [pytest.mark.flax, pytest.mark.usefixtures('shared_compilations')]
flax = pytest.importorskip('flax')
flax_nn = pytest.importorskip('flax.linen')
flax_partitioning = pytest.importorskip('flax.linen.partitioning')

X = jnp.linspace(-1.0, 1.0, 8).reshape(2, 4)


def _np(tree):
    tree = flax.core.unfreeze(tree) if hasattr(tree, 'unfreeze') else tree
    return jax.tree_util.tree_map(np.asarray, tree)


# ------------------------------------------------------- broadcast Python arguments


def dropout_stack(nn, seen):
    """The ViT-encoder shape: ``deterministic`` reaches Dropout through the scan."""

    class Block(nn.Module):
        @nn.compact
        def __call__(self, x, deterministic):
            seen.append(type(deterministic))
            return nn.Dropout(rate=0.5)(nn.Dense(4)(x), deterministic), None

    return nn.scan(
        Block,
        variable_axes={'params': 0},
        split_rngs={'params': True, 'dropout': True},
        in_axes=nn.broadcast,
        length=3,
    )()


def python_values_stack(nn, seen):
    """Several broadcast kinds next to a scanned input: int, str, None, bool."""

    class Block(nn.Module):
        @nn.compact
        def __call__(self, c, x, n, mode, nothing, flag):
            seen.append((type(n), mode, nothing, type(flag)))
            y = nn.Dense(c.shape[-1])(c) * n + x
            if mode == 'tanh' and nothing is None and flag:
                y = jnp.tanh(y)
            return y, y.sum(-1)

    return nn.scan(
        Block,
        variable_axes={'params': 0},
        split_rngs={'params': True},
        in_axes=(0, nn.broadcast, nn.broadcast, nn.broadcast, nn.broadcast),
    )()


@pytest.mark.parametrize('deterministic', [True, False])
def test_scan_broadcast_bool_reaches_dropout_as_python_bool(deterministic):
    def run(nn):
        seen = []
        model = dropout_stack(nn, seen)
        rngs = {'params': jax.random.key(0), 'dropout': jax.random.key(1)}
        variables = model.init(rngs, X, deterministic)
        y, _ = model.apply(variables, X, deterministic, rngs={'dropout': jax.random.key(2)})
        return _np(variables), np.asarray(y), seen

    ours, theirs = run(linen_nn), run(flax_nn)
    assert_same_bits(ours[:2], theirs[:2])
    # Every run of the body (probe and loop, init and apply) saw the Python bool.
    assert ours[2] and set(ours[2]) == {bool}
    assert set(theirs[2]) == {bool}


def test_scan_broadcast_int_str_none_bool_stay_python_values():
    xs = jnp.stack([X, 2 * X])

    def run(nn):
        seen = []
        model = python_values_stack(nn, seen)
        variables = model.init(jax.random.key(0), X, xs, 3, 'tanh', None, True)
        out = model.apply(variables, X, xs, 3, 'tanh', None, True)
        return _np(variables), _np(out), seen

    ours, theirs = run(linen_nn), run(flax_nn)
    assert_same_bits(ours[:2], theirs[:2])
    assert ours[2] and set(ours[2]) == {(int, 'tanh', None, bool)} == set(theirs[2])


# ----------------------------------------------------------- In / Out axis markers


def _block(nn):
    class Block(nn.Module):
        @nn.compact
        def __call__(self, c, x):
            y = nn.Dense(3)(c)
            self.sow('intermediates', 'y', y)
            return c + y, y

    return Block


def _scanned(nn, axes):
    return nn.scan(_block(nn), variable_axes=axes, split_rngs={'params': True}, length=2)()


def _markers(nn):
    return linen_partitioning if nn is linen_nn else flax_partitioning


C = jnp.linspace(0.0, 1.0, 6).reshape(2, 3)


def _outcome(fn):
    try:
        return ('ok', _np(fn()))
    except Exception as e:  # the comparison below checks the class name
        return ('error', type(e).__name__)


# (variable_axes as a function of the markers module, the mutable collections)
APPLY_CASES = {
    'params_in_axis_1': (lambda p: {'params': p.ScanIn(1)}, False),
    'params_in_axis_1_mutable': (lambda p: {'params': p.ScanIn(1)}, ['params']),
    'params_out_only': (lambda p: {'params': p.ScanOut(1)}, False),
    'intermediates_out_0': (
        lambda p: {'params': p.ScanIn(1), 'intermediates': p.ScanOut(0)},
        ['intermediates'],
    ),
    'intermediates_both_0': (
        lambda p: {'params': p.ScanIn(1), 'intermediates': 0},
        ['intermediates'],
    ),
    'intermediates_in_only': (
        lambda p: {'params': 1, 'intermediates': p.ScanIn(0)},
        ['intermediates'],
    ),
}


@pytest.mark.parametrize('case', list(APPLY_CASES))
def test_scan_in_out_markers_apply_as_flax(case):
    axes_of, mutable = APPLY_CASES[case]
    # Variables stacked on axis 1, made by Flax with a plain integer axis.
    variables = flax_nn.scan(
        _block(flax_nn), variable_axes={'params': 1}, split_rngs={'params': True}, length=2
    )().init(jax.random.key(0), C, None)
    variables = {'params': flax.core.unfreeze(variables)['params']}

    def run(nn):
        model = _scanned(nn, axes_of(_markers(nn)))
        return _outcome(lambda: model.apply(variables, C, None, mutable=mutable))

    ours, theirs = run(linen_nn), run(flax_nn)
    assert ours[0] == theirs[0], (ours, theirs)
    if ours[0] == 'ok':
        assert_same_bits(ours[1], theirs[1])
    else:
        assert ours[1] == theirs[1]


INIT_CASES = {
    'params_out_0': lambda p: {'params': p.ScanOut(0)},
    'params_out_1': lambda p: {'params': p.ScanOut(1)},
    'params_in_0': lambda p: {'params': p.ScanIn(0)},
}


@pytest.mark.parametrize('case', list(INIT_CASES))
def test_scan_in_out_markers_init_as_flax(case):
    def run(nn):
        model = _scanned(nn, INIT_CASES[case](_markers(nn)))
        return _outcome(lambda: model.init(jax.random.key(0), C, None))

    ours, theirs = run(linen_nn), run(flax_nn)
    assert ours[0] == theirs[0], (ours, theirs)
    if ours[0] == 'ok':
        assert_same_bits(ours[1], theirs[1])
    else:
        assert ours[1] == theirs[1]


def test_scan_in_marker_reads_the_stacked_axis():
    # Independent of Flax: step i uses kernel[:, i] of a kernel stacked on axis 1.
    kernel = jnp.arange(3 * 2 * 3, dtype=jnp.float32).reshape(3, 2, 3) / 10
    bias = jnp.zeros((3, 2))
    variables = {'params': {'Dense_0': {'kernel': kernel, 'bias': bias}}}
    model = _scanned(linen_nn, {'params': linen_partitioning.ScanIn(1)})
    carry, ys = model.apply(variables, C, None)
    c, expected = C, []
    for i in range(2):
        y = c @ kernel[:, i]
        c = c + y
        expected.append(y)
    np.testing.assert_allclose(carry, c, rtol=1e-6)
    np.testing.assert_allclose(ys, jnp.stack(expected), rtol=1e-6)


def test_markers_are_the_lift_level_classes_and_compare_as_flax():
    from linen.transforms import In, Out, lift

    assert linen_partitioning.ScanIn is In is lift.In
    assert linen_partitioning.ScanOut is Out is lift.Out
    assert In(1) == In(1) and In(1) != Out(1) and hash(In(1)) == hash(In(1))
    assert repr(In(1)) == repr(flax_partitioning.ScanIn(1)) == 'In(axis=1)'
    assert In(1).axis == 1


def _vmapped(nn, axes):
    class Block(nn.Module):
        @nn.compact
        def __call__(self, c):
            y = nn.Dense(3)(c)
            self.sow('intermediates', 'y', y)
            return y

    return nn.vmap(Block, variable_axes=axes, split_rngs={'params': True})()


# (variable_axes of the markers module, init?, mutable on apply)
VMAP_CASES = {
    'params_out_init': (lambda p: {'params': p.ScanOut(0)}, True, False),
    'params_in_init': (lambda p: {'params': p.ScanIn(0)}, True, False),
    'params_in_apply': (lambda p: {'params': p.ScanIn(0)}, False, False),
    'params_in_apply_mutable': (lambda p: {'params': p.ScanIn(0)}, False, ['params']),
    'params_out_apply': (lambda p: {'params': p.ScanOut(0)}, False, False),
    'intermediates_out': (
        lambda p: {'params': 0, 'intermediates': p.ScanOut(0)},
        False,
        ['intermediates'],
    ),
    'intermediates_in': (
        lambda p: {'params': 0, 'intermediates': p.ScanIn(0)},
        False,
        ['intermediates'],
    ),
}


@pytest.mark.parametrize('case', list(VMAP_CASES))
def test_vmap_in_out_markers_as_flax(case):
    axes_of, init, mutable = VMAP_CASES[case]
    variables = _vmapped(flax_nn, {'params': 0}).init(jax.random.key(0), C)
    variables = {'params': flax.core.unfreeze(variables)['params']}

    def run(nn):
        model = _vmapped(nn, axes_of(_markers(nn)))
        if init:
            return _outcome(lambda: model.init(jax.random.key(0), C))
        return _outcome(lambda: model.apply(variables, C, mutable=mutable))

    ours, theirs = run(linen_nn), run(flax_nn)
    assert ours[0] == theirs[0], (ours, theirs)
    if ours[0] == 'ok':
        assert_same_bits(ours[1], theirs[1])
    else:
        assert ours[1] == theirs[1]


# ---------------------------------------------------------- scans of zero steps


def _zero_step_scan(nn, rule):
    class Cell(nn.Module):
        @nn.compact
        def __call__(self, c, x):
            c = nn.Dense(2)(c) + x
            return c, 2.0 * c

    rules = {
        'no_variables': dict(),
        'broadcast_params': dict(variable_broadcast='params', split_rngs={'params': False}),
        'stacked_params': dict(variable_axes={'params': 0}, split_rngs={'params': True}),
        'stacked_params_axis_1': dict(
            variable_axes={'params': 0}, split_rngs={'params': True}, in_axes=1, out_axes=1
        ),
        'stacked_params_axis_minus_1': dict(
            variable_axes={'params': 0}, split_rngs={'params': True}, in_axes=-1, out_axes=-1
        ),
    }
    if rule == 'no_variables':

        class Sum(nn.Module):
            @nn.compact
            def __call__(self, c, x):
                return c + x, x

        return nn.scan(Sum)()
    return nn.scan(Cell, **rules[rule])()


@pytest.mark.parametrize(
    'rule',
    [
        'no_variables',
        'broadcast_params',
        'stacked_params',
        'stacked_params_axis_1',
        'stacked_params_axis_minus_1',
    ],
)
def test_a_scan_over_zero_steps_as_flax(rule):
    # JAX's scan runs zero steps; Flax traces the body only for its structure. linen's
    # first step (run before the loop) took slice 0 of the empty axis: IndexError.
    xs = jnp.ones((2, 0)) if 'axis' in rule else jnp.ones((0, 2))
    c = jnp.linspace(-1.0, 1.0, 2)

    def run(nn):
        model = _zero_step_scan(nn, rule)
        variables = model.init(jax.random.key(0), c, xs)
        return _np(variables), _np(model.apply(variables, c, xs))

    (v_ours, out_ours), (v_theirs, out_theirs) = run(linen_nn), run(flax_nn)
    assert_same_bits(v_ours, v_theirs)
    assert_same_bits(out_ours, out_theirs)
    np.testing.assert_array_equal(out_ours[0], c)  # no step ran: the carry comes back
    assert out_ours[1].shape == xs.shape
    if rule.startswith('stacked'):
        assert v_ours['params']['Dense_0']['kernel'].shape == (0, 2, 2)


def test_an_rnn_over_zero_time_steps_as_flax():
    x = jnp.ones((1, 0, 2))

    def run(nn):
        rnn = nn.RNN(nn.LSTMCell(3))
        variables = rnn.init(jax.random.key(0), x)
        return _np(variables), _np(rnn.apply(variables, x))

    (v_ours, y_ours), (v_theirs, y_theirs) = run(linen_nn), run(flax_nn)
    assert_same_bits(v_ours, v_theirs)
    assert_same_bits(y_ours, y_theirs)
    assert y_ours.shape == (1, 0, 3)


# ------------------------------------------- loop-invariant outputs (out_axes=broadcast)


def _invariant_output_scan(nn, kind, out_axes_of):
    class Cell(nn.Module):
        @nn.compact
        def __call__(self, c, x, scale):
            dense = nn.Dense(2)
            y = dense(c) + x
            if kind == 'params':
                invariant = dense.variables['params']['kernel'] * scale
            elif kind == 'rng':  # a stream not split: the same on every step
                invariant = jax.random.uniform(self.make_rng('noise'), (3,))
            elif kind == 'carry':
                invariant = c
            else:  # 'scanned'
                invariant = x
            return y, {'per_step': y, 'invariant': (invariant, jnp.ones(2))}

    scan = nn.scan(
        Cell,
        variable_broadcast='params',
        split_rngs={'params': False, 'noise': False},
        in_axes=(0, nn.broadcast),
        out_axes=out_axes_of(nn),
    )
    rngs = {'params': jax.random.key(0), 'noise': jax.random.key(1)}
    xs = jnp.linspace(0.0, 1.0, 6).reshape(3, 2)
    out, variables = scan().init_with_output(rngs, jnp.ones(2), xs, 2.0)
    again = scan().apply(variables, jnp.ones(2), xs, 2.0, rngs={'noise': jax.random.key(2)})
    return _np((out, variables, again))


INVARIANT_OUT_AXES = {
    'subtree': lambda nn: {'per_step': 0, 'invariant': nn.broadcast},
    'leaf': lambda nn: {'per_step': 1, 'invariant': (nn.broadcast, 0)},
    'whole': lambda nn: nn.broadcast,
}


@pytest.mark.parametrize('kind', ['params', 'rng'])
@pytest.mark.parametrize('axes', ['subtree', 'leaf'])
def test_a_loop_invariant_output_as_flax(kind, axes):
    # Computed once before the loop (its rng draw counted there), not stacked per step.
    program = lambda nn: _invariant_output_scan(nn, kind, INVARIANT_OUT_AXES[axes])
    assert_same_bits(program(linen_nn), program(flax_nn))


@pytest.mark.parametrize('kind', ['carry', 'scanned'])
def test_a_loop_invariant_output_depending_on_the_loop_is_refused_as_flax(kind):
    from linen.transforms.errors import ScanBroadcastOutputError

    program = lambda nn: _invariant_output_scan(nn, kind, INVARIANT_OUT_AXES['whole'])
    with pytest.raises(ValueError) as theirs:
        program(flax_nn)
    with pytest.raises(ScanBroadcastOutputError) as ours:
        program(linen_nn)
    assert str(ours.value).startswith(str(theirs.value))


def test_gradients_through_a_loop_invariant_output_as_flax():
    def program(nn):
        class Cell(nn.Module):
            @nn.compact
            def __call__(self, c, x):
                dense = nn.Dense(2)
                y = dense(c) + x
                return y, (y, jnp.tanh(dense.variables['params']['kernel']).sum(0) * 3.0)

        scan = nn.scan(
            Cell,
            variable_broadcast='params',
            split_rngs={'params': False},
            out_axes=(0, nn.broadcast),
        )
        xs = jnp.linspace(0.0, 1.0, 6).reshape(3, 2)
        variables = scan().init(jax.random.key(0), jnp.ones(2), xs)

        def loss(variables):
            c, (ys, invariant) = scan().apply(variables, jnp.ones(2), xs)
            return jnp.sum(c**2) + jnp.sum(invariant[None] * ys)

        return _np(jax.jit(jax.grad(loss))(variables))

    assert_same_bits(program(linen_nn), program(flax_nn))
