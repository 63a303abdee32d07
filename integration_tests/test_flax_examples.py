"""Flax's example models, written once against a parameter ``nn`` and run with
``flax.linen`` and with ``linen.nn``: same variables, outputs and gradients, bit for bit.

The models follow the documented architectures of Flax's examples (mnist's CNN,
imagenet's ResNet, lm1b's decoder-only Transformer with cache decoding, vae, seq2seq,
sst2, ppo's actor-critic, nlp_seq's tagger), scaled down to a few units so the whole file
stays fast. They run under the suite's strict rank promotion. Only the import differs
between the two runs: the point is that a Flax program is a linen program.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

flax_nn = pytest.importorskip('flax.linen')

import linen.nn as linen_nn  # noqa: E402

pytestmark = pytest.mark.flax

KEY = jax.random.key(3)


def _normal(shape, seed=1):
    return jax.random.normal(jax.random.key(seed), shape)


def _tokens(shape, vocab, seed=2):
    return jax.random.randint(jax.random.key(seed), shape, 1, vocab)


# ----------------------------------------------------------------------------- models


def mnist_cnn(nn):
    class CNN(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.relu(nn.Conv(features=8, kernel_size=(3, 3))(x))
            x = nn.avg_pool(x, window_shape=(2, 2), strides=(2, 2))
            x = nn.relu(nn.Conv(features=16, kernel_size=(3, 3))(x))
            x = nn.avg_pool(x, window_shape=(2, 2), strides=(2, 2))
            x = x.reshape((x.shape[0], -1))
            x = nn.relu(nn.Dense(features=16)(x))
            return nn.Dense(features=10)(x)

    return CNN()


def resnet(nn):
    class ResNetBlock(nn.Module):
        filters: int
        conv: object
        norm: object
        strides: tuple = (1, 1)

        @nn.compact
        def __call__(self, x):
            residual = x
            y = self.conv(self.filters, (3, 3), self.strides)(x)
            y = nn.relu(self.norm()(y))
            y = self.conv(self.filters, (3, 3))(y)
            y = self.norm(scale_init=nn.initializers.zeros_init())(y)
            if residual.shape != y.shape:
                residual = self.conv(self.filters, (1, 1), self.strides, name='conv_proj')(x)
                residual = self.norm(name='norm_proj')(residual)
            return nn.relu(residual + y)

    class ResNet(nn.Module):
        stage_sizes: tuple = (1, 1)
        num_filters: int = 4
        num_classes: int = 5

        @nn.compact
        def __call__(self, x, train: bool = True):
            conv = functools.partial(nn.Conv, use_bias=False)
            norm = functools.partial(
                nn.BatchNorm, use_running_average=not train, momentum=0.9, epsilon=1e-5
            )
            x = conv(self.num_filters, (7, 7), (2, 2), padding=[(3, 3), (3, 3)], name='conv_init')(
                x
            )
            x = nn.relu(norm(name='bn_init')(x))
            x = nn.max_pool(x, (3, 3), strides=(2, 2), padding='SAME')
            for i, size in enumerate(self.stage_sizes):
                for j in range(size):
                    strides = (2, 2) if i > 0 and j == 0 else (1, 1)
                    x = ResNetBlock(self.num_filters * 2**i, conv, norm, strides)(x)
            x = jnp.mean(x, axis=(1, 2))
            return nn.Dense(self.num_classes)(x)

    return ResNet()


def lm_transformer(nn, decode=False):
    """lm1b-style decoder: token + learned position embeddings, pre-norm blocks, tied logits."""
    vocab, dim, heads, max_len = 11, 8, 2, 6

    class Block(nn.Module):
        @nn.compact
        def __call__(self, x, mask):
            y = nn.LayerNorm()(x)
            y = nn.MultiHeadDotProductAttention(
                num_heads=heads, qkv_features=dim, decode=decode, deterministic=True
            )(y, y, mask=mask)
            x = x + y
            y = nn.LayerNorm()(x)
            y = nn.Dense(dim)(nn.gelu(nn.Dense(2 * dim)(y)))
            return x + y

    class Decoder(nn.Module):
        @nn.compact
        def __call__(self, tokens):
            embed = nn.Embed(vocab, dim, embedding_init=nn.initializers.normal(1.0))
            x = embed(tokens)
            pos = self.param('pos_embedding', nn.initializers.normal(0.02), (1, max_len, dim))
            if decode:
                is_initialized = self.has_variable('cache', 'position')
                index = self.variable('cache', 'position', lambda: jnp.array(0, jnp.int32))
                if is_initialized:
                    x = x + jax.lax.dynamic_slice_in_dim(pos, index.value, 1, axis=1)
                    index.value = index.value + 1
                else:
                    x = x + pos[:, : x.shape[1]]
                mask = None
            else:
                x = x + pos[:, : x.shape[1]]
                mask = nn.combine_masks(
                    nn.make_attention_mask(tokens > 0, tokens > 0), nn.make_causal_mask(tokens)
                )
            for _ in range(2):
                x = Block()(x, mask)
            return embed.attend(nn.LayerNorm()(x))

    return Decoder()


def vae(nn):
    class VAE(nn.Module):
        @nn.compact
        def __call__(self, x):
            h = nn.relu(nn.Dense(8, name='fc1')(x))
            mean = nn.Dense(3, name='fc2_mean')(h)
            logvar = nn.Dense(3, name='fc2_logvar')(h)
            eps = jax.random.normal(self.make_rng('noise'), logvar.shape)
            z = mean + eps * jnp.exp(0.5 * logvar)
            y = nn.relu(nn.Dense(8, name='fc3')(z))
            return nn.sigmoid(nn.Dense(x.shape[-1], name='fc4')(y)), mean, logvar

    return VAE()


def seq2seq(nn):
    vocab, hidden = 7, 5

    class Seq2Seq(nn.Module):
        @nn.compact
        def __call__(self, encoder_inputs, decoder_inputs):
            carry, _ = nn.RNN(nn.LSTMCell(hidden), return_carry=True, name='encoder')(
                encoder_inputs
            )
            # As Flax's example: a vocab-sized cell fed the encoder's hidden-size carry.
            _, outputs = nn.RNN(nn.LSTMCell(vocab), return_carry=True, name='decoder')(
                decoder_inputs, initial_carry=carry
            )
            return nn.Dense(vocab, name='logits')(outputs)

    return Seq2Seq()


def sst2(nn):
    class TextClassifier(nn.Module):
        @nn.compact
        def __call__(self, tokens, lengths, deterministic=False):
            x = nn.Embed(13, 6)(tokens)
            x = nn.Dropout(0.3)(x, deterministic=deterministic)
            carry, _ = nn.RNN(nn.OptimizedLSTMCell(5), return_carry=True)(x, seq_lengths=lengths)
            h = carry[1]
            h = nn.tanh(nn.Dense(4)(h))
            return nn.Dense(1)(h)

    return TextClassifier()


def ppo(nn):
    class ActorCritic(nn.Module):
        num_actions: int = 3

        @nn.compact
        def __call__(self, x):
            x = x.astype(jnp.float32) / 255.0
            x = nn.relu(nn.Conv(4, (4, 4), strides=(2, 2), name='conv1')(x))
            x = nn.relu(nn.Conv(8, (3, 3), strides=(1, 1), name='conv2')(x))
            x = x.reshape((x.shape[0], -1))
            x = nn.relu(nn.Dense(16, name='hidden')(x))
            logits = nn.Dense(self.num_actions, name='logits')(x)
            value = nn.Dense(1, name='value')(x)
            return nn.log_softmax(logits), value

    return ActorCritic()


def nlp_seq(nn):
    class Tagger(nn.Module):
        @nn.compact
        def __call__(self, tokens, train=True):
            x = nn.Embed(13, 8)(tokens)
            pos = self.param('pos', nn.initializers.normal(0.02), (1, tokens.shape[1], 8))
            x = nn.Dropout(0.1)(x + pos, deterministic=not train)
            mask = nn.make_attention_mask(tokens > 0, tokens > 0)
            for _ in range(2):
                y = nn.LayerNorm()(x)
                y = nn.SelfAttention(num_heads=2, dropout_rate=0.1, deterministic=not train)(
                    y, mask=mask
                )
                x = x + nn.Dropout(0.1)(y, deterministic=not train)
                y = nn.LayerNorm()(x)
                x = x + nn.Dense(8)(nn.relu(nn.Dense(16)(y)))
            return nn.Dense(4)(nn.LayerNorm()(x))

    return Tagger()


# ----------------------------------------------------------------------------- runs


def _assert_identical(ours, theirs):
    flat_a = {jax.tree_util.keystr(k): v for k, v in jax.tree_util.tree_leaves_with_path(ours)}
    flat_b = {jax.tree_util.keystr(k): v for k, v in jax.tree_util.tree_leaves_with_path(theirs)}
    assert sorted(flat_a) == sorted(flat_b)
    for path, b in flat_b.items():
        a = flat_a[path]
        assert a.shape == b.shape and a.dtype == b.dtype, path
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=path)


def _init_apply_grad(model, args, rngs=None, mutable=(), loss=lambda out: out, **kwargs):
    rngs = rngs or {}
    variables = model.init({'params': KEY, **rngs}, *args, **kwargs)
    params = variables['params']
    rest = {k: v for k, v in variables.items() if k != 'params'}

    def objective(params):
        out = model.apply(
            {'params': params, **rest}, *args, rngs=rngs, mutable=list(mutable), **kwargs
        )
        if mutable:
            out, updates = out
        else:
            updates = {}
        leaves = jax.tree_util.tree_leaves(loss(out))
        return sum(jnp.sum(jnp.sin(leaf)) for leaf in leaves), (out, updates)

    # One jit per model: compiling the program once is far cheaper than eager op-by-op.
    step = jax.jit(jax.value_and_grad(objective, has_aux=True))
    (value, (out, updates)), grads = step(params)
    return jax.tree_util.tree_map(jnp.asarray, dict(variables)), out, updates, value, grads


CASES = {
    'mnist_cnn': (mnist_cnn, lambda: (_normal((2, 8, 8, 1)),), {}, (), {}),
    'resnet': (resnet, lambda: (_normal((2, 16, 16, 3)),), {}, ('batch_stats',), {}),
    'lm1b_transformer': (
        lm_transformer,
        lambda: (jnp.array([[3, 5, 1, 2, 0, 0], [4, 4, 9, 10, 8, 1]]),),
        {},
        (),
        {},
    ),
    'vae': (vae, lambda: (jax.nn.sigmoid(_normal((2, 6))),), {'noise': jax.random.key(9)}, (), {}),
    'seq2seq': (
        seq2seq,
        lambda: (_normal((2, 4, 7)), jax.nn.one_hot(_tokens((2, 3), 7), 7)),
        {},
        (),
        {},
    ),
    'sst2': (
        sst2,
        lambda: (_tokens((3, 5), 13), jnp.array([5, 2, 4])),
        {'dropout': jax.random.key(4)},
        (),
        {},
    ),
    'ppo': (ppo, lambda: (_tokens((2, 12, 12, 4), 255).astype(jnp.uint8),), {}, (), {}),
    'nlp_seq': (
        nlp_seq,
        lambda: (jnp.array([[3, 5, 1, 2, 0], [4, 4, 9, 12, 8]]),),
        {'dropout': jax.random.key(4)},
        (),
        {},
    ),
}


@pytest.mark.filterwarnings('ignore:SelfAttention will be deprecated:DeprecationWarning')
@pytest.mark.parametrize('case', sorted(CASES))
def test_example_model_is_bit_identical(case):
    build, inputs, rngs, mutable, kwargs = CASES[case]
    args = inputs()
    ours = _init_apply_grad(build(linen_nn), args, rngs, mutable, **kwargs)
    theirs = _init_apply_grad(build(flax_nn), args, rngs, mutable, **kwargs)
    _assert_identical(ours, theirs)


def test_lm1b_cache_decoding_is_bit_identical_and_matches_full_pass():
    tokens = jnp.array([[3, 5, 1, 2, 7, 4], [4, 4, 9, 10, 8, 1]])

    def decode(nn):
        full = lm_transformer(nn)
        params = full.init(KEY, tokens)['params']
        step_model = lm_transformer(nn, decode=True)
        cache = step_model.init(KEY, tokens)['cache']
        logits = []
        for t in range(tokens.shape[1]):
            out, updates = step_model.apply(
                {'params': params, 'cache': cache}, tokens[:, t : t + 1], mutable=['cache']
            )
            cache = updates['cache']
            logits.append(out)
        return full.apply({'params': params}, tokens), jnp.concatenate(logits, axis=1)

    ours_full, ours_steps = decode(linen_nn)
    theirs_full, theirs_steps = decode(flax_nn)
    _assert_identical((ours_full, ours_steps), (theirs_full, theirs_steps))
    # Decoding step by step is the causal full pass (up to float rounding).
    np.testing.assert_allclose(ours_steps, ours_full, rtol=1e-5, atol=1e-5)
