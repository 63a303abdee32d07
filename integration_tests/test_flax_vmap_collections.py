"""Flax as oracle for the collections ``nn.vmap`` and ``nn.scan`` let their body write
(fuzz findings F18 and F21).

Only the collections a ``variable_axes`` filter (for scan also ``variable_broadcast``
and ``variable_carry``) names are writable inside; vmap leaves the others out
altogether. A ``sow`` there records nothing, a variable of an unnamed collection is
missing (``ScopeCollectionNotFound`` on init), and ``nn.map_variables(..., init=True)``
inside sees no mutable collection on an apply that mutates only unnamed ones.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import linen.nn as linen_nn

pytestmark = pytest.mark.flax
flax_nn = pytest.importorskip('flax.linen')

X = jnp.linspace(-1.0, 1.0, 6, dtype=jnp.float32).reshape(2, 3)


def _outcome(fn):
    """``('ok', shapes and values)`` or ``('raises', error class name)``."""
    try:
        out = fn()
    except Exception as e:  # the outcome compared: Flax's error class
        return 'raises', type(e).__name__
    return 'ok', jax.tree_util.tree_map(np.asarray, out)


def _same(flax_out, linen_out):
    assert flax_out[0] == linen_out[0], (flax_out, linen_out)
    if flax_out[0] == 'raises':
        assert flax_out[1] == linen_out[1]
        return
    f_leaves, f_tree = jax.tree_util.tree_flatten(flax_out[1])
    l_leaves, l_tree = jax.tree_util.tree_flatten(linen_out[1])
    assert f_tree == l_tree
    for f, li in zip(f_leaves, l_leaves):
        np.testing.assert_array_equal(f, li)


def sowing(nn, variable_axes):
    class Inner(nn.Module):
        @nn.compact
        def __call__(self, x):
            self.sow('intermediates', 'h', x)
            return nn.Dense(3)(x)

    return nn.vmap(
        Inner, variable_axes=variable_axes, split_rngs={'params': True}, in_axes=0, out_axes=0
    )()


@pytest.mark.parametrize(
    'variable_axes', [{'params': 0}, {'params': 0, 'intermediates': 0}], ids=['unnamed', 'named']
)
def test_sow_inside_vmap_records_only_a_named_collection(variable_axes):
    outcomes = []
    for nn in (flax_nn, linen_nn):
        model = sowing(nn, variable_axes)
        variables = model.init(jax.random.key(0), X)
        outcomes.append(
            _outcome(lambda m=model, v=variables: m.apply(v, X, mutable=['intermediates']))
        )
    _same(*outcomes)
    if 'intermediates' not in variable_axes:
        assert outcomes[1][1][1] == {}  # nothing recorded (linen raised a JAX error before)


def constant_user(nn, variable_axes):
    class Inner(nn.Module):
        @nn.compact
        def __call__(self, x):
            c = self.variable('consts', 'c', lambda: jnp.full((3,), 2.0, jnp.float32))
            return x * c.value

    return nn.vmap(
        Inner, variable_axes=variable_axes, split_rngs={'params': True}, in_axes=0, out_axes=0
    )()


@pytest.mark.parametrize(
    'variable_axes',
    [{'params': 0}, {'params': 0, 'consts': None}],
    ids=['unnamed', 'broadcast'],
)
def test_an_unnamed_collection_is_missing_inside_vmap(variable_axes):
    init_outcomes, apply_outcomes = [], []
    given = {'consts': {'c': jnp.full((3,), 5.0, jnp.float32)}}
    for nn in (flax_nn, linen_nn):
        model = constant_user(nn, variable_axes)
        init_outcomes.append(_outcome(lambda m=model: m.init(jax.random.key(0), X)))
        apply_outcomes.append(_outcome(lambda m=model: m.apply(given, X)))
    _same(*init_outcomes)
    _same(*apply_outcomes)
    if 'consts' not in variable_axes:
        assert init_outcomes[1] == ('raises', 'ScopeCollectionNotFound')  # linen created it


def mapped_in_vmap(nn):
    class Mapped(nn.Module):
        @nn.compact
        def __call__(self, x):
            dense = nn.map_variables(
                nn.Dense, 'params', trans_in_fn=lambda vs: vs, trans_out_fn=lambda vs: vs,
                init=True, mutable=False,
            )  # fmt: skip
            return dense(3)(x)

    return nn.vmap(
        Mapped, variable_axes={'params': 0}, split_rngs={'params': True}, in_axes=0, out_axes=0
    )()


@pytest.mark.parametrize('apply_mutable', [False, ['intermediates'], ['params']])
def test_map_variables_init_true_inside_vmap_as_flax(apply_mutable):
    # The fuzz reproducer apply_raises_2 (seed g1, program 913): with an apply that
    # mutates only `intermediates`, the vmapped body has no mutable collection, so
    # `init=True` makes no first run and the parameters are read as given.
    outcomes = []
    for nn in (flax_nn, linen_nn):
        model = mapped_in_vmap(nn)
        variables = model.init(jax.random.key(0), X)
        outcomes.append(_outcome(lambda m=model, v=variables: m.apply(v, X, mutable=apply_mutable)))
    _same(*outcomes)
    assert outcomes[1][0] == 'ok'


# -- nn.scan (F21) ----------------------------------------------------------------------


def _scanned(nn, cell, variable_axes):
    class Loop(nn.Module):
        @nn.compact
        def __call__(self, xs):
            scan = nn.scan(cell, variable_axes=variable_axes, split_rngs={'params': True})
            return scan()(jnp.zeros(xs.shape[1:], xs.dtype), xs)[1]

    return Loop()


def sowing_cell(nn):
    class Cell(nn.Module):
        @nn.compact
        def __call__(self, c, x):
            h = nn.Dense(3)(c + x)
            return h, (h, self.sow('intermediates', 'h', h))

    return Cell


@pytest.mark.parametrize(
    'variable_axes', [{'params': 0}, {'params': 0, 'intermediates': 0}], ids=['unnamed', 'named']
)
def test_sow_inside_scan_records_only_a_named_collection(variable_axes):
    outcomes = []
    for nn in (flax_nn, linen_nn):
        model = _scanned(nn, sowing_cell(nn), variable_axes)
        variables = model.init(jax.random.key(0), X)
        outcomes.append(
            _outcome(lambda m=model, v=variables: m.apply(v, X, mutable=['intermediates']))
        )
    _same(*outcomes)
    if 'intermediates' not in variable_axes:
        (_, written), recorded = outcomes[1][1]
        assert not written.any() and recorded == {}  # linen raised ScanCollectionError before


def counting_cell(nn):
    class Cell(nn.Module):
        @nn.compact
        def __call__(self, c, x):
            count = self.variable('counts', 'n', lambda: jnp.zeros((), jnp.float32))
            count.value = count.value + 1.0
            return c + x, x

    return Cell


def test_a_variable_of_an_unnamed_collection_inside_scan_is_missing_on_init():
    outcomes = [
        _outcome(lambda nn=nn: _scanned(nn, counting_cell(nn), {'params': 0}).init(
            jax.random.key(0), X))
        for nn in (flax_nn, linen_nn)
    ]  # fmt: skip
    _same(*outcomes)
    assert outcomes[1] == ('raises', 'ScopeCollectionNotFound')


def mapped_cell(nn):
    class Cell(nn.Module):
        @nn.compact
        def __call__(self, c, x):
            norm = nn.map_variables(
                nn.LayerNorm, 'params', trans_in_fn=lambda vs: vs, trans_out_fn=lambda vs: vs,
                init=True, mutable=False,
            )  # fmt: skip
            h = norm()(c + x)
            return h, h

    return Cell


@pytest.mark.parametrize('apply_mutable', [False, ['intermediates'], ['params']])
def test_map_variables_init_true_inside_scan_as_flax(apply_mutable):
    # The fuzz reproducer apply_raises_3 (seed ls37-old-1, program 220).
    outcomes = []
    for nn in (flax_nn, linen_nn):
        model = _scanned(nn, mapped_cell(nn), {'params': 0})
        variables = model.init(jax.random.key(0), X)
        outcomes.append(_outcome(lambda m=model, v=variables: m.apply(v, X, mutable=apply_mutable)))
    _same(*outcomes)
    assert outcomes[1][0] == 'ok'
