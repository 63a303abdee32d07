"""The smallest end-to-end linen example: fit a two-layer MLP to a toy regression.

Run with ``python3 -m nox -s demo``. It uses ``linen.nn`` Modules when
``linen-module`` and ``linen-layers`` provide them, and otherwise the functional
core (``linen.core.init``/``apply``), so it runs on whatever is installed.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

import linen.core
import linen.nn as nn


def _has(*names: str) -> bool:
    available = set(dir(nn))
    return all(name in available for name in names)


def make_model():
    """``(init_fn, apply_fn, description)`` for a 1 -> 32 -> 1 MLP."""
    if _has('Module', 'compact', 'Dense'):

        class MLP(nn.Module):
            hidden: int = 32

            @nn.compact
            def __call__(self, x):
                x = nn.Dense(self.hidden)(x)
                x = jnp.tanh(x)
                return nn.Dense(1)(x)

        model = MLP()
        return model.init, model.apply, 'linen.nn Module (MLP with two nn.Dense)'

    def dense(scope, x, features):
        kernel = scope.param('kernel', jax.nn.initializers.lecun_normal(), (x.shape[-1], features))
        bias = scope.param('bias', jax.nn.initializers.zeros, (features,))
        return x @ kernel + bias

    def mlp(scope, x):
        h = jnp.tanh(scope.child(dense, 'Dense_0')(x, 32))
        return scope.child(dense, 'Dense_1')(h, 1)

    return linen.core.init(mlp), linen.core.apply(mlp), 'linen.core functional scopes'


def main() -> None:
    print(f'linen-core {linen.core.__version__}; linen.nn offers {len(dir(nn))} names')
    init_fn, apply_fn, description = make_model()
    print(f'model: {description}')

    x = jnp.linspace(-2.0, 2.0, 64)[:, None]
    y = jnp.sin(x)
    variables = init_fn(jax.random.key(0), x)
    if isinstance(variables, tuple):  # linen.core.init returns (output, variables)
        variables = variables[1]
    params = variables['params']

    def loss_fn(params):
        return jnp.mean((apply_fn({'params': params}, x) - y) ** 2)

    @jax.jit
    def step(params):
        loss, grads = jax.value_and_grad(loss_fn)(params)
        return jax.tree_util.tree_map(lambda p, g: p - 0.05 * g, params, grads), loss

    first = None
    for i in range(301):
        params, loss = step(params)
        first = loss if first is None else first
        if i % 100 == 0:
            print(f'step {i:3d}  mse {float(loss):.5f}')
    if not float(loss) < float(first):
        raise SystemExit('the loss did not decrease')
    shapes = jax.tree_util.tree_map(jnp.shape, params)
    print(f'parameters: {shapes}')
    print('demo finished: the loss decreased from', f'{float(first):.4f} to {float(loss):.4f}')


if __name__ == '__main__':
    main()
