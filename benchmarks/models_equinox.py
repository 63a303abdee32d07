"""The benchmark models in Equinox.

Equinox layers act on one example, so batches go through ``jax.vmap``. The model is
split with ``eqx.partition`` into its arrays (the ``params`` every library hands to
the measures) and the static rest, which ``apply`` closes over; that keeps
``jax.jit`` usable exactly as for the other libraries. The scanned stack builds its
blocks with ``eqx.filter_vmap`` and runs them with ``jax.lax.scan``.
"""

from __future__ import annotations

import equinox as eqx
import jax

from benchmarks._impl import Impl
from benchmarks._sizes import LN_EPSILON, Sizes


class MLP(eqx.Module):
    layers: list

    def __init__(self, depth, width, key):
        self.layers = [eqx.nn.Linear(width, width, key=k) for k in jax.random.split(key, depth)]

    def __call__(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = jax.nn.relu(x)
        return x


class EncoderBlock(eqx.Module):
    ln1: eqx.nn.LayerNorm
    attn: eqx.nn.MultiheadAttention
    ln2: eqx.nn.LayerNorm
    fc1: eqx.nn.Linear
    fc2: eqx.nn.Linear

    def __init__(self, s: Sizes, key):
        ka, k1, k2 = jax.random.split(key, 3)
        self.ln1 = eqx.nn.LayerNorm(s.tf_width, eps=LN_EPSILON)
        self.attn = eqx.nn.MultiheadAttention(
            s.tf_heads,
            s.tf_width,
            use_query_bias=True,
            use_key_bias=True,
            use_value_bias=True,
            use_output_bias=True,
            key=ka,
        )
        self.ln2 = eqx.nn.LayerNorm(s.tf_width, eps=LN_EPSILON)
        self.fc1 = eqx.nn.Linear(s.tf_width, s.tf_hidden, key=k1)
        self.fc2 = eqx.nn.Linear(s.tf_hidden, s.tf_width, key=k2)

    def __call__(self, x):
        # x: (seq, width), one example.
        h = jax.vmap(self.ln1)(x)
        x = x + self.attn(h, h, h)
        h = jax.vmap(lambda v: jax.nn.relu(self.fc1(self.ln2(v))))(x)
        return x + jax.vmap(self.fc2)(h)


class Encoder(eqx.Module):
    blocks: list
    ln_f: eqx.nn.LayerNorm

    def __init__(self, s: Sizes, key):
        self.blocks = [EncoderBlock(s, k) for k in jax.random.split(key, s.tf_blocks)]
        self.ln_f = eqx.nn.LayerNorm(s.tf_width, eps=LN_EPSILON)

    def __call__(self, x):
        for block in self.blocks:
            x = block(x)
        return jax.vmap(self.ln_f)(x)


class ResBlock(eqx.Module):
    fc1: eqx.nn.Linear
    fc2: eqx.nn.Linear

    def __init__(self, width, key):
        k1, k2 = jax.random.split(key)
        self.fc1 = eqx.nn.Linear(width, width, key=k1)
        self.fc2 = eqx.nn.Linear(width, width, key=k2)

    def __call__(self, x):
        return x + self.fc2(jax.nn.relu(self.fc1(x)))


class Scanned(eqx.Module):
    blocks: ResBlock  # every array leaf carries a leading axis of length res_blocks

    def __init__(self, s: Sizes, key):
        make = eqx.filter_vmap(lambda k: ResBlock(s.res_width, k))
        self.blocks = make(jax.random.split(key, s.res_blocks))

    def __call__(self, x):
        arrays, static = eqx.partition(self.blocks, eqx.is_array)

        def step(h, block_arrays):
            return eqx.combine(block_arrays, static)(h), None

        x, _ = jax.lax.scan(step, x, arrays)
        return x


class Unrolled(eqx.Module):
    blocks: list

    def __init__(self, s: Sizes, key):
        self.blocks = [ResBlock(s.res_width, k) for k in jax.random.split(key, s.res_blocks)]

    def __call__(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def _is_array_like(leaf):
    return isinstance(leaf, jax.Array | jax.ShapeDtypeStruct)


def _impl(make, batch_dims: int) -> Impl:
    """Wrap an Equinox constructor ``make(key)`` as ``Impl``.

    ``batch_dims`` leading axes of ``x`` are vmapped over, since Equinox layers see
    one example at a time.
    """
    # The static part is the same for every key, so one abstract construction fixes it.
    skeleton = eqx.filter_eval_shape(make, jax.random.key(0))
    _, static = eqx.partition(skeleton, _is_array_like)

    def init(key, x):
        return eqx.partition(make(key), eqx.is_array)[0]

    def apply(params, x):
        model = eqx.combine(params, static)
        fn = model
        for _ in range(batch_dims):
            fn = jax.vmap(fn)
        return fn(x)

    return Impl(init, apply)


def models(sizes: Sizes) -> dict[str, Impl]:
    """The Equinox models, keyed like the pure JAX ones."""
    s = sizes
    return {
        'mlp': _impl(lambda k: MLP(s.mlp_depth, s.mlp_width, k), 1),
        'transformer': _impl(lambda k: Encoder(s, k), 1),
        'tiny': _impl(lambda k: MLP(2, s.tiny_width, k), 1),
        'scan': _impl(lambda k: Scanned(s, k), 1),
        'unrolled': _impl(lambda k: Unrolled(s, k), 1),
    }


def jit_tower(width: int, instances: int) -> Impl:
    """``instances`` ``eqx.nn.Linear`` blocks run by one fresh ``eqx.filter_jit`` function:
    Equinox's counterpart of ``instances`` ``nn.jit`` instances of one class."""

    @eqx.filter_jit
    def block(layer, x):
        return jax.numpy.tanh(jax.vmap(layer)(x))

    def init(key, x):
        return [eqx.nn.Linear(width, width, key=k) for k in jax.random.split(key, instances)]

    def apply(layers, x):
        for layer in layers:
            x = block(layer, x)
        return x

    return Impl(init, apply)
