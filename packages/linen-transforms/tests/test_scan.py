"""Lifted scan: broadcast/stacked/carried collections, rng splitting, axes, length, reverse."""

from __future__ import annotations

import functools
import re
from collections import Counter as Multiset

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import linen.nn as nn
from linen.core import errors
from linen.transforms.errors import ScanLengthError


def normal_init(key, shape):
    return jax.random.normal(key, shape) * 0.5


class Cell(nn.Module):
    """``c' = tanh(c @ w + x)``, emits ``2 c'``."""

    @nn.compact
    def __call__(self, c, x):
        w = self.param('w', normal_init, (c.shape[-1], c.shape[-1]))
        c = jnp.tanh(c @ w + x)
        return c, 2 * c


def run_cell(w, c, xs_time_major):
    """The explicit loop: ``w`` is one matrix or a stack of one per step."""
    ys = []
    for t in range(xs_time_major.shape[0]):
        wt = w if w.ndim == 2 else w[t]
        c = jnp.tanh(c @ wt + xs_time_major[t])
        ys.append(2 * c)
    return c, jnp.stack(ys)


XS = jax.random.normal(jax.random.key(1), (5, 2, 3))  # (time, batch, features)
C0 = jnp.zeros((2, 3))


def shared_scan(**kw):
    return nn.scan(Cell, variable_broadcast='params', split_rngs={'params': False}, **kw)()


def stacked_scan(split=True, **kw):
    return nn.scan(Cell, variable_axes={'params': 0}, split_rngs={'params': split}, **kw)()


# ------------------------------------------------------------ variable rules


def test_variable_broadcast_params_gives_one_shared_set():
    model = shared_scan()
    variables = model.init(jax.random.key(0), C0, XS)
    w = variables['params']['w']
    assert w.shape == (3, 3)
    # The shared set is what one untransformed step makes with the same key.
    plain = Cell().init(jax.random.key(0), C0, XS[0])
    np.testing.assert_array_equal(w, plain['params']['w'])
    c, ys = model.apply(variables, C0, XS)
    c_ref, ys_ref = run_cell(w, C0, XS)
    np.testing.assert_allclose(c, c_ref, rtol=1e-5)
    np.testing.assert_allclose(ys, ys_ref, rtol=1e-5)


@pytest.mark.parametrize('split', [True, False])
def test_variable_axes_params_stacks_length_sets(split):
    model = stacked_scan(split=split)
    variables = model.init(jax.random.key(0), C0, XS)
    w = variables['params']['w']
    assert w.shape == (5, 3, 3)
    distinct = not bool(jnp.array_equal(w[0], w[1]))
    assert distinct is split
    c, ys = model.apply(variables, C0, XS)
    c_ref, ys_ref = run_cell(w, C0, XS)
    np.testing.assert_allclose(c, c_ref, rtol=1e-5)
    np.testing.assert_allclose(ys, ys_ref, rtol=1e-5)


@pytest.mark.parametrize('split', [True, False])
def test_split_rngs_for_a_dropout_stream(split):
    class NoisyStep(nn.Module):
        @nn.compact
        def __call__(self, c, x):
            noise = jax.random.uniform(self.make_rng('dropout'), x.shape)
            return c, x + noise

    model = nn.scan(NoisyStep, split_rngs={'dropout': split}, length=4)()
    xs = jnp.zeros((4, 3))
    _, ys = model.apply({}, jnp.zeros(()), xs, rngs={'dropout': jax.random.key(2)})
    same = [bool(jnp.array_equal(ys[0], ys[t])) for t in range(1, 4)]
    assert same == [not split] * 3


def test_gradients_equal_the_explicit_loop():
    model = shared_scan()
    params = model.init(jax.random.key(0), C0, XS)['params']

    def loss(p, xs):
        c, ys = model.apply({'params': p}, C0, xs)
        return jnp.sum(c) + jnp.sum(ys**2)

    def loss_ref(p, xs):
        c, ys = run_cell(p['w'], C0, xs)
        return jnp.sum(c) + jnp.sum(ys**2)

    g = jax.grad(loss, argnums=(0, 1))(params, XS)
    g_ref = jax.grad(loss_ref, argnums=(0, 1))(params, XS)
    np.testing.assert_allclose(g[0]['w'], g_ref[0]['w'], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(g[1], g_ref[1], rtol=1e-4, atol=1e-6)


class Counting(nn.Module):
    @nn.compact
    def __call__(self, c, x):
        n = self.variable('counter', 'n', lambda: jnp.zeros((), jnp.int32))
        n.value = n.value + 1
        return c + x, n.value


def test_variable_carry_threads_a_counter_through_the_steps():
    model = nn.scan(Counting, variable_carry='counter')()
    xs = jnp.ones((6,))
    variables = {'counter': {'n': jnp.array(0, jnp.int32)}}
    (c, steps), upd = model.apply(variables, 0.0, xs, mutable='counter')
    np.testing.assert_array_equal(steps, [1, 2, 3, 4, 5, 6])
    assert int(upd['counter']['n']) == 6 and float(c) == 6.0
    (_, steps), upd = model.apply(upd, 0.0, xs, mutable='counter')
    np.testing.assert_array_equal(steps, [7, 8, 9, 10, 11, 12])
    assert int(upd['counter']['n']) == 12


@pytest.mark.xfail(
    strict=True,
    reason='init cannot create a variable_carry collection inside the loop (Flax cannot either); '
    'it needs the first step peeled off the scan',
)
def test_init_creates_variable_carry_collections():
    model = nn.scan(Counting, variable_carry='counter')()
    (_, steps), variables = model.init_with_output(jax.random.key(0), 0.0, jnp.ones((6,)))
    np.testing.assert_array_equal(steps, [1, 2, 3, 4, 5, 6])
    assert int(variables['counter']['n']) == 6


def test_sown_intermediates_are_stacked_per_step():
    class Sowing(nn.Module):
        @nn.compact
        def __call__(self, c, x):
            self.sow('intermediates', 'h', c + x)
            return c + x, None

    model = nn.scan(Sowing, variable_axes={'intermediates': 0})()
    xs = jnp.arange(4.0)
    (c, _), state = model.apply({}, 0.0, xs, mutable='intermediates')
    (h,) = state['intermediates']['h']
    np.testing.assert_allclose(h, jnp.cumsum(xs))
    assert float(c) == 6.0


# ------------------------------------------------------------------- axes


def test_in_axes_1_and_out_axes_1_on_batch_major_data():
    xs = jnp.moveaxis(XS, 0, 1)  # (batch, time, features)
    model = shared_scan(in_axes=1, out_axes=1)
    variables = model.init(jax.random.key(0), C0, xs)
    c, ys = model.apply(variables, C0, xs)
    assert ys.shape == (2, 5, 3)
    c_ref, ys_ref = run_cell(variables['params']['w'], C0, XS)
    np.testing.assert_allclose(ys, jnp.moveaxis(ys_ref, 0, 1), rtol=1e-5)
    np.testing.assert_allclose(c, c_ref, rtol=1e-5)


def test_negative_in_and_out_axes():
    xs = jnp.moveaxis(XS, 0, -1)  # (batch, features, time)
    model = shared_scan(in_axes=-1, out_axes=-1)
    variables = model.init(jax.random.key(0), C0, xs)
    c, ys = model.apply(variables, C0, xs)
    assert ys.shape == (2, 3, 5)
    _, ys_ref = run_cell(variables['params']['w'], C0, XS)
    np.testing.assert_allclose(ys, jnp.moveaxis(ys_ref, 0, -1), rtol=1e-5)


def test_broadcast_in_axes_passes_the_argument_to_every_step():
    class Scaled(nn.Module):
        @nn.compact
        def __call__(self, c, x, scale):
            return c + x * scale, x * scale

    model = nn.scan(Scaled, in_axes=(0, nn.broadcast))()
    xs = jnp.arange(1.0, 5.0)
    scale = jnp.array(3.0)
    c, ys = model.apply({}, 0.0, xs, scale)
    np.testing.assert_allclose(ys, xs * 3)
    assert float(c) == 30.0


def test_reverse_runs_the_steps_from_the_end():
    model = shared_scan(reverse=True)
    variables = model.init(jax.random.key(0), C0, XS)
    c, ys = model.apply(variables, C0, XS)
    c_ref, ys_ref = run_cell(variables['params']['w'], C0, XS[::-1])
    np.testing.assert_allclose(c, c_ref, rtol=1e-5)
    np.testing.assert_allclose(ys, ys_ref[::-1], rtol=1e-5)  # ys stay in input order


def test_length_without_xs():
    class Step(nn.Module):
        @nn.compact
        def __call__(self, c):
            b = self.param('b', nn.initializers.ones, ())
            return c * 2 + b, c

    model = nn.scan(Step, variable_broadcast='params', split_rngs={'params': False}, length=4)()
    (c, ys), variables = model.init_with_output(jax.random.key(0), jnp.array(1.0))
    np.testing.assert_allclose(ys, [1.0, 3.0, 7.0, 15.0])
    assert float(c) == 31.0
    assert variables['params']['b'].shape == ()


def test_unroll_does_not_change_the_result():
    variables = shared_scan().init(jax.random.key(0), C0, XS)
    ref = shared_scan().apply(variables, C0, XS)
    out = shared_scan(unroll=2).apply(variables, C0, XS)
    for a, b in zip(jax.tree_util.tree_leaves(out), jax.tree_util.tree_leaves(ref)):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_data_transform_sees_each_steps_variables():
    seen = []

    def double_params(variables, keys):
        seen.append(sorted(variables))
        p = jax.tree_util.tree_map(lambda a: 2 * a, variables['params'])
        return {**variables, 'params': p}, keys

    variables = shared_scan().init(jax.random.key(0), C0, XS)
    c, _ = shared_scan(data_transform=double_params).apply(variables, C0, XS)
    c_ref, _ = run_cell(2 * variables['params']['w'], C0, XS)
    np.testing.assert_allclose(c, c_ref, rtol=1e-5)
    assert seen and seen[-1] == ['params']


# -------------------------------------------------------------- method form


def test_method_decorator_equals_class_wrapper():
    class Looped(nn.Module):
        @functools.partial(nn.scan, variable_broadcast='params', split_rngs={'params': False})
        @nn.compact
        def __call__(self, c, x):
            return Cell(name='cell')(c, x)

    variables = Looped().init(jax.random.key(0), C0, XS)
    w = variables['params']['cell']['w']
    assert w.shape == (3, 3)
    c, ys = Looped().apply(variables, C0, XS)
    c_ref, ys_ref = run_cell(w, C0, XS)
    np.testing.assert_allclose(ys, ys_ref, rtol=1e-5)


# ------------------------------------------------------------------ errors


def test_inputs_of_different_lengths_are_a_scan_length_error():
    class Two(nn.Module):
        @nn.compact
        def __call__(self, c, x, y):
            return c, x + y

    with pytest.raises(ScanLengthError, match='same length'):
        nn.scan(Two)().apply({}, 0.0, jnp.ones(3), jnp.ones(4))


def test_nothing_to_scan_without_length_is_a_scan_length_error():
    class Step(nn.Module):
        @nn.compact
        def __call__(self, c):
            return c, c

    with pytest.raises(ScanLengthError, match='length='):
        nn.scan(Step)().apply({}, 0.0)


def test_length_disagreeing_with_xs_is_a_scan_length_error():
    with pytest.raises(ScanLengthError, match='scan got `length` argument of 7 which disagrees'):
        shared_scan(length=7).init(jax.random.key(0), C0, XS)


def test_scan_of_a_non_module_is_a_target_error():
    with pytest.raises(errors.TransformTargetError, match='Module class or a Module method'):
        nn.scan('Cell')


# --------------------------------------------------------------------- HLO


def hlo_op_counts(compiled_text: str) -> Multiset:
    ops = Multiset()
    for line in compiled_text.splitlines():
        line = re.sub(r',?\s*metadata=\{[^}]*\}', '', line)
        m = re.match(r'\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*[^=]*?\s([a-z][\w\-]*)\(', line)
        if m:
            ops[m.group(1)] += 1
    return ops


def test_lifted_scan_adds_no_hlo_instructions():
    model = shared_scan()
    variables = model.init(jax.random.key(0), C0, XS)
    ours = jax.jit(model.apply).lower(variables, C0, XS).compile().as_text()

    def pure(variables, c, xs):
        w = variables['params']['w']

        def step(c, x):
            c = jnp.tanh(c @ w + x)
            return c, 2 * c

        return jax.lax.scan(step, c, xs)

    ref = jax.jit(pure).lower(variables, C0, XS).compile().as_text()
    assert sum(hlo_op_counts(ref).values()) > 0
    assert hlo_op_counts(ours) == hlo_op_counts(ref)


def test_a_collection_no_scan_rule_covers_is_read_only_inside_or_an_error_when_strict():
    from linen.core import config
    from linen.transforms.errors import ScanCollectionError

    class Sows(nn.Module):
        @nn.compact
        def __call__(self, c, x):
            written = self.sow('intermediates', 'h', x)
            return c + x, (self.is_mutable_collection('intermediates'), written)

    class Loop(nn.Module):
        @nn.compact
        def __call__(self, xs):
            return nn.scan(Sows, variable_broadcast='params')(name='loop')(jnp.zeros(3), xs)

    xs = jnp.ones((4, 3))
    # As in Flax: read-only inside the loop, so `sow` returns False and writes nothing.
    (_, (mutable, written)), state = Loop().apply({}, xs, mutable=['intermediates'])
    assert not mutable.any() and not written.any()
    assert state == {}
    config.update('linen_strict_scan_collections', True)
    try:
        with pytest.raises(ScanCollectionError, match='"intermediates".*variable_axes'):
            Loop().init(jax.random.key(0), xs, mutable=True)
    finally:
        config.update('linen_strict_scan_collections', False)

    # named by a rule, the sown values come out, one slice per step
    class Covered(nn.Module):
        @nn.compact
        def __call__(self, xs):
            scan = nn.scan(Sows, variable_broadcast='params', variable_axes={'intermediates': 0})
            return scan(name='loop')(jnp.zeros(3), xs)

    _, state = Covered().apply({}, xs, mutable=['intermediates'])
    np.testing.assert_array_equal(state['intermediates']['loop']['h'][0], xs)


class _TwoMethods(nn.Module):
    def setup(self):
        self.w = self.param('w', normal_init, (2, 2))

    def first(self, c):
        return jnp.tanh(c @ self.w), c

    def second(self, c, x):
        return jnp.tanh(c @ self.w + x), None


def test_methods_dict_gives_each_method_its_own_scan_arguments():
    scanned = nn.scan(
        _TwoMethods,
        methods={
            'first': dict(
                variable_axes={'params': 0},
                split_rngs={'params': True},
                in_axes=nn.broadcast,
                length=3,
            ),
            'second': dict(variable_axes={'params': 0}, split_rngs={'params': True}),
        },
    )
    assert scanned.__name__ == 'Scan_TwoMethods'

    class Model(nn.Module):
        @nn.compact
        def __call__(self, c):
            s = scanned()
            c1, cs = s.first(c)
            return s.second(c1, cs)[0]

    c = jnp.array([[0.5, -0.25]])
    variables = Model().init(jax.random.key(0), c)
    w = variables['params']['Scan_TwoMethods_0']['w']
    assert w.shape == (3, 2, 2)
    want, emitted = c, []
    for t in range(3):
        emitted.append(want)  # `first` emits the carry it was given
        want = jnp.tanh(want @ w[t])
    for t in range(3):
        want = jnp.tanh(want @ w[t] + emitted[t])
    np.testing.assert_allclose(Model().apply(variables, c), want, rtol=1e-6)


def test_creating_a_carried_collection_in_the_body_is_a_typed_error():
    from linen.transforms.errors import ScanCarryCreationError

    model = nn.scan(
        Counting,
        variable_carry='counter',
        variable_broadcast='params',
        split_rngs={'params': False},
    )()
    with pytest.raises(ScanCarryCreationError, match='"counter"; a carried collection must exist'):
        model.init(jax.random.key(0), 0.0, jnp.ones((6,)))
    # what Flax raises there (JAX's TypeError, or an AssertionError for some programs)
    assert issubclass(ScanCarryCreationError, TypeError)
    assert issubclass(ScanCarryCreationError, AssertionError)


def test_broadcast_in_variable_axes_is_a_typed_error_naming_variable_broadcast():
    from linen.transforms.errors import ScanBroadcastAxisError

    model = nn.scan(Cell, variable_axes={'params': nn.broadcast}, split_rngs={'params': False})()
    with pytest.raises(ScanBroadcastAxisError, match="variable_broadcast='params'"):
        model.init(jax.random.key(0), jnp.zeros((1, 2)), jnp.ones((3, 1, 2)))
    assert issubclass(ScanBroadcastAxisError, AssertionError)  # what Flax raises there
