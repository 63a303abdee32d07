"""The lifted-transform nodes of the grammar (``nn.vmap``, ``nn.scan``, ``nn.remat``,
``nn.jit``, ``nn.cond``, ``nn.switch``, ``nn.while_loop``, ``nn.map_variables``, and the
lifted derivatives ``nn.jvp``, ``nn.vjp``, ``nn.grad``/``nn.value_and_grad`` and
``nn.custom_vjp``).

One node class, :class:`Lifted`, whose ``kind`` picks the transform and whose
``opts`` hold the drawn options (``variable_axes`` of params, ``split_rngs``, a
``nn.broadcast`` Python argument of a scan, an ``in_axes=(0, None)`` argument of a
vmap (a Python bool or an array), a Python bool given to a remat or jit as
``static_argnums``, a remat's ``policy``, a scan's ``reverse`` and ``unroll``,
``variable_carry``...). What each transform must
say about the collections below it (``variable_axes`` for every collection, the
``carry_variables`` of a loop) is derived from the wrapped subtree at render time,
so a shrunk subtree renders a consistent transform.

``nn.cond`` and ``nn.switch`` may hold a second node, ``other``, in one branch: a
sibling variant of the family layer in the first, or any node. Flax requires every
branch to create the same variables, so some of these programs are ones Flax rejects
(the comparison then checks that linen raises the same error class).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from integration_tests.fuzz.grammar import (
    AXIS_BATCH_NORMS,
    MUTABLE_STATE,
    RECURRENT,
    Ctor,
    Ctx,
    Leaf,
    Node,
    Source,
    draw_node,
)

# Options of each kind and their plain values (what the shrinker resets them to).
DEFAULTS: dict[str, dict[str, object]] = {
    'vmap': {
        'params_axis': 0,
        'split_params': True,
        'split_dropout': True,
        'split_noise': True,
        'metadata': False,
        # in_axes=(0, None): a Python bool the cell branches on, or an array (scale)
        'broadcast_arg': None,
        # axis_name='batch': BatchNorms below may reduce over the mapped axis
        'axis_name': False,
    },  # fmt: skip
    'scan': {
        'params_axis': 0,
        'split_params': True,
        'split_dropout': True,
        'split_noise': True,
        'broadcast_arg': None,
        'carry_state': False,
        'cell': 'compact',
        'length': False,
        'metadata': False,
        # integer ids scanned beside the input, looked up (and attended) by an
        # nn.Embed in the cell: 'lookup' | 'attend'
        'ids': None,
        'reverse': False,
        'unroll': 1,
    },  # fmt: skip
    # static_flag: the node inside a cell taking a Python bool, given as
    # static_argnums=(2,) (self, x, flag); policy: a jax.checkpoint_policies name
    # filters (here and below): variables= and rngs= naming what the wrapped nodes
    # use (True), or all of it but one stream or collection ('narrow': the first
    # non-params stream, else the first non-params collection); Flax hides the rest
    # from the body, so a narrow filter changes what it sees (has_rng, sows) or fails
    'remat': {'prevent_cse': True, 'policy': None, 'static_flag': None, 'filters': False},
    'jit': {'static_flag': None, 'filters': False},
    'map_variables': {'scale_in': False, 'mutable': False, 'init_always': False, 'filters': False},
    'cond': {'filters': False},
    # how the branch index derives from the input: clipped to the three branches, an
    # argmax of the first features, or rounded and out of range (lax.switch clamps)
    'switch': {'index': 'clip', 'filters': False},
    # broadcast_all: broadcast_variables=True (Flax's default) rather than 'params';
    # params_rng: split_rngs names the params stream (False: the body sees no params
    # stream, as Flax hides a stream split_rngs does not name)
    'while_loop': {'split_dropout': True, 'broadcast_all': False, 'params_rng': True},
    # the lifted derivatives, each over the wrapped node made in a compact method:
    # jvp with a ones tangent for the input and, with var_tangents, for the params
    # Flax's documented way (`body.variables.get('params', {})`); vjp with the params'
    # cotangents sown; grad of a sum of squares (value_and_grad with value), the
    # forward output as aux; custom_vjp whose backward rule halves the params' cotangents
    # filters: variables= and rngs= naming what the wrapped node uses (Flax hides
    # the rest from the function)
    'jvp': {'var_tangents': False, 'filters': False},
    'vjp': {'sow_grads': False, 'filters': False},
    'grad': {'value': False, 'filters': False},
    'custom_vjp': {'scale': False},
}
# The lifted derivatives: their body is a node made in the wrapper's compact method.
DERIVATIVES = ('jvp', 'vjp', 'grad', 'custom_vjp')
_POLICIES = ('nothing_saveable', 'everything_saveable', 'dots_with_no_batch_dims_saveable')
# Transforms that peel one leading axis off their input.
MAPPED = ('vmap', 'scan')
# Transforms choosing a branch; each branch constructs its node under name='branch'.
BRANCHING = ('cond', 'switch')
_SWITCH_INDEX = {
    'clip': 'jnp.clip(jnp.round(jnp.sum(x)), 0, 2).astype(jnp.int32)',
    'argmax': 'jnp.argmax(jnp.reshape(x, (-1, x.shape[-1]))[0])',
    'raw': 'jnp.round(jnp.sum(x) * 2.0).astype(jnp.int32)',
}


def _axes(collections: set[str], params_axis: object, carry_state: bool, broadcast: str) -> str:
    """The ``variable_axes`` dict for the collections found below a vmap/scan."""
    axes = {'params': broadcast if params_axis is None else str(params_axis)}
    for col in sorted(collections - {'params'}):
        if carry_state and col in ('batch_stats', 'state', 'counters'):
            continue
        axes[col] = '0'
    return '{' + ', '.join(f"'{k}': {v}" for k, v in axes.items()) + '}'


def _split(opts: dict) -> str:
    return (
        f"{{'params': {opts['split_params']}, 'dropout': {opts['split_dropout']}, "
        f"'noise': {opts['split_noise']}}}"
    )


@dataclass(frozen=True)
class Lifted(Node):
    """A lifted transform applied to the Module class of ``inner``."""

    kind: str
    inner: Node
    opts: tuple[tuple[str, object], ...] = ()
    other: Node | None = None  # cond/switch: the node of the last branch

    def options(self) -> dict:
        return {**DEFAULTS[self.kind], **dict(self.opts)}

    def kids(self):
        return (self.inner,) if self.other is None else (self.inner, self.other)

    def with_kids(self, kids):
        return replace(self, inner=kids[0], other=kids[1] if len(kids) > 1 else None)

    def min_rank(self) -> int:
        if self.kind in MAPPED:
            return self.inner.min_rank() + 1
        return max(k.min_rank() for k in self.kids())

    def own_shrinks(self):
        yield self.inner
        if self.other is not None:
            yield self.other
            yield replace(self, other=None)
        if self.kind == 'switch':  # the plainer branching transform
            kept = tuple(o for o in self.opts if o[0] == 'filters')
            yield replace(self, kind='cond', opts=kept)
        for key, value in self.opts:
            if DEFAULTS[self.kind][key] != value:
                yield replace(self, opts=tuple(o for o in self.opts if o[0] != key))

    def own_features(self):
        out = {f'lift.{self.kind}'}
        if self.other is not None:
            out.add(f'lift.{self.kind}.other')
        defaults = DEFAULTS[self.kind]
        for key, value in self.opts:
            if defaults.get(key) != value:
                out.add(f'lift.{self.kind}.{key}={value}')
        return out

    # ----------------------------------------------------------------- render

    def render(self, src: Source) -> Ctor:
        return getattr(self, f'_render_{self.kind}')(src, self.options())

    def _render_vmap(self, src: Source, o: dict) -> Ctor:
        inner = self.inner.render(src)
        arg = o['broadcast_arg']
        mapped, in_axes = inner.callee, '0'
        if arg is not None:
            # The wrapped node inside a cell taking a second, unmapped argument.
            mapped, in_axes = src.fresh('VCell'), '(0, None)'
            use = (
                '        h = h * jnp.broadcast_to(scale, h.shape)'
                if arg == 'array'
                else '        if scale:\n            h = -h'
            )
            src.add(
                f'class {mapped}(nn.Module):\n'
                f'    @nn.compact\n'
                f'    def __call__(self, x, scale):\n'
                f'        h = {inner.call()}(x)\n{use}\n'
                f'        return h'
            )
        name = src.fresh('Vmapped')
        meta = ", metadata_params={nn.PARTITION_NAME: 'batch'}" if o['metadata'] else ''
        axis = "    axis_name='batch',\n" if o['axis_name'] else ''
        src.add(
            f'{name} = nn.vmap(\n'
            f'    {mapped},\n'
            f'    variable_axes={_axes(self.inner.collections(), o["params_axis"], False, "None")},\n'
            f'    split_rngs={_split(o)},\n'
            f'    in_axes={in_axes},\n{axis}'
            f'    out_axes=0{meta},\n'
            f')'
        )
        if arg is None:
            return Ctor(name, inner.args)
        value = 'jnp.full((FEATURES,), 0.5, x.dtype)' if arg == 'array' else repr(arg)
        return self._call_with(src, 'Vmap', name, value)

    def _render_scan(self, src: Source, o: dict) -> Ctor:
        inner = self.inner.render(src)
        cell = src.fresh('Cell')
        flag = o['broadcast_arg']
        params = 'self, c, x, flag' if flag is not None else 'self, c, x'
        use_flag = ['        if flag:', '            h = -h'] if flag is not None else []
        ids = o['ids']
        unpack = ['        x, ids = x'] if ids else []
        use_ids = []
        if ids:
            embed = 'self.embed' if o['cell'] == 'setup' else 'embed'
            if o['cell'] != 'setup':
                use_ids.append("        embed = nn.Embed(FEATURES, FEATURES, name='embed')")
            use_ids.append(f'        h = h + {embed}(ids)')
            if ids == 'attend':
                use_ids.append(f'        h = h + 0.25 * {embed}.attend(h)')
        if o['cell'] == 'setup':
            head = [f'class {cell}(nn.Module):', '    def setup(self):',
                    f'        self.body = {inner.call()}']  # fmt: skip
            if ids:
                head.append('        self.embed = nn.Embed(FEATURES, FEATURES)')
            head += [f'    def __call__({params}):', *unpack, '        h = self.body(c + x)']
        else:
            head = [f'class {cell}(nn.Module):', '    @nn.compact',
                    f'    def __call__({params}):', *unpack,
                    f'        h = {inner.call()}(c + x)']  # fmt: skip
        src.add('\n'.join(head + use_ids + use_flag + ['        return h, h']))
        scanned = src.fresh('Scanned')
        carry = "    variable_carry='state',\n" if o['carry_state'] else ''
        collections = self.inner.collections()
        if o['carry_state'] and 'batch_stats' in collections:
            carry = "    variable_carry=['state', 'counters', 'batch_stats'],\n"
        elif o['carry_state']:
            carry = "    variable_carry=['state', 'counters'],\n"
        in_axes = '(0, nn.broadcast)' if flag is not None else '0'
        length = '    length=2,\n' if o['length'] else ''
        if o['reverse']:
            length += '    reverse=True,\n'
        if o['unroll'] != 1:
            length += f'    unroll={o["unroll"]},\n'
        meta = "    metadata_params={nn.PARTITION_NAME: 'layers'},\n" if o['metadata'] else ''
        src.add(
            f'{scanned} = nn.scan(\n'
            f'    {cell},\n'
            f'    variable_axes={_axes(collections, o["params_axis"], o["carry_state"], "nn.broadcast")},\n'
            f'    split_rngs={_split(o)},\n'
            f'    in_axes={in_axes},\n{carry}{length}{meta}'
            f')'
        )
        name = src.fresh('Scan')
        extra = f', {flag!r}' if flag is not None else ''
        # the ids: which feature is largest, one per position of the scanned axis
        xs = '(x, jnp.argmax(x, axis=-1))' if ids else 'x'
        src.add(
            f'class {name}(nn.Module):\n'
            f'    @nn.compact\n'
            f'    def __call__(self, x):\n'
            f'        c, ys = {scanned}()(jnp.zeros(x.shape[1:], x.dtype), {xs}{extra})\n'
            f'        return ys'
        )
        return Ctor(name)

    def _flag_cell(self, src: Source) -> str:
        """A cell calling the wrapped node with a Python bool beside the input."""
        inner = self.inner.render(src)
        cell = src.fresh('FlagCell')
        src.add(
            f'class {cell}(nn.Module):\n'
            f'    @nn.compact\n'
            f'    def __call__(self, x, flag):\n'
            f'        h = {inner.call()}(x)\n'
            f'        if flag:\n'
            f'            h = -h\n'
            f'        return h'
        )
        return cell

    @staticmethod
    def _call_with(src: Source, stem: str, wrapped: str, arg: str) -> Ctor:
        """A Module calling ``wrapped()`` on its input and ``arg`` (Python source)."""
        name = src.fresh(stem)
        src.add(
            f'class {name}(nn.Module):\n'
            f'    @nn.compact\n'
            f'    def __call__(self, x):\n'
            f'        return {wrapped}()(x, {arg})'
        )
        return Ctor(name)

    def _render_remat(self, src: Source, o: dict) -> Ctor:
        opts = '' if o['prevent_cse'] else ', prevent_cse=False'
        if o['policy'] is not None:
            opts += f', policy=jax.checkpoint_policies.{o["policy"]}'
        opts += self._filters(o)
        name = src.fresh('Remat')
        if o['static_flag'] is None:
            inner = self.inner.render(src)
            src.add(f'{name} = nn.remat({inner.callee}{opts})')
            return Ctor(name, inner.args)
        src.add(f'{name} = nn.remat({self._flag_cell(src)}{opts}, static_argnums=(2,))')
        return self._call_with(src, 'Flagged', name, repr(o['static_flag']))

    def _render_jit(self, src: Source, o: dict) -> Ctor:
        name = src.fresh('Jitted')
        opts = self._filters(o)
        if o['static_flag'] is None:
            inner = self.inner.render(src)
            src.add(f'{name} = nn.jit({inner.callee}{opts})')
            return Ctor(name, inner.args)
        src.add(f'{name} = nn.jit({self._flag_cell(src)}, static_argnums=(2,){opts})')
        return self._call_with(src, 'Flagged', name, repr(o['static_flag']))

    def _render_map_variables(self, src: Source, o: dict) -> Ctor:
        inner = self.inner.render(src)
        name = src.fresh('Mapped')
        trans_in = (
            'lambda vs: jax.tree_util.tree_map(lambda a: a * 0.5, vs)'
            if o['scale_in']
            else 'lambda vs: vs'
        )
        # Flax's documented spelling is init=self.is_initializing(); init=True in
        # apply is a misuse Flax refuses (FINDINGS F3), drawn rarely.
        init = 'True' if o['init_always'] else 'self.is_initializing()'
        src.add(
            f'class {name}(nn.Module):\n'
            f'    @nn.compact\n'
            f'    def __call__(self, x):\n'
            f'        mapped = nn.map_variables(\n'
            f"            {inner.callee}, 'params', trans_in_fn={trans_in},\n"
            f'            trans_out_fn=lambda vs: vs, init={init}, mutable={o["mutable"]}'
            f'{self._filters(o)},\n'
            f'        )\n'
            f'        return {inner.call().replace(inner.callee, "mapped", 1)}(x)'
        )
        return Ctor(name)

    def _branch_makers(self, src: Source) -> tuple[str, str]:
        """How the first branches and the last one construct their node."""
        make = self.inner.render(src).call("name='branch'")
        if self.other is None:
            return make, make
        return make, self.other.render(src).call("name='branch'")

    def _render_cond(self, src: Source, o: dict) -> Ctor:
        make, last = self._branch_makers(src)
        name = src.fresh('Cond')
        src.add(
            f'class {name}(nn.Module):\n'
            f'    @nn.compact\n'
            f'    def __call__(self, x):\n'
            f'        def on_true(mdl, x):\n'
            f'            return {make}(x)\n'
            f'        def on_false(mdl, x):\n'
            f'            return -{last}(x)\n'
            f'        return nn.cond(jnp.sum(x) > 0, on_true, on_false, self, x'
            f'{self._filters(o)})'
        )
        return Ctor(name)

    def _render_switch(self, src: Source, o: dict) -> Ctor:
        make, last = self._branch_makers(src)
        name = src.fresh('Switch')
        src.add(
            f'class {name}(nn.Module):\n'
            f'    @nn.compact\n'
            f'    def __call__(self, x):\n'
            f'        def first(mdl, x):\n'
            f'            return {make}(x)\n'
            f'        def second(mdl, x):\n'
            f'            return -{make}(x)\n'
            f'        def third(mdl, x):\n'
            f'            return 0.5 * {last}(x)\n'
            f'        index = {_SWITCH_INDEX[o["index"]]}\n'
            f'        return nn.switch(index, [first, second, third], self, x'
            f'{self._filters(o)})'
        )
        return Ctor(name)

    def _render_while_loop(self, src: Source, o: dict) -> Ctor:
        inner = self.inner.render(src)
        name = src.fresh('Loop')
        carried = sorted(self.inner.collections() & MUTABLE_STATE)
        broadcast = '' if o['broadcast_all'] else ", broadcast_variables='params'"
        params_rng = "'params': False, " if o['params_rng'] else ''
        src.add(
            f'class {name}(nn.Module):\n'
            f'    def setup(self):\n'
            f'        self.body = {inner.call()}\n'
            f'    def __call__(self, x):\n'
            f'        x = self.body(x)\n'
            f'        def cond_fn(mdl, c):\n'
            f'            return c[0] < 2\n'
            f'        def body_fn(mdl, c):\n'
            f'            return c[0] + 1, mdl.body(c[1])\n'
            f'        _, x = nn.while_loop(\n'
            f'            cond_fn, body_fn, self, (jnp.array(0), x),\n'
            f'            carry_variables={carried!r}{broadcast},\n'
            f"            split_rngs={{{params_rng}'dropout': {o['split_dropout']}, "
            f"'noise': {o['split_dropout']}}},\n"
            f'        )\n'
            f'        return x'
        )
        return Ctor(name)

    def _derivative(self, src: Source, stem: str, lines: list[str]) -> Ctor:
        """A wrapper whose compact method makes the wrapped node as ``body``."""
        name = src.fresh(stem)
        head = [f'class {name}(nn.Module):', '    @nn.compact', '    def __call__(self, x):',
                f'        body = {self.inner.render(src).call()}']  # fmt: skip
        src.add('\n'.join(head + [f'        {line}' for line in lines]))
        return Ctor(name)

    def _filters(self, o: dict) -> str:
        """``variables=``/``rngs=`` keywords naming what the wrapped nodes use (with
        ``'narrow'``, all of it but one stream or collection)."""
        if not o['filters']:
            return ''
        collections = sorted({'params'}.union(*(k.collections() for k in self.kids())))
        rngs = sorted({'params'}.union(*(k.rngs() for k in self.kids())))
        if o['filters'] == 'narrow':
            if len(rngs) > 1:
                rngs.remove(next(r for r in rngs if r != 'params'))
            elif len(collections) > 1:
                collections.remove(next(c for c in collections if c != 'params'))
        return f', variables={collections!r}, rngs={rngs!r}'

    def _render_jvp(self, src: Source, o: dict) -> Ctor:
        tangents = (
            "{'params': jax.tree_util.tree_map(jnp.ones_like, body.variables.get('params', {}))}"
            if o['var_tangents']
            else '{}'
        )
        return self._derivative(src, 'Jvp', [
            'y, t = nn.jvp(',
            f'    lambda mdl, x: mdl(x), body, (x,), (jnp.ones_like(x),), {tangents}'
            f'{self._filters(o)}',
            ')',
            'return y + 0.5 * t',
        ])  # fmt: skip

    def _render_vjp(self, src: Source, o: dict) -> Ctor:
        sow = ["self.sow('intermediates', 'grads', grads)"] if o['sow_grads'] else []
        return self._derivative(src, 'Vjp', [
            f'y, bwd = nn.vjp(lambda mdl, x: mdl(x), body, x{self._filters(o)})',
            'grads, gx = bwd(jnp.ones_like(y))',
            *sow,
            'return y + 0.5 * gx',
        ])  # fmt: skip

    def _render_grad(self, src: Source, o: dict) -> Ctor:
        call = (
            f'(value, y), (gx,) = nn.value_and_grad(fn, body, x, has_aux=True{self._filters(o)})'
            if o['value']
            else f'(gx,), y = nn.grad(fn, body, x, has_aux=True{self._filters(o)})'
        )
        return self._derivative(src, 'Grad', [
            'def fn(mdl, x):',
            '    y = mdl(x)',
            '    return jnp.sum(y * y), y',
            call,
            'return y + 0.5 * gx',
        ])  # fmt: skip

    def _render_custom_vjp(self, src: Source, o: dict) -> Ctor:
        scale = (
            ['    grads = jax.tree_util.tree_map(lambda g: 0.5 * g, grads)'] if o['scale'] else []
        )
        return self._derivative(src, 'CustomVjp', [
            'def fn(mdl, x):',
            '    return mdl(x)',
            'def fwd(mdl, x):',
            '    return nn.vjp(fn, mdl, x)',
            'def bwd(vjp_fn, t):',
            '    grads, gx = vjp_fn(t)',
            *scale,
            '    return grads, gx',
            'return nn.custom_vjp(fn, forward_fn=fwd, backward_fn=bwd)(body, x)',
        ])  # fmt: skip

    # ------------------------------------------------------------------- draw

    @staticmethod
    def draw(rng: random.Random, ctx: Ctx) -> Node:
        kinds = ['remat', 'jit', 'map_variables', 'cond', 'while_loop', 'derivative']
        if ctx.rank >= 2:
            kinds += ['vmap', 'scan'] * 3
        kind = rng.choice(kinds)
        if kind == 'cond' and rng.random() < 0.5:  # one bucket: cond's share is switch's too
            kind = 'switch'
        if kind == 'derivative':  # one bucket for the four
            kind = rng.choice(DERIVATIVES)
        inner_ctx = ctx.down(
            lifts=ctx.lifts + 1,
            rank=ctx.rank - (1 if kind in MAPPED else 0),
            in_loop=ctx.in_loop or kind == 'while_loop',
        )
        opts: dict[str, object] = {}
        if kind == 'vmap' and rng.random() < 0.12:
            opts['axis_name'] = True
            inner_ctx = replace(inner_ctx, axis_name=True)
        inner = Lifted._draw_inner(rng, kind, inner_ctx, bool(opts.get('axis_name')))
        other = None
        if kind in BRANCHING:
            other = Lifted._draw_other(rng, inner, inner_ctx)
        if kind in MAPPED:
            if rng.random() < 0.3:
                opts['params_axis'] = None
                opts['split_params'] = rng.random() < 0.1
            elif rng.random() < 0.1:
                opts['split_params'] = False
            for stream in ('dropout', 'noise'):
                if rng.random() < 0.3:
                    opts[f'split_{stream}'] = False
            if opts.get('params_axis', 0) == 0 and rng.random() < 0.2:
                opts['metadata'] = True
        if kind == 'vmap' and rng.random() < 0.3:
            opts['broadcast_arg'] = rng.choice([True, False, 'array'])
        if kind == 'scan':
            if rng.random() < 0.3:
                opts['broadcast_arg'] = rng.choice([True, False])
            if rng.random() < 0.08:
                opts['carry_state'] = True
            if rng.random() < 0.4:
                opts['cell'] = 'setup'
            if rng.random() < 0.2:
                opts['length'] = True
            if rng.random() < 0.12:
                opts['ids'] = rng.choice(['lookup', 'attend'])
            if rng.random() < 0.15:
                opts['reverse'] = True
            if rng.random() < 0.15:
                opts['unroll'] = 2
        if kind == 'switch':
            opts['index'] = rng.choice(['clip', 'clip', 'argmax', 'raw'])
        if kind == 'remat' and rng.random() < 0.3:
            opts['prevent_cse'] = False
        if kind == 'remat' and rng.random() < 0.25:
            opts['policy'] = rng.choice(_POLICIES)
        if kind in ('remat', 'jit') and rng.random() < 0.2:
            opts['static_flag'] = rng.random() < 0.5
        if kind == 'jvp' and rng.random() < 0.5:
            opts['var_tangents'] = True
        if kind == 'vjp' and not ctx.in_loop and rng.random() < 0.4:
            opts['sow_grads'] = True  # a sow grows a loop's carry: Flax refuses it there
        if kind == 'grad' and rng.random() < 0.5:
            opts['value'] = True
        if kind in ('jvp', 'vjp', 'grad', *BRANCHING) and rng.random() < 0.3:
            opts['filters'] = True if rng.random() < 0.7 else 'narrow'
        if kind in ('remat', 'jit', 'map_variables') and rng.random() < 0.25:
            opts['filters'] = True if rng.random() < 0.6 else 'narrow'
        if kind == 'custom_vjp' and rng.random() < 0.5:
            opts['scale'] = True
        if kind == 'map_variables':
            if rng.random() < 0.5:
                opts['scale_in'] = True
            if rng.random() < 0.1:
                opts['mutable'] = True
            if rng.random() < 0.05:
                opts['init_always'] = True
        if kind == 'while_loop':
            if rng.random() < 0.3:
                opts['split_dropout'] = False
            if rng.random() < 0.3:
                opts['broadcast_all'] = True
            if rng.random() < 0.2:
                opts['params_rng'] = False
        defaults = DEFAULTS[kind]
        kept = tuple((k, v) for k, v in opts.items() if defaults[k] != v)
        return Lifted(kind, inner, kept, other)

    @staticmethod
    def _draw_inner(rng: random.Random, kind: str, ctx: Ctx, axis_name: bool) -> Node:
        """The wrapped node; some transforms favour the layers they lift specially."""
        roll = rng.random()
        if axis_name and roll < 0.6:  # a BatchNorm reducing over the named axis
            return Leaf(rng.choice(AXIS_BATCH_NORMS))
        if kind == 'vmap' and roll < 0.12 and ctx.rank >= 2:  # nn.RNN, nn.Bidirectional
            fits = [r for r in RECURRENT if Leaf(r).min_rank() <= ctx.rank]
            return Leaf(rng.choice(fits))
        if kind == 'scan' and roll < 0.1:  # nn.Embed with ids derived per step
            return Leaf.draw_family(rng, ctx, ('embed',))
        if kind in BRANCHING and roll < 0.35:  # branches holding a family layer
            return Leaf.draw_family(rng, ctx)
        return draw_node(rng, ctx)

    @staticmethod
    def _draw_other(rng: random.Random, inner: Node, ctx: Ctx) -> Node | None:
        """The node of the last branch, if another than the first's: mostly a sibling
        family variant making the same variables (Flax accepts it); rarely another
        variant or any node, which make other variables (Flax refuses them: a small
        share of programs that must fail alike)."""
        family = inner.family() if isinstance(inner, Leaf) else None
        if isinstance(inner, Leaf) and family is not None:
            same = inner.same_variables(ctx)
            if same and rng.random() < 0.5:
                return Leaf(rng.choice(same))
            if rng.random() < 0.1:
                return Leaf(rng.choice(Leaf.family_variants(family, ctx)))
        elif rng.random() < 0.03:
            return draw_node(rng, ctx)
        return None


__all__ = ['BRANCHING', 'DEFAULTS', 'DERIVATIVES', 'MAPPED', 'Lifted']
