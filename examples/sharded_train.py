"""Train a small transformer block on simulated CPU devices in DP, TP or FSDP layout.

    python examples/sharded_train.py --layout tp --devices 4 --steps 5

Parameters are annotated with logical axis names (``embed``, ``mlp``, ``heads``);
the layout is only a choice of rules mapping them to a ``('data', 'model')`` mesh.
The variables are initialised straight into their shardings, and each step prints
its time; at the end the per-device bytes of parameters and optimizer state show
what the layout saves. See docs/scaling.md for the walk-through.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--layout', choices=('dp', 'tp', 'fsdp'), default='dp')
    parser.add_argument('--devices', type=int, default=4, help='simulated CPU devices')
    parser.add_argument('--steps', type=int, default=5)
    parser.add_argument('--batch', type=int, default=16)
    parser.add_argument('--embed', type=int, default=64)
    return parser.parse_args()


ARGS = _parse() if __name__ == '__main__' else None
if ARGS is not None and 'jax' not in sys.modules:
    # The device count is fixed when JAX starts, so it is set before the import.
    flags = os.environ.get('XLA_FLAGS', '')
    if '--xla_force_host_platform_device_count' not in flags:
        os.environ['XLA_FLAGS'] = f'{flags} --xla_force_host_platform_device_count={ARGS.devices}'
    os.environ.setdefault('JAX_PLATFORMS', 'cpu')

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import linen.nn as nn  # noqa: E402

HEADS = 4

# One mesh ('data', 'model'); the layouts differ only in their rules.
LAYOUTS = {
    # Batch split over every device; parameters replicated.
    'dp': (lambda n: (n, 1), (('batch', 'data'), ('embed', None), ('mlp', None), ('heads', None))),
    # Hidden and head dimensions split over 'model'; the batch is not split.
    'tp': (
        lambda n: (1, n),
        (('batch', 'data'), ('embed', None), ('mlp', 'model'), ('heads', 'model')),
    ),
    # Batch split over 'data', and every parameter split over 'data' too.
    'fsdp': (
        lambda n: (n, 1),
        (('batch', 'data'), ('embed', 'data'), ('mlp', 'data'), ('heads', 'data')),
    ),
}


def _dense(features: int, names: tuple[str, str], name: str) -> nn.Dense:
    init = nn.with_logical_partitioning(nn.initializers.lecun_normal(), names)
    return nn.Dense(features, use_bias=False, kernel_init=init, name=name)


class Block(nn.Module):
    """Pre-norm self-attention and MLP, every kernel named by logical axes."""

    embed: int

    @nn.compact
    def __call__(self, x):
        batch, length, _ = x.shape
        head = self.embed // HEADS
        h = nn.LayerNorm(name='ln_attn')(x)
        q, k, v = (
            _dense(self.embed, ('embed', 'heads'), n)(h).reshape(batch, length, HEADS, head)
            for n in ('query', 'key', 'value')
        )
        weights = jax.nn.softmax(jnp.einsum('bqhd,bkhd->bhqk', q, k) / np.sqrt(head), axis=-1)
        attn = jnp.einsum('bhqk,bkhd->bqhd', weights, v).reshape(batch, length, self.embed)
        x = x + _dense(self.embed, ('heads', 'embed'), 'out')(attn)
        h = nn.LayerNorm(name='ln_mlp')(x)
        h = nn.gelu(_dense(4 * self.embed, ('embed', 'mlp'), 'mlp_in')(h))
        return x + _dense(self.embed, ('mlp', 'embed'), 'mlp_out')(h)


def per_device_bytes(tree) -> dict[str, int]:
    """Bytes each device holds of the arrays of ``tree``."""
    held: dict[str, int] = {}
    for leaf in jax.tree_util.tree_leaves(nn.unbox(tree)):
        for shard in leaf.addressable_shards:
            key = str(shard.device)
            held[key] = held.get(key, 0) + shard.data.nbytes
    return held


def train(layout: str, steps: int, batch: int, embed: int, length: int = 8):
    """Returns (losses, step times in s, per-device bytes of params + optimizer state)."""
    mesh_shape, rules = LAYOUTS[layout]
    mesh = jax.make_mesh(
        mesh_shape(jax.device_count()), ('data', 'model'), axis_types=(AxisType.Auto,) * 2
    )
    model, tx = Block(embed), optax.adamw(1e-3)
    key_x, key_y = jax.random.split(jax.random.key(0))
    x = jax.random.normal(key_x, (batch, length, embed))
    y = jax.random.normal(key_y, (batch, length, embed))

    def init(key):
        params = model.init(key, x)['params']
        return params, tx.init(params)

    with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
        abstract = jax.eval_shape(init, jax.random.key(1))
        shardings = nn.logical_to_mesh_sharding(nn.get_partition_spec(abstract), mesh, rules)
        params, opt_state = jax.jit(init, out_shardings=shardings)(jax.random.key(1))
        batch_sharding = NamedSharding(mesh, P('data'))
        x, y = jax.device_put(x, batch_sharding), jax.device_put(y, batch_sharding)

        @jax.jit
        def step(params, opt_state, x, y):
            def loss_fn(p):
                return jnp.mean((model.apply({'params': p}, x) - y) ** 2)

            loss, grads = jax.value_and_grad(loss_fn)(params)
            updates, opt_state = tx.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state, loss

        losses, times = [], []
        for _ in range(steps):
            start = time.perf_counter()
            params, opt_state, loss = step(params, opt_state, x, y)
            losses.append(float(loss))  # waits for the step
            times.append(time.perf_counter() - start)
    return losses, times, per_device_bytes((params, opt_state))


def main(args: argparse.Namespace) -> None:
    print(f'{args.layout}: {jax.device_count()} devices, batch {args.batch}, embed {args.embed}')
    losses, times, held = train(args.layout, args.steps, args.batch, args.embed)
    for i, (loss, seconds) in enumerate(zip(losses, times, strict=True)):
        note = ' (includes compilation)' if i == 0 else ''
        print(f'step {i}: loss {loss:.4f}  {seconds * 1e3:8.1f} ms{note}')
    for device, nbytes in sorted(held.items()):
        print(f'{device}: {nbytes / 1024:.1f} KiB of parameters and optimizer state')


if __name__ == '__main__':
    main(ARGS)
