"""The grammar of generated Linen programs: every node kind, how it is drawn at random,
how it renders to source text, and how it shrinks. Nothing else knows the node kinds.

Every node is a Module that maps an array of shape ``(2,) * (rank - 1) + (F,)`` to
an array of the same shape, so any node composes with any other: containers chain
their children, ``nn.vmap``/``nn.scan`` peel one leading axis off for the node they
wrap. A node needs a minimum rank (attention needs a length axis, a vmap needs an
axis to map over); any node that is valid at rank ``r`` is valid at ``r + 1``, which
is what lets the shrinker replace a transform by the node it wraps.

Nodes are frozen dataclasses; ``render`` writes class definitions into a
:class:`Source` and returns a :class:`Ctor` (how the parent constructs the node);
``shrinks`` yields simpler nodes (the shrinker tries each); ``features`` names what
the node exercises (differences are classed by the features of their shrunk program,
and ``known.py`` excludes features by name).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

FEATURE_DIM = 3
FLAX_IMPORT = 'import flax.linen as nn'
LINEN_IMPORT = 'import linen.nn as nn'

# The mutable collections a node may create besides params, intermediates and
# perturbations; a loop must carry each one present below it.
MUTABLE_STATE = frozenset({'batch_stats', 'state', 'counters', 'cache'})


@dataclass(frozen=True)
class Ctor:
    """How a parent builds a node: ``callee(*args, **extra)``."""

    callee: str
    args: tuple[str, ...] = ()

    def call(self, *extra: str) -> str:
        return f'{self.callee}({", ".join(self.args + extra)})'


@dataclass
class Source:
    """Class definitions collected while rendering, each under a fresh name."""

    classes: list[str] = field(default_factory=list)
    count: int = 0

    def fresh(self, stem: str) -> str:
        self.count += 1
        return f'{stem}{self.count}'

    def add(self, text: str) -> None:
        self.classes.append(text)


@dataclass(frozen=True)
class Ctx:
    """What the generator may still draw at this point of the tree."""

    rank: int
    depth: int = 0
    lifts: int = 0
    # Under nn.while_loop a sow (which grows a tuple) or a new perturbation would
    # change the loop carry: Flax refuses both, so the generator leaves them out.
    in_loop: bool = False
    # Below an nn.vmap(..., axis_name='batch'): a BatchNorm may reduce over that axis.
    axis_name: bool = False

    def down(self, **changes) -> Ctx:
        return replace(self, depth=self.depth + 1, **changes)


class Node:
    """Base of every grammar node."""

    def render(self, src: Source) -> Ctor:
        raise NotImplementedError

    def min_rank(self) -> int:
        return max([1] + [c.min_rank() for c in self.kids()])

    def kids(self) -> tuple[Node, ...]:
        return ()

    def with_kids(self, kids: tuple[Node, ...]) -> Node:
        return self

    def own_shrinks(self) -> Iterator[Node]:
        return iter(())

    def own_features(self) -> set[str]:
        return set()

    def own_collections(self) -> set[str]:
        return set()

    def own_rngs(self) -> set[str]:
        return set()

    # --- derived over the subtree

    def features(self) -> set[str]:
        out = self.own_features()
        for kid in self.kids():
            out |= kid.features()
        return out

    def collections(self) -> set[str]:
        out = self.own_collections()
        for kid in self.kids():
            out |= kid.collections()
        return out

    def rngs(self) -> set[str]:
        out = self.own_rngs()
        for kid in self.kids():
            out |= kid.rngs()
        return out

    def shrinks(self) -> Iterator[Node]:
        """Simpler nodes: own simplifications, then each kid's, kept in place."""
        yield from self.own_shrinks()
        kids = self.kids()
        for i, kid in enumerate(kids):
            for smaller in kid.shrinks():
                yield self.with_kids(kids[:i] + (smaller,) + kids[i + 1 :])

    def size(self) -> int:
        return 1 + sum(k.size() for k in self.kids())


# ----------------------------------------------------------------------- leaves

_LEAF_ARGS = {
    'Dense': ('FEATURES',),
    'LayerNorm': (),
    'BatchNorm': ('use_running_average=False', 'momentum=0.8'),
    'Dropout': ('rate=0.5', 'deterministic=False'),
    'SelfAttention': (
        'num_heads=1',
        'qkv_features=4',
        'out_features=FEATURES',
        'deterministic=True',
    ),  # fmt: skip
    'Conv': ('FEATURES', 'kernel_size=(2,)', "padding='SAME'"),
    # The rest of the layer set, drawn as one bucket (see Leaf.draw).
    'RMSNorm': (),
    'GroupNorm': ('num_groups=1',),
    'InstanceNorm': (),
    'DenseGeneral': ('FEATURES',),
    'Einsum': ('shape=(FEATURES, FEATURES)', "einsum_str='...a,ab->...b'"),
    'PReLU': (),
    'ConvTranspose': ('FEATURES', 'kernel_size=(2,)', "padding='SAME'"),
    'ConvLocal': ('FEATURES', 'kernel_size=(2,)', "padding='SAME'"),
    'WeightNorm': ('nn.Dense(FEATURES)',),
    'GRU': ('nn.GRUCell(FEATURES)',),  # rendered as nn.RNN(cell)
    'LSTM': ('nn.OptimizedLSTMCell(FEATURES)',),  # rendered as nn.RNN(cell)
    'Sequential': ('[nn.Dense(FEATURES), nn.gelu, nn.Dense(FEATURES)]',),
    'MaxPool': (
        "[nn.Dense(FEATURES), lambda x: nn.max_pool(x, (2,), padding='SAME')]",
    ),  # fmt: skip
    'AvgPool': (
        "[nn.Dense(FEATURES), lambda x: nn.avg_pool(x, (2,), padding='SAME')]",
    ),  # fmt: skip
}
# The callee of a layer rendered under another name.
_LEAF_CALLEE = {'GRU': 'RNN', 'LSTM': 'RNN', 'MaxPool': 'Sequential', 'AvgPool': 'Sequential'}
# Layers rendered as a class of their own (a call with more than the input).
_LEAF_CLASSES = {
    # Self-attention with a cache: init sizes the cache from the whole input, apply
    # decodes it one step at a time ('cache' mutable).
    'DecodeAttention': """class {name}(nn.Module):
    @nn.compact
    def __call__(self, x):
        attention = nn.MultiHeadDotProductAttention(
            num_heads=1, qkv_features=4, out_features=FEATURES, decode=True, deterministic=True
        )
        if self.is_initializing():
            return attention(x)
        steps = [attention(x[..., i : i + 1, :]) for i in range(x.shape[-2])]
        return jnp.concatenate(steps, axis=-2)""",
    'CausalAttention': """class {name}(nn.Module):
    @nn.compact
    def __call__(self, x):
        attention = nn.MultiHeadDotProductAttention(
            num_heads=1, qkv_features=4, out_features=FEATURES, deterministic=True
        )
        return attention(x, mask=nn.make_causal_mask(x[..., 0]))""",
    'SpectralNorm': """class {name}(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.SpectralNorm(nn.Dense(FEATURES))(x, update_stats=True)""",
}
# The smallest input rank of each layer (1 when not listed).
_LEAF_MIN_RANK = {
    'SelfAttention': 2,
    'Conv': 2,
    'DecodeAttention': 2,
    'GroupNorm': 2,
    'InstanceNorm': 3,
    'ConvTranspose': 2,
    'ConvLocal': 2,
    'GRU': 2,
    'LSTM': 2,
    'MaxPool': 2,
    'AvgPool': 2,
    'CausalAttention': 2,
}
_LEAF_STATE = {
    'BatchNorm': 'batch_stats',
    'SpectralNorm': 'batch_stats',
    'DecodeAttention': 'cache',
}
# Six families drawn as a second bucket, each in several variants (see Leaf.draw):
# layers computing in bfloat16 or float16 or keeping bfloat16 parameters,
# nn.Embed fed integer ids (and its attend), nn.Bidirectional over two nn.RNNs,
# nn.MultiHeadDotProductAttention with separate key and value inputs (mask, dropout,
# decoding cache, sown weights), nn.BatchNorm with and without its running averages,
# nn.Dropout with broadcast dimensions and rates 0, 0.5 and 1.
_EMBED = {
    # ids from the largest feature; the embedding's attend reads the sum back
    'EmbedArgmax': """class {name}(nn.Module):
    @nn.compact
    def __call__(self, x):
        embed = nn.Embed(num_embeddings=FEATURES, features=FEATURES)
        ids = jnp.argmax(x, axis=-1)
        return embed.attend(embed(ids) + x)""",
    # ids from rounded, clipped values: one embedding per feature, averaged
    'EmbedClip': """class {name}(nn.Module):
    @nn.compact
    def __call__(self, x):
        ids = (jnp.clip(jnp.round(x * 2.0), -3.0, 3.0) + 3.0).astype(jnp.int32)
        y = nn.Embed(7, FEATURES, name='table')(ids)
        return jnp.mean(y, axis=-2)""",
    # setup style; attend alone in one method, a lookup of fixed ids besides
    'EmbedSetup': """class {name}(nn.Module):
    def setup(self):
        self.embed = nn.Embed(5, FEATURES, embedding_init=nn.initializers.normal(0.5))
    def __call__(self, x):
        ids = jnp.argmin(jnp.abs(x), axis=-1).astype(jnp.uint8)
        scores = self.embed.attend(x)
        return scores[..., :FEATURES] + self.embed(ids)""",
}
_CELLS = {
    'GRU': 'nn.GRUCell(FEATURES)',
    'LSTM': 'nn.LSTMCell(FEATURES)',
    'OptLSTM': 'nn.OptimizedLSTMCell(FEATURES)',
    'Simple': 'nn.SimpleCell(FEATURES)',
}
_BIDIRECTIONAL_MERGES = {
    # the default merge concatenates: a Dense projects 2F features back to F
    'Concat': ('', 'return nn.Dense(FEATURES)(bi(x))'),
    'Mean': (', merge_fn=lambda a, b: (a + b) / 2', 'return bi(x)'),
    'Carry': (
        ', merge_fn=lambda a, b: a - b, return_carry=True',
        'carry, y = bi(x)\n'
        '        return y + jnp.expand_dims(jax.tree_util.tree_leaves(carry)[-1], -2)',
    ),
    # seq_lengths: the batch's first sequence is one step shorter (rank 3 and up)
    'Lengths': (
        ', merge_fn=jnp.maximum',
        'lengths = jnp.full(x.shape[:-2], x.shape[-2], jnp.int32).at[0].set(x.shape[-2] - 1)\n'
        '        return bi(x, seq_lengths=lengths)',
    ),
}
_BIDIRECTIONAL = {
    f'Bi{merge}{cell}': (
        'class {name}(nn.Module):\n'
        '    @nn.compact\n'
        '    def __call__(self, x):\n'
        f'        bi = nn.Bidirectional(nn.RNN({ctor}), nn.RNN({back}){attrs})\n'
        f'        {body}'
    )
    for merge, (attrs, body) in _BIDIRECTIONAL_MERGES.items()
    for cell, ctor in _CELLS.items()
    # Carry: a backward cell of another kind (its carry is the last leaf)
    for back in [_CELLS['GRU'] if merge == 'Carry' and cell != 'GRU' else ctor]
}
_CROSS = {
    # keys from a Dense of the input, values its time-reversed copy (two heads of
    # depth 2: the logits' scale 1/sqrt(2) is inexact, unlike SelfAttention's 1/2)
    'CrossKV': """class {name}(nn.Module):
    @nn.compact
    def __call__(self, x):
        k = nn.Dense(FEATURES)(x)
        attention = nn.MultiHeadDotProductAttention(
            num_heads=2, qkv_features=4, out_features=FEATURES, deterministic=True
        )
        return attention(x, k, jnp.flip(x, axis=-2))""",
    # a padding mask from the keys combined with a causal one; weights sown
    'CrossMask': """class {name}(nn.Module):
    @nn.compact
    def __call__(self, x):
        k = nn.Dense(FEATURES)(x)
        mask = nn.combine_masks(
            nn.make_attention_mask(x[..., 0] > -5.0, k[..., 0] > 0.0),
            nn.make_causal_mask(x[..., 0]),
        )
        attention = nn.MultiHeadDotProductAttention(
            num_heads=2, qkv_features=4, out_features=FEATURES, deterministic=True
        )
        return attention(x, k, k * 0.5, mask=mask, sow_weights={sow})""",
    # attention dropout from the 'dropout' stream, shared over heads or not
    'CrossDropout': """class {name}(nn.Module):
    @nn.compact
    def __call__(self, x):
        v = nn.Dense(FEATURES, use_bias=False)(x)
        attention = nn.MultiHeadDotProductAttention(
            num_heads=2, qkv_features=4, out_features=FEATURES, dropout_rate=0.5,
            broadcast_dropout={broadcast}, deterministic=False,
        )
        return attention(x, x[..., ::-1, :], v)""",
    # the dropout key handed in, deterministic given at the call
    'CrossDropoutRng': """class {name}(nn.Module):
    @nn.compact
    def __call__(self, x):
        attention = nn.MultiHeadDotProductAttention(
            num_heads=1, qkv_features=4, out_features=FEATURES, dropout_rate=0.25
        )
        rng = self.make_rng('noise')
        return attention(x, jnp.tanh(x), x, deterministic=False, dropout_rng=rng)""",
    # a decoding cache of separate keys and values: init sizes it, apply decodes
    'CrossDecode': """class {name}(nn.Module):
    @nn.compact
    def __call__(self, x):
        k = nn.Dense(FEATURES)(x)
        attention = nn.MultiHeadDotProductAttention(
            num_heads=2, qkv_features=6, out_features=FEATURES, decode=True, deterministic=True
        )
        if self.is_initializing():
            return attention(x, k, x)
        steps = [
            attention(x[..., i : i + 1, :], k[..., i : i + 1, :], x[..., i : i + 1, :])
            for i in range(x.shape[-2])
        ]
        return jnp.concatenate(steps, axis=-2)""",
}
_BATCH_NORM = {
    # the running averages updated (batch_stats mutable in apply)
    'BatchNormTrain': ('use_running_average=False', 'momentum=0.9', 'epsilon=1e-3'),
    # the running averages read, never written
    'BatchNormEval': ('use_running_average=True',),
    'BatchNormPlain': (
        'use_running_average=False',
        'momentum=0.5',
        'use_bias=False',
        'use_scale=False',
        'use_fast_variance=False',
    ),
}
_BATCH_NORM_CLASSES = {
    # one instance: a training call, then one reading the averages it just wrote
    'BatchNormTwice': """class {name}(nn.Module):
    @nn.compact
    def __call__(self, x):
        norm = nn.BatchNorm(momentum=0.7, epsilon=1e-4)
        y = norm(x, use_running_average=False)
        return norm(y, use_running_average=True)""",
    # use_running_average given at the call only
    'BatchNormCall': """class {name}(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.BatchNorm(momentum=0.99, axis=-1)(x, use_running_average=False)""",
}
# nn.BatchNorm(axis_name='batch'): drawn only below an nn.vmap that names the axis
# (Ctx.axis_name), where its statistics are means over the mapped axis too.
_BATCH_NORM_AXIS = {
    'BatchNormAxis': ('use_running_average=False', 'momentum=0.9', "axis_name='batch'"),
    'BatchNormAxisPlain': (
        'use_running_average=False',
        'momentum=0.5',
        "axis_name='batch'",
        'use_scale=False',
        'use_fast_variance=False',
    ),
}
_BATCH_NORM_AXIS_CLASSES = {
    # trained over the axis, then the running averages just written read back
    'BatchNormAxisTwice': """class {name}(nn.Module):
    @nn.compact
    def __call__(self, x):
        norm = nn.BatchNorm(momentum=0.8, epsilon=1e-4, axis_name='batch')
        y = norm(x, use_running_average=False)
        return norm(y, use_running_average=True)""",
}
AXIS_BATCH_NORMS = tuple(_BATCH_NORM_AXIS) + tuple(_BATCH_NORM_AXIS_CLASSES)
_DROPOUT = {
    'DropoutBroadcast': ('rate=0.5', 'broadcast_dims=(0,)', 'deterministic=False'),
    'DropoutFeatures': ('rate=0.5', 'broadcast_dims=(-1,)', 'deterministic=False'),
    'DropoutZero': ('rate=0.0', 'deterministic=False'),
    'DropoutAll': ('rate=1.0', 'broadcast_dims=(0,)', 'deterministic=False'),
    'DropoutNoise': ('0.5', "rng_collection='noise'", 'deterministic=False'),
}
_DROPOUT_CLASSES = {
    # deterministic given at the call only
    'DropoutCall': """class {name}(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dropout(0.25, broadcast_dims=(0,))(x, deterministic=False)""",
}
# Mixed precision: a layer computing in bfloat16 or float16 (its output cast back to
# the input's dtype, so a scan's carry keeps its type), or keeping bfloat16 parameters.
_PRECISION = {
    'DenseBf16': """class {name}(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(FEATURES, dtype=jnp.bfloat16)(x).astype(x.dtype)""",
    'DenseParamsBf16': """class {name}(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(FEATURES, param_dtype=jnp.bfloat16)(x)""",
    'DenseF16': """class {name}(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(FEATURES, dtype=jnp.float16, param_dtype=jnp.float16)(x).astype(x.dtype)""",
    'LayerNormBf16': """class {name}(nn.Module):
    @nn.compact
    def __call__(self, x):
        y = nn.LayerNorm(dtype=jnp.bfloat16, param_dtype=jnp.bfloat16)(x)
        return y.astype(x.dtype)""",
    'ConvBf16': """class {name}(nn.Module):
    @nn.compact
    def __call__(self, x):
        y = nn.Conv(FEATURES, kernel_size=(2,), padding='SAME', dtype=jnp.bfloat16)(x)
        return y.astype(x.dtype)""",
    'AttentionBf16': """class {name}(nn.Module):
    @nn.compact
    def __call__(self, x):
        attention = nn.MultiHeadDotProductAttention(
            num_heads=1, qkv_features=4, out_features=FEATURES, dtype=jnp.bfloat16,
            deterministic=True,
        )
        return attention(x).astype(x.dtype)""",
}
_FAMILIES = {
    'precision': tuple(_PRECISION),
    'embed': tuple(_EMBED),
    'bidirectional': tuple(_BIDIRECTIONAL),
    'cross': (
        'CrossKV',
        'CrossMask',
        'CrossMaskSow',
        'CrossDropout',
        'CrossDropoutHeads',
        'CrossDropoutRng',
        'CrossDecode',
    ),
    'batch_norm': tuple(_BATCH_NORM) + tuple(_BATCH_NORM_CLASSES),
    'dropout': tuple(_DROPOUT) + tuple(_DROPOUT_CLASSES),
}
_LEAF_ARGS.update(_BATCH_NORM)
_LEAF_ARGS.update(_BATCH_NORM_AXIS)
_LEAF_ARGS.update(_DROPOUT)
_LEAF_CALLEE.update({n: 'BatchNorm' for n in _BATCH_NORM})
_LEAF_CALLEE.update({n: 'BatchNorm' for n in _BATCH_NORM_AXIS})
_LEAF_CALLEE.update({n: 'Dropout' for n in _DROPOUT})
_LEAF_CLASSES.update(_PRECISION)
_LEAF_CLASSES.update(_EMBED)
_LEAF_CLASSES.update(_BIDIRECTIONAL)
_LEAF_CLASSES.update(
    {k: v for k, v in _CROSS.items() if '{sow}' not in v and '{broadcast}' not in v}
)
_LEAF_CLASSES['CrossMask'] = _CROSS['CrossMask'].replace('{sow}', 'False')
_LEAF_CLASSES['CrossMaskSow'] = _CROSS['CrossMask'].replace('{sow}', 'True')
_LEAF_CLASSES['CrossDropout'] = _CROSS['CrossDropout'].replace('{broadcast}', 'True')
_LEAF_CLASSES['CrossDropoutHeads'] = _CROSS['CrossDropout'].replace('{broadcast}', 'False')
_LEAF_CLASSES.update(_BATCH_NORM_CLASSES)
_LEAF_CLASSES.update(_BATCH_NORM_AXIS_CLASSES)
_LEAF_CLASSES.update(_DROPOUT_CLASSES)
_LEAF_MIN_RANK.update({'ConvBf16': 2, 'AttentionBf16': 2})
_LEAF_MIN_RANK.update({n: 2 for n in _BIDIRECTIONAL})
_LEAF_MIN_RANK.update({n: 3 for n in _BIDIRECTIONAL if n.startswith('BiLengths')})
_LEAF_MIN_RANK.update({n: 2 for n in _FAMILIES['cross']})
_LEAF_STATE.update({n: 'batch_stats' for n in _FAMILIES['batch_norm'] + AXIS_BATCH_NORMS})
_LEAF_STATE['CrossDecode'] = 'cache'
# Family variants that make the same variables when built under one name: one branch of
# an nn.cond/nn.switch may hold one and another branch its sibling (Flax accepts that;
# variants outside one group make other variables, which Flax refuses).
SAME_VARIABLES = (
    ('BatchNormTrain', 'BatchNormEval', 'BatchNormAxis'),
    ('BatchNormTwice', 'BatchNormCall', 'BatchNormAxisTwice'),
    tuple(_FAMILIES['dropout']),
    ('CrossKV', 'CrossMask'),
    ('CrossDropout', 'CrossDropoutHeads'),
    *((f'BiMean{cell}', f'BiLengths{cell}') for cell in _CELLS),
)
# Layers without parameters, and the rng stream each draws from.
_NO_PARAMS = frozenset({'Dropout', 'BatchNormPlain', *_FAMILIES['dropout']})
_LEAF_RNGS = {
    'Dropout': 'dropout',
    **{n: 'dropout' for n in _FAMILIES['dropout'] if n != 'DropoutZero'},
    'DropoutNoise': 'noise',
    'CrossDropout': 'dropout',
    'CrossDropoutHeads': 'dropout',
    'CrossDropoutRng': 'noise',
}
# Sown values: intermediates.
_LEAF_SOWS = frozenset({'CrossMaskSow'})
# A simpler variant of the same family, tried by the shrinker before Dense.
_LEAF_SIMPLER = {
    **{n: 'DenseBf16' for n in _PRECISION if n != 'DenseBf16'},
    **{n: 'EmbedArgmax' for n in _EMBED if n != 'EmbedArgmax'},
    **{
        f'Bi{merge}{cell}': f'BiMean{cell}' if merge != 'Mean' else 'BiMeanGRU'
        for merge in _BIDIRECTIONAL_MERGES
        for cell in _CELLS
        if (merge, cell) != ('Mean', 'GRU')
    },
    **{n: 'CrossKV' for n in _FAMILIES['cross'] if n != 'CrossKV'},
    **{n: 'BatchNorm' for n in _FAMILIES['batch_norm']},
    # the axis-name variants: the plainest one, then one without the axis name
    **{n: 'BatchNormAxis' for n in AXIS_BATCH_NORMS if n != 'BatchNormAxis'},
    'BatchNormAxis': 'BatchNorm',
    **{n: 'Dropout' for n in _FAMILIES['dropout']},
}
# Drawn as one bucket, so adding a layer does not thin out the common ones.
_MORE_LAYERS = (
    'RMSNorm',
    'GroupNorm',
    'InstanceNorm',
    'DenseGeneral',
    'Einsum',
    'PReLU',
    'ConvTranspose',
    'ConvLocal',
    'WeightNorm',
    'GRU',
    'LSTM',
    'Sequential',
    'MaxPool',
    'AvgPool',
    'CausalAttention',
    'SpectralNorm',
)
# The recurrent layers a vmap may be drawn over: nn.RNN of a cell, nn.Bidirectional.
RECURRENT = ('GRU', 'LSTM', *_BIDIRECTIONAL)
_PARTITION_INIT = {
    'mesh': "nn.with_partitioning(nn.initializers.lecun_normal(), (None, 'model'))",
    'logical': "nn.with_logical_partitioning(nn.initializers.lecun_normal(), ('embed', 'mlp'))",
}


@dataclass(frozen=True)
class Leaf(Node):
    """A layer of the library: ``nn.Dense``, ``nn.BatchNorm``, ``nn.Dropout``, ..."""

    layer: str
    partition: str | None = None  # Dense only: boxed kernel metadata

    def render(self, src: Source) -> Ctor:
        if self.layer in _LEAF_CLASSES:
            name = src.fresh(self.layer.removesuffix('Attention').removesuffix('Norm'))
            src.add(_LEAF_CLASSES[self.layer].format(name=name))
            return Ctor(name)
        args = _LEAF_ARGS[self.layer]
        if self.partition:
            args += (f'kernel_init={_PARTITION_INIT[self.partition]}',)
        return Ctor(f'nn.{_LEAF_CALLEE.get(self.layer, self.layer)}', args)

    def min_rank(self) -> int:
        return _LEAF_MIN_RANK.get(self.layer, 1)

    def own_shrinks(self):
        if self.partition:
            yield replace(self, partition=None)
        if self.layer in _LEAF_SIMPLER:
            yield Leaf(_LEAF_SIMPLER[self.layer])
        if self.layer != 'Dense':
            yield Leaf('Dense')

    def own_features(self):
        out = {f'layer.{self.layer}'}
        if self.partition:
            out.add(f'partition.{self.partition}')
        return out

    def own_collections(self):
        out = set() if self.layer in _NO_PARAMS else {'params'}
        if self.layer in _LEAF_STATE:
            out.add(_LEAF_STATE[self.layer])
        if self.layer in _LEAF_SOWS:
            out.add('intermediates')
        return out

    def own_rngs(self):
        return {_LEAF_RNGS[self.layer]} if self.layer in _LEAF_RNGS else set()

    @staticmethod
    def draw(rng: random.Random, ctx: Ctx) -> Leaf:
        layers = ['Dense'] * 4 + ['LayerNorm', 'BatchNorm', 'Dropout', 'more', 'more', 'family']
        if ctx.rank >= 2:
            layers += ['SelfAttention', 'Conv', 'DecodeAttention']
        layer = rng.choice(layers)
        if layer == 'more':
            layer = rng.choice([m for m in _MORE_LAYERS if _LEAF_MIN_RANK.get(m, 1) <= ctx.rank])
        elif layer == 'family':
            return Leaf.draw_family(rng, ctx)
        elif layer == 'BatchNorm' and ctx.axis_name and rng.random() < 0.5:
            layer = rng.choice(AXIS_BATCH_NORMS)
        partition = None
        if layer == 'Dense' and rng.random() < 0.25:
            partition = rng.choice(['mesh', 'logical'])
        return Leaf(layer, partition)

    @staticmethod
    def family_variants(family: str, ctx: Ctx) -> list[str]:
        """The variants of ``family`` valid at ``ctx`` (sown weights not in a loop;
        the axis-name BatchNorms only below a vmap naming the axis)."""
        variants = _FAMILIES[family]
        if family == 'batch_norm' and ctx.axis_name:
            variants += AXIS_BATCH_NORMS
        return [
            v
            for v in variants
            if _LEAF_MIN_RANK.get(v, 1) <= ctx.rank and not (ctx.in_loop and v in _LEAF_SOWS)
        ]

    @staticmethod
    def draw_family(rng: random.Random, ctx: Ctx, families: tuple[str, ...] = ()) -> Leaf:
        """A family (one of ``families``, any when empty), then one of its variants."""
        fits = [Leaf.family_variants(f, ctx) for f in families or tuple(_FAMILIES)]
        return Leaf(rng.choice(rng.choice([v for v in fits if v])))

    def same_variables(self, ctx: Ctx) -> list[str]:
        """The other variants valid at ``ctx`` that make this layer's variables."""
        family = self.family()
        group = next((g for g in SAME_VARIABLES if self.layer in g), ())
        valid = Leaf.family_variants(family, ctx) if family else []
        return [v for v in group if v != self.layer and v in valid]

    def family(self) -> str | None:
        if self.layer in AXIS_BATCH_NORMS:
            return 'batch_norm'
        return next((f for f, vs in _FAMILIES.items() if self.layer in vs), None)


# Ops of a hand-written leaf, in the order they appear in its __call__.
CUSTOM_OPS = ('param', 'variable', 'sow', 'perturb', 'rng', 'query')


@dataclass(frozen=True)
class Custom(Node):
    """A user Module using ``param``/``variable``/``sow``/``perturb``/``make_rng``, and
    reading its context (``query``: ``has_rng``, ``is_mutable_collection``,
    ``has_variable``, ``is_initializing``, each flag a power of two added to ``x``)."""

    ops: tuple[str, ...]
    style: str = 'compact'  # or 'setup': param and variable declared in setup
    collection: str = 'state'

    def render(self, src: Source) -> Ctor:
        name = src.fresh('Custom')
        setup_lines, body = [], []
        declare = {
            'param': "self.param('w', nn.initializers.normal(0.5), (FEATURES,))",
            'variable': f"self.variable('{self.collection}', 'count', "
            'lambda: jnp.zeros((), jnp.float32))',
        }
        for op in ('param', 'variable'):
            if op not in self.ops:
                continue
            attr = 'w' if op == 'param' else 'count'
            if self.style == 'setup':
                setup_lines.append(f'self.{attr} = {declare[op]}')
                ref = f'self.{attr}'
            else:
                body.append(f'{attr} = {declare[op]}')
                ref = attr
            if op == 'param':
                body.append(f'x = x * jnp.broadcast_to({ref}, x.shape)')
            else:
                body.append(f'{ref}.value = {ref}.value + 1.0')
                body.append(f'x = x + 0.1 * {ref}.value')
        if 'sow' in self.ops:
            body.append("self.sow('intermediates', 'h', x)")
        if 'perturb' in self.ops:
            body.append("x = self.perturb('p', x)")
        if 'rng' in self.ops:
            body.append("x = x + 0.1 * jax.random.normal(self.make_rng('noise'), x.shape)")
        if 'query' in self.ops:
            body.append(
                "flags = (self.has_rng('noise'), self.has_rng('dropout'), "
                f"self.is_mutable_collection('{self.collection}'), "
                "self.is_mutable_collection('intermediates'), "
                f"self.has_variable('{self.collection}', 'count'), "
                "self.has_variable('params', 'w'), self.is_initializing())"
            )
            body.append('x = x + sum(0.5**i for i, flag in enumerate(flags) if flag)')
        body.append('return x')
        lines = [f'class {name}(nn.Module):']
        if setup_lines:
            lines += ['    def setup(self):'] + [f'        {s}' for s in setup_lines]
        else:
            lines.append('    @nn.compact')
        lines.append('    def __call__(self, x):')
        lines += [f'        {b}' for b in body]
        src.add('\n'.join(lines))
        return Ctor(name)

    def own_shrinks(self):
        if self.style != 'compact':
            yield replace(self, style='compact')
        if self.collection != 'state':
            yield replace(self, collection='state')
        for op in self.ops:
            if len(self.ops) > 1:
                yield replace(self, ops=tuple(o for o in self.ops if o != op))

    def own_features(self):
        return {f'custom.{op}' for op in self.ops} | {f'custom.{self.style}'}

    def own_collections(self):
        names = {'param': 'params', 'variable': self.collection, 'sow': 'intermediates',
                 'perturb': 'perturbations'}  # fmt: skip
        return {names[o] for o in self.ops if o in names}

    def own_rngs(self):
        return {'noise'} if 'rng' in self.ops else set()

    @staticmethod
    def draw(rng: random.Random, ctx: Ctx) -> Custom:
        allowed = [o for o in CUSTOM_OPS if not (ctx.in_loop and o in ('sow', 'perturb'))]
        ops = tuple(o for o in allowed if rng.random() < 0.45) or ('param',)
        style = rng.choice(['compact', 'setup']) if {'param', 'variable'} & set(ops) else 'compact'
        return Custom(ops, style, rng.choice(['state', 'state', 'counters']))


# ------------------------------------------------------------------- containers


@dataclass(frozen=True)
class Child:
    """A submodule of a container and how the container holds and calls it."""

    node: Node
    # 'explicit': name='c<i>' in compact style. Mistakes users make, whose errors
    # must match Flax's: 'clash' (compact: two children named 'dup'), 'kwarg'
    # (setup: name= on a submodule assigned to an attribute).
    naming: str = 'auto'
    # setup: 'attr' | 'list' | 'dict'; either style: 'field' (a dataclass field of its
    # own) or 'fdict' (an entry of one dict field, which Module assignment freezes)
    storage: str = 'attr'
    # 'residual': x + child(x); 'twice': one instance called twice; 'penalty': child(x)
    # plus the gradient of its squared output with respect to x, taken with the user's own
    # jax.grad inside the module (a second call under a JAX transform, not a lifted one)
    combine: str = 'seq'


@dataclass(frozen=True)
class Container(Node):
    """A user Module chaining its children, with ``setup`` or ``@nn.compact``."""

    style: str
    children: tuple[Child, ...]
    head: bool = False  # a second method (setup style), for apply(method=...)

    def kids(self):
        return tuple(c.node for c in self.children)

    def with_kids(self, kids):
        return replace(
            self, children=tuple(replace(c, node=k) for c, k in zip(self.children, kids))
        )

    def render(self, src: Source) -> Ctor:
        name = src.fresh('Block')
        fields, field_args, setup, calls = [], [], [], []
        lists: dict[str, list[str]] = {'layers': [], 'blocks': [], 'subs': []}
        for i, child in enumerate(self.children):
            ctor = child.node.render(src)
            if child.storage == 'field':
                fields.append(f'    sub{i}: nn.Module')
                field_args.append(f'sub{i}={ctor.call()}')
                ref = f'self.sub{i}'
            elif child.storage == 'fdict':
                ref = f"self.subs['k{i}']"
                lists['subs'].append(f"'k{i}': {ctor.call()}")
            elif self.style == 'setup':
                if child.storage == 'list':
                    ref = f'self.layers[{len(lists["layers"])}]'
                    lists['layers'].append(ctor.call())
                elif child.storage == 'dict':
                    key = f'b{i}'
                    ref = f"self.blocks['{key}']"
                    lists['blocks'].append(f"'{key}': {ctor.call()}")
                else:
                    kwarg = ("name='kw'",) if child.naming == 'kwarg' else ()
                    setup.append(f'self.c{i} = {ctor.call(*kwarg)}')
                    ref = f'self.c{i}'
            else:
                names = {'explicit': (f"name='c{i}'",), 'clash': ("name='dup'",)}
                extra = names.get(child.naming, ())
                if child.combine in ('twice', 'penalty'):
                    calls.append(f'm{i} = {ctor.call(*extra)}')
                    ref = f'm{i}'
                else:
                    ref = ctor.call(*extra)
            if child.combine == 'residual':
                calls.append(f'x = x + {ref}(x)')
            elif child.combine == 'twice':
                calls.append(f'x = {ref}({ref}(x))')
            elif child.combine == 'penalty':
                calls.append(
                    f'x = {ref}(x) + 0.125 * jax.grad(lambda v: jnp.sum({ref}(v) ** 2))(x)'
                )
            else:
                calls.append(f'x = {ref}(x)')
        if lists['layers']:
            setup.append(f'self.layers = [{", ".join(lists["layers"])}]')
        if lists['blocks']:
            setup.append(f'self.blocks = {{{", ".join(lists["blocks"])}}}')
        if lists['subs']:
            fields.append('    subs: dict')
            field_args.append(f'subs={{{", ".join(lists["subs"])}}}')
        lines = [f'class {name}(nn.Module):', *fields]
        if self.style == 'setup':
            lines.append('    def setup(self):')
            lines += [f'        {s}' for s in setup] or ['        pass']
        else:
            lines.append('    @nn.compact')
        lines.append('    def __call__(self, x):')
        lines += [f'        {c}' for c in calls] + ['        return x']
        if self.head and self.style == 'setup':
            lines.append('    def head(self, x):')
            lines.append(f'        {calls[0]}')
            lines.append('        return x * 2.0')
        src.add('\n'.join(lines))
        return Ctor(name, tuple(field_args))

    def own_shrinks(self):
        for child in self.children:
            yield child.node
        if len(self.children) > 1:
            for i in range(len(self.children)):
                yield replace(self, children=self.children[:i] + self.children[i + 1 :])
        simple = {'naming': 'auto', 'storage': 'attr', 'combine': 'seq'}
        for i, child in enumerate(self.children):
            for key, value in simple.items():
                if getattr(child, key) != value:
                    kids = list(self.children)
                    kids[i] = replace(child, **{key: value})
                    yield replace(self, children=tuple(kids))
        if self.style != 'compact' and not self.head:
            yield replace(
                self,
                style='compact',
                children=tuple(
                    c if c.storage in ('field', 'fdict') else replace(c, storage='attr')
                    for c in self.children
                ),
            )
        if self.head:
            yield replace(self, head=False)

    def own_features(self):
        out = {f'container.{self.style}'}
        for c in self.children:
            if c.storage != 'attr':
                out.add(f'children.{c.storage}')
            if c.naming != 'auto':
                out.add(f'naming.{c.naming}')
            if c.combine != 'seq':
                out.add(f'combine.{c.combine}')
        if self.head:
            out.add('method.head')
        return out

    @staticmethod
    def draw(rng: random.Random, ctx: Ctx, head: bool = False) -> Container:
        style = 'setup' if head else rng.choice(['compact', 'setup'])
        children = []
        for _ in range(rng.choice([1, 1, 2, 2, 3])):
            node = draw_node(rng, ctx.down())
            storage = 'attr'
            if rng.random() < 0.2:
                storage = 'field' if rng.random() < 0.7 else 'fdict'
            elif style == 'setup':
                storage = rng.choice(['attr', 'attr', 'list', 'dict'])
            naming = 'explicit' if style == 'compact' and rng.random() < 0.4 else 'auto'
            if rng.random() < 0.03 and storage == 'attr':
                naming = 'clash' if style == 'compact' else 'kwarg'
            combine = rng.choice(['seq', 'seq', 'seq', 'residual', 'twice'])
            if combine == 'twice' and rng.random() < 0.3:
                combine = 'penalty'
            children.append(Child(node, naming, storage, combine))
        return Container(style, tuple(children), head)


@dataclass(frozen=True)
class ShareScope(Node):
    """``nn.share_scope(self, self.inner)``: the child's variables live in the parent's scope."""

    inner: Node

    def kids(self):
        return (self.inner,)

    def with_kids(self, kids):
        return replace(self, inner=kids[0])

    def render(self, src: Source) -> Ctor:
        ctor = self.inner.render(src)
        name = src.fresh('Shared')
        src.add(
            f'class {name}(nn.Module):\n'
            f'    def setup(self):\n'
            f'        self.inner = {ctor.call()}\n'
            f'        nn.share_scope(self, self.inner)\n'
            f'    def __call__(self, x):\n'
            f'        return self.inner(x)'
        )
        return Ctor(name)

    def own_shrinks(self):
        yield self.inner

    def own_features(self):
        return {'share_scope'}


@dataclass(frozen=True)
class Adopt(Node):
    """One instance handed to two wrapper Modules as a dataclass field (adoption)."""

    inner: Node
    style: str = 'compact'

    def kids(self):
        return (self.inner,)

    def with_kids(self, kids):
        return replace(self, inner=kids[0])

    def render(self, src: Source) -> Ctor:
        ctor = self.inner.render(src)
        wrap = src.fresh('Wrap')
        src.add(
            f'class {wrap}(nn.Module):\n'
            f'    sub: nn.Module\n'
            f'    @nn.compact\n'
            f'    def __call__(self, x):\n'
            f'        return self.sub(x)'
        )
        name = src.fresh('Adopt')
        if self.style == 'setup':
            body = (
                f'    def setup(self):\n'
                f'        shared = {ctor.call()}\n'
                f'        self.a = {wrap}(sub=shared)\n'
                f'        self.b = {wrap}(sub=shared)\n'
                f'    def __call__(self, x):\n'
                f'        return self.b(self.a(x))'
            )
        else:
            body = (
                f'    @nn.compact\n'
                f'    def __call__(self, x):\n'
                f'        shared = {ctor.call()}\n'
                f'        x = {wrap}(sub=shared)(x)\n'
                f'        return {wrap}(sub=shared)(x)'
            )
        src.add(f'class {name}(nn.Module):\n{body}')
        return Ctor(name)

    def own_shrinks(self):
        yield self.inner
        if self.style != 'compact':
            yield replace(self, style='compact')

    def own_features(self):
        return {f'adopt.{self.style}'}


@dataclass(frozen=True)
class Clone(Node):
    """A template instance handed as a dataclass field and cloned twice.

    ``setup``: ``self.copies = [self.layer.clone() for _ in range(2)]`` (the clones have
    no parent until the assignment adopts them); ``compact``:
    ``self.layer.clone(parent=self, name='copy<i>')``, called at once; ``copy``: as
    ``setup`` with ``self.layer.copy()`` (a deep copy: the Modules the template holds
    in its fields are copied too); ``deep``: the template is called first (so it and
    what it holds are bound), then deep clones of it
    (``clone(parent=self, name='copy<i>', _deep_clone=True)``) are called.
    """

    inner: Node
    style: str = 'setup'

    def kids(self):
        return (self.inner,)

    def with_kids(self, kids):
        return replace(self, inner=kids[0])

    def render(self, src: Source) -> Ctor:
        ctor = self.inner.render(src)
        name = src.fresh('Clone')
        if self.style in ('setup', 'copy'):
            make = 'clone' if self.style == 'setup' else 'copy'
            body = (
                '    def setup(self):\n'
                f'        self.copies = [self.layer.{make}() for _ in range(2)]\n'
                '    def __call__(self, x):\n'
                '        for copy in self.copies:\n'
                '            x = copy(x)\n'
                '        return x'
            )
        elif self.style == 'deep':
            body = (
                '    @nn.compact\n'
                '    def __call__(self, x):\n'
                '        x = self.layer(x)\n'
                "        x = self.layer.clone(parent=self, name='copy0', _deep_clone=True)(x)\n"
                "        return self.layer.clone(parent=self, name='copy1', _deep_clone=True)(x)"
            )
        else:
            body = (
                '    @nn.compact\n'
                '    def __call__(self, x):\n'
                "        x = self.layer.clone(parent=self, name='copy0')(x)\n"
                "        return self.layer.clone(parent=self, name='copy1')(x)"
            )
        src.add(f'class {name}(nn.Module):\n    layer: nn.Module\n{body}')
        return Ctor(name, (f'layer={ctor.call()}',))

    def own_shrinks(self):
        yield self.inner
        if self.style != 'setup':
            yield replace(self, style='setup')

    def own_features(self):
        return {f'clone.{self.style}'}


def draw_node(rng: random.Random, ctx: Ctx) -> Node:
    """Any node valid at ``ctx``: leaves get likelier as the tree deepens."""
    from integration_tests.fuzz.lifted import Lifted

    if ctx.depth >= 4:
        return Leaf.draw(rng, ctx) if rng.random() < 0.7 else Custom.draw(rng, ctx)
    weights = {
        'leaf': 3 + 2 * ctx.depth,
        'custom': 2,
        'container': 3 - ctx.depth / 2,
        'share_scope': 0.5,
        'adopt': 0.7,
        'clone': 0.6,
        'lifted': 3.5 if ctx.lifts < 3 else 0,
    }
    kind = rng.choices(list(weights), [max(w, 0) for w in weights.values()])[0]
    if kind == 'leaf':
        return Leaf.draw(rng, ctx)
    if kind == 'custom':
        return Custom.draw(rng, ctx)
    if kind == 'container':
        return Container.draw(rng, ctx)
    if kind == 'share_scope':
        return ShareScope(draw_node(rng, ctx.down()))
    if kind == 'adopt':
        return Adopt(draw_node(rng, ctx.down()), rng.choice(['compact', 'setup']))
    if kind == 'clone':
        return Clone(draw_node(rng, ctx.down()), rng.choice(['compact', 'setup', 'copy', 'deep']))
    return Lifted.draw(rng, ctx)


__all__ = [
    'AXIS_BATCH_NORMS',
    'RECURRENT',
    'SAME_VARIABLES',
    'Adopt',
    'Child',
    'Clone',
    'Container',
    'Ctor',
    'Ctx',
    'Custom',
    'Leaf',
    'Node',
    'ShareScope',
    'Source',
    'draw_node',
]
