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

pytestmark = [pytest.mark.flax, pytest.mark.usefixtures('shared_compilations')]

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
    # Compiled: one XLA program is much cheaper than compiling every op of an eager init.
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


def _program_jaxpr(model, args, rngs, mutable, **kwargs):
    """The jaxpr of init followed by the loss's value and gradient (traced, not run)."""

    def program(key, *args):
        variables = model.init({'params': key, **rngs}, *args, **kwargs)
        rest = {k: v for k, v in variables.items() if k != 'params'}

        def objective(params):
            out = model.apply(
                {'params': params, **rest}, *args, rngs=rngs, mutable=list(mutable), **kwargs
            )
            return sum(jnp.sum(jnp.sin(leaf)) for leaf in jax.tree_util.tree_leaves(out))

        return jax.value_and_grad(objective)(variables['params'])

    return str(jax.make_jaxpr(program)(KEY, *args))


@pytest.mark.filterwarnings('ignore:SelfAttention will be deprecated:DeprecationWarning')
@pytest.mark.parametrize('case', sorted(CASES))
def test_example_model_is_bit_identical(case):
    build, inputs, rngs, mutable, kwargs = CASES[case]
    args = inputs()
    ours = _init_apply_grad(build(linen_nn), args, rngs, mutable, **kwargs)
    theirs = _init_apply_grad(build(flax_nn), args, rngs, mutable, **kwargs)
    _assert_identical(ours, theirs)
    # Without strict rank promotion (JAX's default, where most users run) linen runs
    # the very same program, so it gives the same (Flax's) numbers: rank promotion
    # only decides whether an implicit broadcast is an error. Tracing under both
    # settings checks that, without compiling the model a second time.
    with jax.numpy_rank_promotion('allow'):
        allowed = _program_jaxpr(build(linen_nn), args, rngs, mutable, **kwargs)
    with jax.numpy_rank_promotion('raise'):
        strict = _program_jaxpr(build(linen_nn), args, rngs, mutable, **kwargs)
    assert allowed == strict


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


# ------------------------------------------------ wmt: encoder-decoder, cache, beam search


def _sinusoids(max_len, dim):
    position = np.arange(max_len, dtype=np.float32)[:, None]
    rate = np.exp(np.arange(0, dim, 2, dtype=np.float32) * -(np.log(10000.0) / dim))
    table = np.zeros((max_len, dim), np.float32)
    table[:, 0::2] = np.sin(position * rate)
    table[:, 1::2] = np.cos(position * rate)
    return jnp.asarray(table[None])


def wmt_transformer(nn, decode=False):
    """wmt-style Transformer: shared embedding, fixed sinusoidal positions (cached index
    when decoding), post-attention residual blocks, cross-attention, logits through
    the embedding; ``encode``/``decode`` methods used by the decoding loop."""
    vocab, dim, heads, mlp, max_len = 11, 8, 2, 16, 8

    class AddPositionEmbs(nn.Module):
        @nn.compact
        def __call__(self, x):
            table = _sinusoids(max_len, x.shape[-1])
            if decode:
                is_initialized = self.has_variable('cache', 'cache_index')
                index = self.variable('cache', 'cache_index', lambda: jnp.array(0, jnp.int32))
                if is_initialized:
                    i = index.value
                    index.value = i + 1
                    return x + jax.lax.dynamic_slice(table, (0, i, 0), (1, 1, x.shape[-1]))
            return x + table[:, : x.shape[1]]

    class Mlp(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(dim)(nn.relu(nn.Dense(mlp)(x)))

    class EncoderBlock(nn.Module):
        @nn.compact
        def __call__(self, x, mask):
            y = nn.LayerNorm()(x)
            y = nn.MultiHeadDotProductAttention(heads, qkv_features=dim, deterministic=True)(
                y, y, mask=mask
            )
            x = x + y
            return x + Mlp()(nn.LayerNorm()(x))

    class DecoderBlock(nn.Module):
        @nn.compact
        def __call__(self, y, encoded, self_mask, cross_mask):
            z = nn.LayerNorm()(y)
            z = nn.MultiHeadDotProductAttention(
                heads, qkv_features=dim, deterministic=True, decode=decode
            )(z, z, mask=self_mask)
            y = y + z
            z = nn.LayerNorm()(y)
            z = nn.MultiHeadDotProductAttention(heads, qkv_features=dim, deterministic=True)(
                z, encoded, mask=cross_mask
            )
            y = y + z
            return y + Mlp()(nn.LayerNorm()(y))

    class Transformer(nn.Module):
        def setup(self):
            self.embed = nn.Embed(vocab, dim, embedding_init=nn.initializers.normal(1.0))
            self.encoder_pos = AddPositionEmbs()
            self.decoder_pos = AddPositionEmbs()
            self.encoder_blocks = [EncoderBlock()]
            self.decoder_blocks = [DecoderBlock()]
            self.encoder_norm = nn.LayerNorm()
            self.decoder_norm = nn.LayerNorm()

        def encode(self, inputs):
            x = self.encoder_pos(self.embed(inputs))
            mask = nn.make_attention_mask(inputs > 0, inputs > 0)
            for block in self.encoder_blocks:
                x = block(x, mask)
            return self.encoder_norm(x)

        def decode(self, encoded, inputs, targets):
            if decode:
                self_mask = None
                cross_mask = nn.make_attention_mask(jnp.ones_like(targets) > 0, inputs > 0)
            else:
                # Teacher forcing: the decoder sees the targets shifted right (BOS = 0).
                pad = [(0, 0)] * (targets.ndim - 1) + [(1, 0)]
                targets = jnp.pad(targets, pad)[..., :-1]
                self_mask = nn.combine_masks(
                    nn.make_attention_mask(targets >= 0, targets >= 0),
                    nn.make_causal_mask(targets),
                )
                cross_mask = nn.make_attention_mask(targets >= 0, inputs > 0)
            y = self.decoder_pos(self.embed(targets))
            for block in self.decoder_blocks:
                y = block(y, encoded, self_mask, cross_mask)
            y = self.decoder_norm(y)
            return self.embed.attend(y) / jnp.sqrt(jnp.float32(y.shape[-1]))

        def __call__(self, inputs, targets):
            return self.decode(self.encode(inputs), inputs, targets)

    return Transformer()


def _beam_search(step, cache, encoded, inputs, beam, length):
    """Beam search over ``step(cache, encoded, inputs, token) -> (logits, cache)``.

    Batch entries are expanded to ``beam`` rows each; only the first beam is alive
    at the start, every step keeps the ``beam`` best continuations (total log-prob)
    and reorders the per-row cache accordingly.
    """
    batch = inputs.shape[0]
    rows = batch * beam
    encoded, inputs = jnp.repeat(encoded, beam, axis=0), jnp.repeat(inputs, beam, axis=0)
    scores = jnp.tile(jnp.array([0.0] + [-1e9] * (beam - 1)), (batch, 1))
    seqs = jnp.zeros((batch, beam, 0), jnp.int32)
    token = jnp.zeros((rows, 1), jnp.int32)
    first = jnp.arange(batch)[:, None]
    for _ in range(length):
        logits, cache = step(cache, encoded, inputs, token)
        vocab = logits.shape[-1]
        logp = jax.nn.log_softmax(logits[:, 0]).reshape(batch, beam, vocab)
        flat = (scores[..., None] + logp).reshape(batch, beam * vocab)
        scores, best = jax.lax.top_k(flat, beam)
        parent, token = best // vocab, (best % vocab).astype(jnp.int32)

        def reorder(x, parent=parent):
            if x.ndim == 0 or x.shape[0] != rows:
                return x  # cache indices are shared by all rows
            return x.reshape((batch, beam) + x.shape[1:])[first, parent].reshape(x.shape)

        cache = jax.tree_util.tree_map(reorder, cache)
        seqs = jnp.concatenate([seqs[first, parent], token[..., None]], axis=-1)
        token = token.reshape(rows, 1)
    return seqs, scores


def test_wmt_transformer_cache_decoding_and_beam_search_are_bit_identical():
    inputs = jnp.array([[3, 5, 1, 2, 7, 0], [4, 4, 9, 10, 8, 1]])
    targets = jnp.array([[2, 6, 1, 3, 0, 0, 0, 0], [5, 2, 2, 9, 4, 7, 0, 0]])
    beam, length = 2, 4

    def run(nn):
        model = wmt_transformer(nn)
        variables, logits, _, value, grads = _init_apply_grad(model, (inputs, targets))
        params = variables['params']
        step_model = wmt_transformer(nn, decode=True)
        encoded = jax.jit(functools.partial(model.apply, method='encode'))(
            {'params': params}, inputs
        )
        rows = jnp.ones((inputs.shape[0] * beam, targets.shape[1]), jnp.int32)
        cache = jax.jit(step_model.init)(KEY, jnp.repeat(inputs, beam, axis=0), rows)['cache']

        @jax.jit
        def step(cache, encoded, inputs, token):
            logits, updates = step_model.apply(
                {'params': params, 'cache': cache},
                encoded,
                inputs,
                token,
                mutable=['cache'],
                method='decode',
            )
            return logits, updates['cache']

        seqs, scores = _beam_search(step, cache, encoded, inputs, beam, length)
        return params, logits, value, grads, seqs, scores, model

    *ours, ours_model = run(linen_nn)
    *theirs, _ = run(flax_nn)
    _assert_identical(ours, theirs)
    # Independent check of the cached decoding: the best beam's score is the sum of
    # its tokens' log-probabilities under a full teacher-forced pass.
    params, seqs, scores = ours[0], ours[4], ours[5]
    best = seqs[:, 0]
    full = jax.jit(ours_model.apply)({'params': params}, inputs, best)
    logp = jax.nn.log_softmax(full)
    want = jnp.take_along_axis(logp, best[..., None], axis=-1)[..., 0].sum(-1)
    np.testing.assert_allclose(scores[:, 0], want, rtol=1e-5, atol=1e-5)
