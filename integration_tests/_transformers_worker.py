"""One side of ``test_thirdparty_transformers.py``: Hugging Face's Flax models, run here.

    python _transformers_worker.py {flax,linen} CASE OUT [--load DIR]

runs one case (a function below) with ``transformers`` on real Flax, or on linen with
Flax's module names pointing at linen's (set before ``transformers`` is imported: the
aliasing is process-wide, which is why each library gets its own process), and
writes into ``OUT`` what it computed: ``arrays.npz`` (every array leaf as raw bytes)
and ``meta.json`` (each leaf's tree path, dtype and shape, plus facts that are not
arrays). The test compares the two ``OUT`` folders. ``--load DIR``: the cases that
save checkpoints load those in ``DIR`` (the other run's ``OUT``), not their own.

The top of this file imports nothing heavy, so that the test reads ``CASES`` without
starting JAX; everything else is imported in ``main`` after the aliasing.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
import warnings
from pathlib import Path
from types import SimpleNamespace

# Small random-init models, as in transformers' own model tests: nothing downloaded.
TEXT = dict(
    vocab_size=99,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=37,
    max_position_embeddings=64,
)
BATCH, SEQ = 2, 7
DROPOUT_SEED = 7


def alias_flax_to_linen() -> None:
    """Make ``flax.linen``, ``flax.core``, ``flax.struct``, ... linen's modules.

    The idea of ``tools/flax_own_tests.py``: each Flax module name in ``sys.modules``
    (and as an attribute of its parent package) is replaced by linen's module of the
    same role. The submodules are read off linen's facades rather than listed, so a
    module linen adds is aliased too; ``flax`` itself stays (``flax.__version__``).
    """
    import types

    import flax  # noqa: F401  (the parent package whose attributes are replaced)

    import linen.core as core
    import linen.nn as nn

    def alias(name: str, module: types.ModuleType) -> None:
        sys.modules[name] = module
        parent, _, child = name.rpartition('.')
        setattr(sys.modules[parent], child, module)

    alias('flax.linen', nn)
    for sub in dir(nn):
        if isinstance(getattr(nn, sub, None), types.ModuleType):
            alias(f'flax.linen.{sub}', getattr(nn, sub))
    alias('flax.core', core)
    for sub in dir(core):
        if isinstance(getattr(core, sub, None), types.ModuleType):
            alias(f'flax.core.{sub}', getattr(core, sub))
    for sub in ('struct', 'serialization', 'traverse_util', 'errors', 'config'):
        alias(f'flax.{sub}', getattr(core, sub))


# --------------------------------------------------------------------------- inputs


def text_inputs(np, *, token_types: bool = True) -> dict:
    rng = np.random.RandomState(0)
    ids = rng.randint(3, TEXT['vocab_size'], size=(BATCH, SEQ)).astype('i4')
    mask = np.ones_like(ids)
    mask[1, -2:] = 0  # padding in the second row: the mask reaches the attention
    inputs = dict(input_ids=ids, attention_mask=mask)
    if token_types:
        inputs['token_type_ids'] = (np.arange(SEQ)[None, :] >= 3).astype('i4').repeat(BATCH, 0)
    return inputs


def labels(np, n: int, shape=(BATCH, SEQ)):
    return np.random.RandomState(1).randint(0, n, size=shape).astype('i4')


# --------------------------------------------------------------------------- what each case computes


def cross_entropy(jax, logits, targets):
    logp = jax.nn.log_softmax(logits.astype('float32'), axis=-1)
    return -jax.numpy.take_along_axis(logp, targets[..., None], axis=-1).mean()


def mean_square(x):
    return (x.astype('float32') ** 2).mean()


def standard(x, model, inputs: dict, loss) -> dict:
    """Parameters, outputs (every hidden state and attention map), dropout, gradients.

    ``loss(outputs)`` is a scalar; its gradient is taken in training mode (dropout
    on, the same ``dropout_rng``) twice: compiled (``jax.jit``) and op by op, as
    ``jax.grad`` runs without it (parts named ``grads_eager``: see the test).
    """
    jax = x.jax
    key = jax.random.PRNGKey(DROPOUT_SEED)

    def loss_of(params):
        return loss(model(**inputs, params=params, train=True, dropout_rng=key))

    return {
        'params': model.params,
        'outputs': model(**inputs, output_hidden_states=True, output_attentions=True),
        'dropout': model(**inputs, train=True, dropout_rng=key, output_attentions=True),
        'grads_jit': jax.jit(jax.grad(loss_of))(model.params),
        'grads_eager': jax.grad(loss_of)(model.params),
    }


def case_bert(x):
    """FlaxBertModel: embeddings with token types, padding mask, pooler; its checkpoints."""
    model = x.T.FlaxBertModel(x.T.BertConfig(**TEXT), seed=0)
    inputs = text_inputs(x.np)
    result = standard(x, model, inputs, lambda o: mean_square(o.last_hidden_state))
    return {**result, **checkpoints(x, x.T.FlaxBertModel, model, inputs)}


def checkpoints(x, cls, model, inputs: dict) -> dict:
    """``save_pretrained`` and ``from_pretrained``: msgpack through ``flax.serialization``.

    Saved whole and in shards (``max_shard_size``: several msgpack files and an index,
    each restored with ``from_bytes`` and joined with ``unflatten_dict``). Part
    ``saved`` holds every file's bytes; part ``loaded`` what ``from_pretrained`` makes
    of the checkpoints in ``x.load`` (Flax's own in either process: see the test).
    """
    np, saved = x.np, x.out / 'saved'
    model.save_pretrained(saved / 'whole')
    model.save_pretrained(saved / 'sharded', max_shard_size='8KB')
    files = sorted(p for p in saved.rglob('*') if p.is_file())
    loaded = {}
    for layout in ('whole', 'sharded'):
        restored = cls.from_pretrained(x.load / 'saved' / layout)
        loaded[layout] = {'params': restored.params, 'outputs': restored(**inputs)}
    return {
        'saved': {str(p.relative_to(saved)): np.frombuffer(p.read_bytes(), 'u1') for p in files},
        'loaded': loaded,
    }


def case_bert_mlm_lazy(x):
    """FlaxBertForMaskedLM with ``_do_init=False``: ``init_weights`` by hand, tied embeddings.

    The masked-LM head reads the word embeddings through ``self.bert.variables``.
    """
    jax, np = x.jax, x.np
    model = x.T.FlaxBertForMaskedLM(x.T.BertConfig(**TEXT), seed=0, _do_init=False)
    shapes = model.params_shape_tree  # from jax.eval_shape of init
    params = model.init_weights(jax.random.PRNGKey(3), (BATCH, SEQ))
    inputs = text_inputs(np)
    targets = labels(np, TEXT['vocab_size'])

    def loss_of(params):
        return cross_entropy(jax, model(**inputs, params=params).logits, targets)

    return {
        'shapes': jax.tree_util.tree_map(lambda s: np.zeros(s.shape, s.dtype), shapes),
        'params': params,
        'outputs': model(**inputs, params=params, output_hidden_states=True),
        'grads_eager': jax.grad(loss_of)(params),
        'grads_jit': jax.jit(jax.grad(loss_of))(params),
    }


def case_roberta_remat(x):
    """FlaxRobertaForMaskedLM with ``gradient_checkpointing=True`` (``nn_partitioning.remat``).

    Dropout inside the rematerialised layers: the backward pass recomputes them, so
    their dropout masks must come out the same twice.
    """
    np = x.np
    config = x.T.RobertaConfig(**TEXT, pad_token_id=1)
    model = x.T.FlaxRobertaForMaskedLM(config, seed=0, gradient_checkpointing=True)
    targets = labels(np, TEXT['vocab_size'])
    return standard(x, model, text_inputs(np), lambda o: cross_entropy(x.jax, o.logits, targets))


def case_gpt2(x):
    """FlaxGPT2LMHeadModel: a forward pass, then decoding with ``init_cache``.

    The prompt fills the cache, then one token at a time with ``past_key_values``;
    then ``generate`` (greedy, its loop under ``jax.jit``) does the same on its own.
    """
    jax, np, jnp = x.jax, x.np, x.jnp
    config = x.T.GPT2Config(
        vocab_size=99, n_embd=32, n_layer=2, n_head=4, n_positions=64,
        bos_token_id=98, eos_token_id=98, pad_token_id=98,
    )  # fmt: skip
    model = x.T.FlaxGPT2LMHeadModel(config, seed=0)
    inputs = text_inputs(np, token_types=False)
    targets = labels(np, 99)
    result = standard(x, model, inputs, lambda o: cross_entropy(jax, o.logits, targets))

    prompt, steps, max_length = inputs['input_ids'][:, :4], 3, 10
    cache = model.init_cache(BATCH, max_length)
    mask = jnp.ones((BATCH, max_length), 'i4')
    position = jnp.broadcast_to(jnp.arange(4)[None], (BATCH, 4))
    out = model(prompt, attention_mask=mask, past_key_values=cache, position_ids=position)
    decoded = {'cache_init': cache, 'prompt_logits': out.logits}
    token = out.logits[:, -1:].argmax(-1)
    for step in range(steps):
        position = jnp.full((BATCH, 1), 4 + step, 'i4')
        out = model(
            token, attention_mask=mask, past_key_values=out.past_key_values, position_ids=position
        )
        decoded[f'step{step}_logits'] = out.logits
        token = out.logits[:, -1:].argmax(-1)
    decoded['cache_final'] = out.past_key_values
    result['decode'] = decoded
    result['generate'] = model.generate(prompt, max_new_tokens=4, do_sample=False).sequences
    return result


def case_bart(x):
    """FlaxBartForConditionalGeneration: ``__call__``, then ``encode`` and ``decode``.

    ``decode`` whole, then one token at a time through ``init_cache`` and
    ``past_key_values`` (self-attention cached, cross-attention over the encoding).
    """
    jax, np, jnp = x.jax, x.np, x.jnp
    config = x.T.BartConfig(
        vocab_size=99, d_model=32, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=37,
        decoder_ffn_dim=37, max_position_embeddings=64,
        bos_token_id=0, pad_token_id=1, eos_token_id=2, decoder_start_token_id=2,
    )  # fmt: skip
    model = x.T.FlaxBartForConditionalGeneration(config, seed=0)
    source = text_inputs(np, token_types=False)
    target_ids = labels(np, 99, (BATCH, 5)) + 3
    inputs = dict(**source, decoder_input_ids=target_ids)
    result = standard(x, model, inputs, lambda o: cross_entropy(jax, o.logits, target_ids))

    encoded = model.encode(**source, output_hidden_states=True, output_attentions=True)
    max_length = 8
    cache = model.init_cache(BATCH, max_length, encoded)
    decoded = {'encoded': encoded, 'cache_init': cache}
    full = model.decode(
        target_ids, encoded, encoder_attention_mask=source['attention_mask'],
        output_attentions=True,
    )  # fmt: skip
    decoded['full_logits'] = full.logits
    decoded['cross_attentions'] = full.cross_attentions
    past = cache
    mask = jnp.ones((BATCH, max_length), 'i4')
    for step in range(target_ids.shape[1]):
        out = model.decode(
            target_ids[:, step : step + 1], encoded, encoder_attention_mask=source['attention_mask'],
            decoder_attention_mask=mask, past_key_values=past,
            decoder_position_ids=jnp.full((BATCH, 1), step, 'i4'),
        )  # fmt: skip
        decoded[f'step{step}_logits'] = out.logits
        past = out.past_key_values
    decoded['cache_final'] = past
    result['decode'] = decoded
    return result


def case_vit(x):
    """FlaxViTForImageClassification (patch convolution, CLS token), then in bfloat16."""
    jax, np, jnp = x.jax, x.np, x.jnp
    config = x.T.ViTConfig(
        image_size=16, patch_size=4, num_channels=3, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=37, num_labels=3,
    )  # fmt: skip
    model = x.T.FlaxViTForImageClassification(config, seed=0)
    pixels = np.random.RandomState(2).normal(size=(BATCH, 3, 16, 16)).astype('float32')
    targets = np.array([0, 2], 'i4')
    result = standard(
        x, model, dict(pixel_values=pixels), lambda o: cross_entropy(jax, o.logits, targets)
    )
    half = x.T.FlaxViTForImageClassification(config, seed=0, dtype=jnp.bfloat16)
    result['bf16_params'] = half.params
    result['bf16_outputs'] = half(pixels, output_hidden_states=True)
    return result


# transformers' own code in these models broadcasts arrays of different ranks (an LM
# head's ``logits += bias``), which JAX's
# ``jax_numpy_rank_promotion='raise'`` (Flax's CI setting) refuses under Flax as well.
# Their cases run with rank promotion allowed; the other cases keep it an error.
RANK_PROMOTING = {'bert_mlm_lazy', 'roberta_remat', 'gpt2', 'bart'}

# The cases that also save and load checkpoints (the parts 'saved' and 'loaded').
CHECKPOINTING = ('bert',)

CASES = {
    'bert': case_bert,
    'bert_mlm_lazy': case_bert_mlm_lazy,
    'roberta_remat': case_roberta_remat,
    'gpt2': case_gpt2,
    'bart': case_bart,
    'vit': case_vit,
}


# --------------------------------------------------------------------------- recording


def record(jax, np, tree) -> tuple[list[dict], list]:
    """Every leaf of ``tree``: its path (``keystr``), type, dtype, shape and raw bytes.

    The path spells the containers' keys, so a Flax output dataclass whose pytree
    registration differed would show here as different paths. The type tells a JAX
    array from a NumPy one or a Python number.
    """
    leaves, rows, data = jax.tree_util.tree_flatten_with_path(tree)[0], [], []
    for path, leaf in leaves:
        array = np.asarray(leaf)
        rows.append(
            {
                'path': jax.tree_util.keystr(path),
                'dtype': str(array.dtype),
                'shape': list(array.shape),
                'type': 'jax.Array' if isinstance(leaf, jax.Array) else type(leaf).__name__,
            }
        )
        data.append(np.frombuffer(np.ascontiguousarray(array).tobytes(), np.uint8))
    return rows, data


def containers(tree, found=None) -> list[str]:
    """The names of the container types in ``tree`` (``dict`` or ``FrozenDict``, ...)."""
    found = set() if found is None else found
    if isinstance(tree, dict) or hasattr(tree, 'items'):
        found.add(type(tree).__name__)
        for value in tree.values():
            containers(value, found)
    elif isinstance(tree, list | tuple):
        found.add(type(tree).__name__)
        for value in tree:
            containers(value, found)
    return sorted(found)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument('library', choices=('flax', 'linen'))
    parser.add_argument('case', choices=sorted(CASES))
    parser.add_argument('out', type=Path)
    parser.add_argument('--load', type=Path, help='the folder of the checkpoints to load')
    args = parser.parse_args(argv)
    # Flax's CI conditions: warnings are errors here too (the test's process sets
    # rank promotion and the host devices in the environment this one inherits).
    warnings.simplefilter('error')
    import flax.linen

    flax_module = flax.linen.Module  # real Flax's, before any aliasing
    if args.library == 'linen':
        alias_flax_to_linen()

    import jax
    import jax.numpy as jnp
    import numpy as np
    import transformers

    # transformers logs (logging, not a Python warning) that its Flax classes are
    # deprecated; quiet, so that a failure's stderr shows the failure.
    transformers.logging.set_verbosity_error()
    if args.case in RANK_PROMOTING:
        jax.config.update('jax_numpy_rank_promotion', 'allow')
    x = SimpleNamespace(
        jax=jax, jnp=jnp, np=np, T=transformers, out=args.out, load=args.load or args.out
    )

    args.out.mkdir(parents=True, exist_ok=True)
    meta: dict = {'library': args.library, 'error': None}
    try:
        result = CASES[args.case](x)
        meta['foreign_modules'] = foreign_modules(flax_module, sys.modules['flax.linen'].Module)
        rows, data = record(jax, np, result)
        meta['leaves'] = rows
        meta['containers'] = containers(result)
        np.savez(args.out / 'arrays.npz', *data)
    except Exception:
        meta['error'] = traceback.format_exc()
    (args.out / 'meta.json').write_text(json.dumps(meta, indent=1))
    return 0


def foreign_modules(flax_module: type, in_use: type) -> list[str]:
    """The Module classes of transformers' loaded Flax models that are not ``in_use``'s.

    In the linen process every one must be linen's: an alias that missed would leave
    real Flax running under the linen label.
    """
    found = []
    for name, module in list(sys.modules.items()):
        if not (name.startswith('transformers.models.') and '.modeling_flax_' in name):
            continue
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, flax_module | in_use):
                if not issubclass(obj, in_use):
                    found.append(f'{obj.__module__}.{obj.__qualname__}')
    return sorted(found)


if __name__ == '__main__':
    sys.exit(main())
