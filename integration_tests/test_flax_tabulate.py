"""``Module.tabulate`` / ``nn.tabulate`` against Flax's as an oracle: same table, same totals.

Each model is built by one factory from the ``nn`` namespace it is given, so the
linen and the Flax versions are the same source text.
"""

from __future__ import annotations

import enum
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip('flax')
pytest.importorskip('rich')
pytestmark = pytest.mark.flax

import flax.linen as flax_nn  # noqa: E402

import linen.nn as linen_nn  # noqa: E402

PLAIN = {'width': 250, 'force_terminal': False}


def models(nn):
    class Counter(nn.Module):
        @nn.compact
        def __call__(self, x):
            count = self.variable('counter', 'count', lambda: jnp.zeros((), jnp.int32))
            count.value += 1
            x = nn.Dense(4)(x)
            x = nn.BatchNorm(use_running_average=False)(x)
            return nn.Dense(3, name='proj')(x)

    class Two(nn.Module):
        @nn.compact
        def __call__(self, x, y, scale=1.0):
            self.variable('stats', 'n', jnp.zeros, (3,))
            return {'a': nn.Dense(6)(x), 'b': (y * scale, y)}

    class Inner(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(3)(nn.Dense(5)(x))

    class Outer(nn.Module):
        @nn.compact
        def __call__(self, x, y):
            shared = nn.Dense(2)
            Two()(x, y, scale=2.0)
            z = Inner()(x)
            return shared(z) + shared(z)

    class Conv(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.Conv(4, (3, 3), padding='VALID')(x)
            x = nn.LayerNorm()(x)
            return nn.Dense(2)(x.reshape((x.shape[0], -1)))

    return {'Counter': Counter, 'Outer': Outer, 'Conv': Conv}


INPUTS = {
    'Counter': (jnp.ones((2, 5)),),
    'Outer': (jnp.ones((2, 5)), jnp.ones((3,))),
    'Conv': (jnp.ones((2, 6, 6, 3)),),
}


@pytest.mark.parametrize('name', sorted(INPUTS))
@pytest.mark.parametrize(
    'options',
    [{}, {'depth': 1, 'show_repeated': True}],
    ids=['all', 'depth1-repeated'],
)
def test_table_is_flax_table(name, options):
    ours = models(linen_nn)[name]().tabulate(
        jax.random.key(0), *INPUTS[name], console_kwargs=PLAIN, **options
    )
    theirs = models(flax_nn)[name]().tabulate(
        jax.random.key(0), *INPUTS[name], console_kwargs=PLAIN, **options
    )
    assert _parse(ours) == _parse(theirs)


def _parse(table):
    """(title, rows as {header: cell text}, caption): the table without its column order.

    Flax orders the collection columns by iterating a ``set`` of names, which
    changes with Python's string hash seed; linen orders them by first use. The
    content of every column must be the same.
    """
    lines = table.splitlines()
    title = next(line.strip() for line in lines if line.strip())
    header = next(line for line in lines if line.startswith('┃'))
    names = [c.strip() for c in header.strip('┃').split('┃')]
    rows, current = [], None
    for line in lines:
        if line.startswith(('┡', '├', '└')):
            if current is not None:
                rows.append({k: '\n'.join(v).strip() for k, v in current.items()})
            current = {name: [] for name in names}
        elif line.startswith('│') and current is not None:
            for name, cell in zip(names, line.strip('│').split('│')):
                current[name].append(cell.strip())
    caption = [
        line.strip()
        for line in lines[lines.index(next(l for l in lines if l.startswith('└'))) + 1 :]
    ]
    return title, rows, [line for line in caption if line]


def test_function_form_is_flax_function_form():
    x = INPUTS['Counter']
    ours = linen_nn.tabulate(models(linen_nn)['Counter'](), jax.random.key(0), console_kwargs=PLAIN)
    theirs = flax_nn.tabulate(models(flax_nn)['Counter'](), jax.random.key(0), console_kwargs=PLAIN)
    assert _parse(ours(*x)) == _parse(theirs(*x))


class _Color(enum.Enum):
    RED = 1


def cell_models(nn):
    """Models whose cells Flax renders in particular ways (partitioning, values, methods)."""

    class Partitioned(nn.Module):
        @nn.compact
        def __call__(self, x):
            init = nn.with_partitioning(nn.initializers.ones, ('rows', 'cols'))
            k = self.param('k', init, (x.shape[-1], 2))
            logical = nn.with_logical_partitioning(nn.initializers.lecun_normal(), (None, 'mlp'))
            return nn.Dense(3, kernel_init=logical)(x @ k)

    class Sows(nn.Module):
        @nn.compact
        def __call__(self, x):
            h = nn.Dense(3)(x)
            self.sow('intermediates', 'h', h)
            self.sow('intermediates', 'h', 2 * h)
            return h

    class Values(nn.Module):
        @nn.compact
        def __call__(self, x):
            self.variable('consts', 'count', lambda: 3)
            self.variable('consts', 'nothing', lambda: None)
            self.variable('consts', 'pair', lambda: (jnp.zeros(2), jnp.ones((1, 3))))
            self.variable('consts', 'flag', lambda: True)
            return nn.Dense(2)(x)

    class Methods(nn.Module):
        def setup(self):
            self.enc = nn.Dense(3)
            self.dec = nn.Dense(2)

        def __call__(self, x):
            return self.dec(self.encode(x))

        def encode(self, x):
            return self.enc(x)

    class Inputs(nn.Module):
        @nn.compact
        def __call__(self, x, color=None, scale=1.0, empty=(), table=None):
            return nn.Dense(2)(x) * scale

    class NoVariables(nn.Module):
        def __call__(self, x=None):
            return x

    return {
        'Partitioned': Partitioned,
        'Sows': Sows,
        'Values': Values,
        'Methods': Methods,
        'Inputs': Inputs,
        'NoVariables': NoVariables,
    }


X = jnp.ones((2, 4))
CELL_CASES = {
    'partition specs': ('Partitioned', (X,), {}),
    'sown intermediates': ('Sows', (X,), {'mutable': True}),
    'non-array variables': ('Values', (X,), {}),
    'method=': ('Methods', (X,), {'method': 'encode'}),
    'method=lambda': ('Methods', (X,), {'method': lambda m, x: m.encode(x)}),
    'enum, scalar, empty inputs': ('Inputs', (X, _Color.RED, 2.0, ()), {}),
    'None and empty dict inputs': ('Inputs', (X, None, 3, (), {}), {}),
    'keyword inputs only': ('Inputs', (), {'x': X, 'table': {}}),
    'scalar input, no variables': ('NoVariables', (3.0,), {}),
    'empty input, no variables': ('NoVariables', ((),), {}),
}


@pytest.mark.parametrize('case', sorted(CELL_CASES))
def test_cells_are_flax_cells(case):
    name, args, kwargs = CELL_CASES[case]
    ours, theirs = (
        cell_models(nn)[name]().tabulate(jax.random.key(0), *args, console_kwargs=PLAIN, **kwargs)
        for nn in (linen_nn, flax_nn)
    )
    assert _parse(ours) == _parse(theirs)


def _flops_columns(table):
    _, rows, _ = _parse(table)
    return {
        row['path'] or row['module']: (row['flops'], row['vjp_flops'])
        for row in rows
        if row['module']
    }


# Few models: Flax compiles every call twice (flops, vjp_flops), ~10 s per model.
@pytest.mark.parametrize('name', ['Counter', 'Outer'])
def test_flops_columns_agree_with_flax(name):
    # Flax compiles every call on its own; linen costs each call inside the one
    # compiled program, as XLA executes it: cheap elementwise work XLA repeats
    # in several fusions counts each time (up to ~1/3 more for a LayerNorm's or a BatchNorm's
    # backward pass), and a call whose output the program drops (Outer's Two_0)
    # has no work left, shown as n/a with the reason. Matmul and conv work is
    # the same, so the rows agree within those bounds.
    kwargs = {'compute_flops': True, 'compute_vjp_flops': True, 'console_kwargs': PLAIN}
    table = models(linen_nn)[name]().tabulate(jax.random.key(0), *INPUTS[name], **kwargs)
    ours = _flops_columns(table)
    theirs = _flops_columns(
        models(flax_nn)[name]().tabulate(jax.random.key(0), *INPUTS[name], **kwargs)
    )
    assert set(ours) == set(theirs)
    dead = {'Two_0', 'Two_0/Dense_0'} if name == 'Outer' else set()
    for path, (flops, vjp_flops) in theirs.items():
        if path in dead:
            assert ours[path] == ('n/a', 'n/a')
            assert 'no instruction of that call is left in the optimized program' in table
            continue
        ours_vjp = float(ours[path][1])
        if name == 'Outer' and path == 'Dense_0':
            # `shared(z) + shared(z)`: XLA merges the two identical calls' work, so
            # each call's share (a row) is about half of one call compiled alone.
            ours_vjp *= 2
        assert float(ours[path][0]) == pytest.approx(float(flops), rel=0.35), path
        assert ours_vjp == pytest.approx(float(vjp_flops), rel=0.35), path


def test_without_linen_profiling_module_tabulate_names_it():
    code = (
        'import jax, jax.numpy as jnp, linen.nn as nn\n'
        'try:\n'
        '    nn.Dense(2).tabulate(jax.random.key(0), jnp.ones((1, 3)))\n'
        'except ImportError as error:\n'
        '    print(error)\n'
    )
    env = dict(os.environ, LINEN_DISABLE_PLUGINS='profiling')
    result = subprocess.run(
        [sys.executable, '-c', code], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert 'linen-profiling' in result.stdout
    assert 'pip install' in result.stdout


class _Key(str, enum.Enum):  # noqa: UP042 (the kind of key Flax's test uses)
    x = 'x'


def last_mile_models(nn):
    """Programs of Flax's own summary tests' kinds: no inputs, scalars, non-array
    variables, enum keys, one-name partition specs, lifted modules."""
    from flax import struct

    class Metadata(struct.PyTreeNode):
        names: tuple = struct.field(pytree_node=False)

    class Constant(nn.Module):
        @nn.compact
        def __call__(self):
            return 1

    class AddOne(nn.Module):
        def __call__(self, x):
            return x + 1

    class Scalar(nn.Module):
        @nn.compact
        def __call__(self):
            return AddOne()(x=np.pi)

    class Sown(nn.Module):
        @nn.compact
        def __call__(self):
            self.sow('foo', 'bar', Metadata(('baz', 'qux')))

    class Keyed(nn.Module):
        @nn.compact
        def __call__(self, inputs):
            return jnp.sum(nn.Dense(2)(inputs['x']))

    class OneName(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(
                3,
                kernel_init=nn.with_partitioning(nn.initializers.lecun_normal(), (None, 'data')),
                bias_init=nn.with_partitioning(nn.initializers.zeros, (None,)),
            )(x)

    class Identity(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.Dense(3)(x)
            return nn.Dropout(0.5, deterministic=True)(x)

    class Nothing(nn.Module):
        @nn.compact
        def __call__(self, x):
            self.variable('counter', 'n', lambda: jnp.zeros((), jnp.int32))

    return {
        'Constant': Constant,
        'Scalar': Scalar,
        'Sown': Sown,
        'Keyed': Keyed,
        'OneName': OneName,
        'Identity': Identity,
        'Nothing': Nothing,
    }


LAST_MILE_CASES = {
    'no inputs, a Python int output': ('Constant', (), {}),
    'a NumPy scalar input': ('Scalar', (), {}),
    'a sown dataclass': ('Sown', (), {}),
    'enum keys, positional': ('Keyed', ({_Key.x: jnp.ones((1, 1))},), {}),
    'enum keys, by keyword': ('Keyed', (), {'inputs': {_Key.x: jnp.ones((1, 1))}}),
    'one-name partition spec': ('OneName', (X,), {}),
    'a pass-through call': ('Identity', (X,), {}),
    'a None output': ('Nothing', (X,), {}),
}
FLOPS = {'compute_flops': True, 'compute_vjp_flops': True}


@pytest.mark.parametrize('case', sorted(LAST_MILE_CASES))
def test_last_mile_cells_and_flops_are_flax_cells(case):
    # Calls that do no work count 0 FLOPs, as Flax counts them (not n/a).
    name, args, kwargs = LAST_MILE_CASES[case]
    rngs = {} if not args and not kwargs.get('inputs') else jax.random.key(0)
    ours, theirs = (
        last_mile_models(nn)[name]().tabulate(rngs, *args, console_kwargs=PLAIN, **FLOPS, **kwargs)
        for nn in (linen_nn, flax_nn)
    )
    if name not in ('OneName', 'Identity', 'Keyed'):
        assert _parse(ours) == _parse(theirs)
        return
    # Matmul FLOPs are compared in test_flops_columns_agree_with_flax.
    assert _flops_columns(ours).keys() == _flops_columns(theirs).keys()
    if name == 'Identity':
        assert (
            _flops_columns(ours)['Dropout_0'] == _flops_columns(theirs)['Dropout_0'] == ('0', '0')
        )
    assert _without_flops(ours) == _without_flops(theirs)


def _without_flops(table):
    title, rows, caption = _parse(table)
    for row in rows:
        row.pop('flops', None)
        row.pop('vjp_flops', None)
    return title, rows, caption


@pytest.mark.parametrize('case', ['enum keys, by keyword', 'a sown dataclass', 'a None output'])
def test_default_console_styles_as_flax(case):
    # No console_kwargs: Flax styles the table as for a terminal (dim dtypes, bold
    # counts and headers, italic title); the text must be the same, escapes included.
    name, args, kwargs = LAST_MILE_CASES[case]
    rngs = {} if name == 'Sown' else jax.random.key(0)
    ours, theirs = (
        last_mile_models(nn)[name]().tabulate(rngs, *args, **kwargs) for nn in (linen_nn, flax_nn)
    )
    assert '\x1b[2mfloat32\x1b[0m' in theirs or name == 'Sown'
    assert ours == theirs


def lstm(nn, name):
    class LSTM(nn.Module):
        @nn.compact
        def __call__(self, x):
            carry = nn.LSTMCell(4).initialize_carry(jax.random.key(0), x[:, 0].shape)
            scan = nn.scan(
                nn.LSTMCell,
                variable_broadcast='params',
                split_rngs={'params': False},
                in_axes=1,
                out_axes=1,
            )
            return scan(4, name=name)(carry, x)

    return LSTM()


@pytest.mark.parametrize('name', ['ScanLSTM', None])
def test_lifted_module_tabulates_without_leaking_tracers(name):
    x = jnp.ones((2, 3, 5))
    with jax.check_tracer_leaks(True):
        ours = lstm(linen_nn, name).tabulate(jax.random.key(0), x=x, console_kwargs=PLAIN)
    theirs = lstm(flax_nn, name).tabulate(jax.random.key(0), x=x, console_kwargs=PLAIN)
    assert _parse(ours) == _parse(theirs)


NESTED = {
    'mappings in mappings and lists': lambda x: {
        'a': {'b': {'c': x}},
        'l': [{'m': x, 'n': [x, {'o': x}]}],
    },
    'lists in lists, empty and None leaves': lambda x: [
        [x, [x]],
        {'e': {}, 'f': [], 'g': None},
    ],
    'Python leaves': lambda x: {'b': True, 'i': 3, 'f': 1.5, 'n': None},
}


@pytest.mark.parametrize('case', sorted(NESTED))
def test_nested_inputs_outputs_and_sown_values_read_as_flax(case):
    value = NESTED[case](jnp.ones((2,)))

    def model(nn):
        class Echo(nn.Module):
            @nn.compact
            def __call__(self, tree):
                self.sow('inter', 'v', tree)
                return tree

        return Echo()

    ours, theirs = (
        model(nn).tabulate(jax.random.key(0), value, mutable=True, console_kwargs=PLAIN)
        for nn in (linen_nn, flax_nn)
    )
    # The whole text: a cell's indentation is part of its YAML (one collection, so
    # the column order is Flax's too).
    assert ours == theirs


def reused_block(nn):
    class Block(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.Conv(4, (3, 3))(x)
            x = nn.Dropout(0.5, deterministic=True)(x)
            return nn.relu(x)

    class Chain(nn.Module):
        @nn.compact
        def __call__(self, x):
            block = Block()
            return block(block(block(x)))

    return Chain()


@pytest.mark.parametrize('show_repeated', [False, True])
def test_each_call_of_a_reused_module_shows_its_own_flops_as_flax(show_repeated):
    # Flax costs every call alone; linen gives each of three alike calls of one
    # instance its share of their compiled work (not all three calls' FLOPs per row).
    kwargs = {**FLOPS, 'show_repeated': show_repeated, 'console_kwargs': PLAIN}
    x = jnp.ones((1, 6, 6, 4))
    tables = [
        reused_block(nn).tabulate(jax.random.key(0), x, **kwargs) for nn in (linen_nn, flax_nn)
    ]
    (_, ours, _), (_, theirs, _) = (_parse(t) for t in tables)
    assert [(r['path'], r['module']) for r in ours] == [(r['path'], r['module']) for r in theirs]
    for mine, flax_row in zip(ours, theirs, strict=True):
        if not mine['module']:
            continue  # the totals row
        for column in ('flops', 'vjp_flops'):
            expected = float(flax_row[column])
            assert float(mine[column]) == pytest.approx(expected, rel=0.1), (mine, column)
    root, block = (float(r['flops']) for r in ours[:2])
    assert root == pytest.approx(3 * block, rel=0.01)
