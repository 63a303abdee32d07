"""One model that leans on the lifted-transform semantics real Flax codebases use, run
with ``flax.linen`` and ``linen.nn``: ``nn.scan`` with broadcast Python arguments,
``partitioning.ScanIn`` on apply, ``partitioning.remat`` counting ``static_argnums``
without ``self`` (inside the scan), and ``nn.jit`` inside ``nn.jit`` with dropout.

Variables, outputs and gradients must be bit-identical. Flax's ``nn.jit`` changes the
random numbers a key gives (its documented gotcha; linen's does not), so where dropout
draws, linen's jitted model is compared with Flax's model without ``nn.jit``; where it
does not, with Flax's jitted model on Flax's variables.
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

X = jnp.linspace(-1.0, 1.0, 24).reshape(3, 8)
LAYERS = 2


def build(nn, part, *, jit: bool, scan_in: bool, deterministic: bool):
    """The model; ``scan_in`` reads the stacked parameters with ``ScanIn(1)`` (apply only)."""
    maybe_jit = nn.jit if jit else (lambda target: target)
    seen = []

    class Mlp(nn.Module):
        @nn.compact
        def __call__(self, x, deterministic):
            seen.append(type(deterministic))
            h = nn.gelu(nn.Dense(16)(x))
            h = nn.Dropout(0.25)(h, deterministic=deterministic)
            return nn.Dense(x.shape[-1])(h)

    class Block(nn.Module):
        @nn.compact
        def __call__(self, x, deterministic, scale):
            h = part.remat(Mlp, static_argnums=(1,))(name='mlp')(nn.LayerNorm()(x), deterministic)
            return x + scale * h, None

    class Head(nn.Module):
        deterministic: bool

        @nn.compact
        def __call__(self, x):
            return nn.Dropout(0.5, deterministic=self.deterministic)(nn.Dense(4)(x))

    class Model(nn.Module):
        deterministic: bool

        @maybe_jit
        @nn.compact
        def __call__(self, x):
            axes = {'params': part.ScanIn(1) if scan_in else 1}
            stack = nn.scan(
                Block,
                variable_axes=axes,
                split_rngs={'params': True, 'dropout': True},
                in_axes=(nn.broadcast, nn.broadcast),
                length=LAYERS,
            )
            x, _ = stack(name='stack')(x, self.deterministic, 0.5)
            return maybe_jit(Head)(self.deterministic, name='head')(x)

    return Model(deterministic), seen


def _markers(nn):
    return linen_partitioning if nn is linen_nn else flax_partitioning


def _np(tree):
    tree = flax.core.unfreeze(tree) if hasattr(tree, 'unfreeze') else tree
    return jax.tree_util.tree_map(np.asarray, tree)


def run(nn, *, jit, deterministic, variables=None):
    """``(variables, output, (param grads, input grads), types the remat body saw)``."""
    rngs = {'params': jax.random.key(0), 'dropout': jax.random.key(1)}
    init_model, seen = build(nn, _markers(nn), jit=jit, scan_in=False, deterministic=deterministic)
    if variables is None:
        variables = init_model.init(rngs, X)
    model, seen_apply = build(nn, _markers(nn), jit=jit, scan_in=True, deterministic=deterministic)

    def loss(params, x):
        y = model.apply({'params': params}, x, rngs={'dropout': jax.random.key(2)})
        return jnp.sum(y**2), y

    (_, y), grads = jax.value_and_grad(loss, argnums=(0, 1), has_aux=True)(variables['params'], X)
    return _np(variables), np.asarray(y), _np(grads), set(seen) | set(seen_apply)


@pytest.mark.parametrize('rank_promotion', ['raise', 'allow'])
def test_model_with_dropout_matches_flax_without_jit(rank_promotion):
    with jax.numpy_rank_promotion(rank_promotion):
        ours = run(linen_nn, jit=True, deterministic=False)
        theirs = run(flax_nn, jit=False, deterministic=False)
    params = ours[0]['params']
    assert set(params) == {'stack', 'head'}
    assert params['stack']['mlp']['Dense_0']['kernel'].shape == (8, LAYERS, 16)
    assert ours[3] == theirs[3] == {bool}
    assert_same_bits(ours[:3], theirs[:3])


@pytest.mark.parametrize('rank_promotion', ['raise', 'allow'])
def test_model_deterministic_matches_flax_jit_on_flax_variables(rank_promotion):
    with jax.numpy_rank_promotion(rank_promotion):
        flax_model, _ = build(
            flax_nn, flax_partitioning, jit=True, scan_in=False, deterministic=True
        )
        variables = flax_model.init(jax.random.key(0), X)
        ours = run(linen_nn, jit=True, deterministic=True, variables=variables)
        theirs = run(flax_nn, jit=True, deterministic=True, variables=variables)
    assert ours[3] == theirs[3] == {bool}
    assert_same_bits(ours[:3], theirs[:3])


def test_model_output_follows_from_its_parameters():
    # Independent of Flax: deterministic, so the output is the plain computation.
    variables, y, _, _ = run(linen_nn, jit=True, deterministic=True)
    params = jax.tree_util.tree_map(jnp.asarray, variables['params'])
    x = X
    for i in range(LAYERS):
        # Stacked on axis 1 (variable_axes={'params': 1}).
        layer = jax.tree_util.tree_map(lambda a, i=i: a[:, i], params['stack'])
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        ln = layer['LayerNorm_0']
        row = lambda v: v.reshape(1, -1)  # rank promotion raises on (3, 8) * (8,)
        normed = (x - mean) / jnp.sqrt(var + 1e-6) * row(ln['scale']) + row(ln['bias'])
        mlp = layer['mlp']
        h = jax.nn.gelu(normed @ mlp['Dense_0']['kernel'] + row(mlp['Dense_0']['bias']))
        x = x + 0.5 * (h @ mlp['Dense_1']['kernel'] + row(mlp['Dense_1']['bias']))
    head = params['head']['Dense_0']
    expected = x @ head['kernel'] + head['bias'].reshape(1, -1)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
