"""Module edges against flax.linen as an oracle: what third-party Flax code touches
beyond the documented API.

* ``getattr(module, '__name__', None)`` (JAX does it on ``jax.vmap(module)``, as
  rejax's IQN and evosax's LearnedES do);
* the names Flax's submodules carry through their own imports
  (``flax.linen.activation.compact`` for brax, the typing aliases of
  ``flax.linen.linear``, ``flax.linen.module._Sentinel`` for scico);
* a non-string module name; dicts and lists held by a bound module (frozen);
* ``DenseGeneral``'s ``batch_dims`` check; the attention shape errors' first sentence.

Each program is written once over an ``nn`` namespace and run on both libraries.
"""

from __future__ import annotations

import collections
import dataclasses
import importlib
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip('flax')
pytestmark = pytest.mark.flax

import flax.linen as flax_nn  # noqa: E402
from flax.core import FrozenDict as FlaxFrozenDict  # noqa: E402

import linen.nn as linen_nn  # noqa: E402
from linen.core import FrozenDict as LinenFrozenDict  # noqa: E402

SIDES = [flax_nn, linen_nn]
FROZEN_DICT = {flax_nn: FlaxFrozenDict, linen_nn: LinenFrozenDict}


def _raised(fn):
    with pytest.raises(Exception) as info:
        fn()
    return info.value


def _flax_text(exc):
    # Flax appends a documentation link to its own errors' messages.
    return re.sub(r' \(https://flax\.readthedocs\.io[^)]*\)$', '', str(exc))


def _first_sentence(text):
    return re.split(r'(?<=\.)(?: |$)', text, maxsplit=1)[0]


def _assert_same_error(program):
    flax_exc, linen_exc = (_raised(lambda nn=nn: program(nn)) for nn in SIDES)
    assert isinstance(linen_exc, type(flax_exc)), (type(linen_exc), type(flax_exc))
    first = _first_sentence(_flax_text(flax_exc))
    assert str(linen_exc).startswith(first), (str(linen_exc), str(flax_exc))
    return linen_exc


# ------------------------------------------------------------ dunder attributes


def _dunder_model(nn):
    class Net(nn.Module):
        @nn.compact
        def __call__(self, x, r):
            return nn.Dense(2)(x) * r

        def quantiles(self, x, rs):
            # as rejax's ImplicitQuantileNetwork.q: JAX reads `__name__` of the module
            return jax.vmap(self, in_axes=(None, 0))(x, rs)

    return Net()


# Attributes a type has (so `inspect.getattr_static(type(m), ...)` finds the
# metaclass's descriptor) and function attributes JAX and functools look for.
DUNDERS = [
    '__name__',
    '__qualname__',
    '__text_signature__',
    '__type_params__',
    '__bases__',
    '__mro__',
    '__wrapped__',
    '__func__',
    '__self__',
    '__code__',
]


@pytest.mark.parametrize('name', DUNDERS)
def test_missing_dunder_attribute_reads_as_missing(name):
    missing = object()
    outcome = {}
    for nn in SIDES:
        module = _dunder_model(nn)
        variables = module.init(jax.random.key(0), jnp.ones((1, 3)), 1.0)
        bound = module.bind(variables)
        outcome[nn] = [getattr(m, name, missing) is missing for m in (module, bound)]
        with pytest.raises(AttributeError):
            getattr(bound, name)
    assert outcome[linen_nn] == outcome[flax_nn] == [True, True]


def test_vmap_of_a_module_inside_apply_gives_flax_numbers():
    x, rs = jnp.arange(3.0).reshape(1, 3), jnp.arange(4.0)
    out = {}
    for nn in SIDES:
        module = _dunder_model(nn)
        variables = module.init(jax.random.key(0), x, 1.0)
        out[nn] = module.apply(variables, x, rs, method='quantiles')
    assert out[linen_nn].shape == (4, 1, 2)
    np.testing.assert_array_equal(out[linen_nn], out[flax_nn])


def test_vmap_of_a_bound_module_gives_flax_numbers():
    x = jnp.arange(6.0).reshape(2, 3)
    out = {}
    for nn in SIDES:
        dense = nn.Dense(4)
        bound = dense.bind(dense.init(jax.random.key(1), x))
        out[nn] = jax.vmap(bound)(x)
    np.testing.assert_array_equal(out[linen_nn], out[flax_nn])


# ------------------------------------------------------------ submodule namespaces

_TYPING = ('Array', 'Dtype', 'PRNGKey', 'Shape', 'Initializer', 'PrecisionLike')

# flax.linen.<module>: names user code reads from it (classes and functions it
# imports, typing aliases); plain `typing` re-imports and Flax's private helpers left out.
NAMESPACE_NAMES = {
    'activation': ('compact', 'Module', 'Dense', 'Array', 'Dtype'),
    'attention': (
        *_TYPING,
        'compact',
        'Module',
        'merge_param',
        'DenseGeneral',
        'LayerNorm',
        'DotGeneralT',
        'default_kernel_init',
    ),
    'linear': (
        *_TYPING,
        'compact',
        'Module',
        'DotGeneralT',
        'ConvGeneralDilatedT',
        'LaxPadding',
        'PromoteDtypeFn',
        'default_kernel_init',
        'Dense',
        'DenseGeneral',
        'Conv',
    ),
    'normalization': (
        'Array',
        'Dtype',
        'PRNGKey',
        'Shape',
        'Initializer',
        'Axes',
        'compact',
        'Module',
        'merge_param',
        'field',
        'map_variables',
        'LayerNorm',
    ),
    'recurrent': (
        'Array',
        'Dtype',
        'PRNGKey',
        'Initializer',
        'PrecisionLike',
        'Carry',
        'CarryHistory',
        'Output',
        'compact',
        'nowrap',
        'Module',
        'Dense',
        'Conv',
        'FrozenDict',
        'default_kernel_init',
        'promote_dtype',
        'sigmoid',
        'tanh',
    ),
    'stochastic': ('compact', 'Module', 'merge_param', 'PRNGKey', 'Dropout'),
    'combinators': ('compact', 'Module', 'Sequential'),
    'dtypes': ('Dtype', 'promote_dtype', 'canonicalize_dtype'),
    'partitioning': (
        'Array',
        'ArrayPytree',
        'CollectionFilter',
        'LogicalRules',
        'LogicalPartitionSpec',
        'LogicalPartitionSpecPytree',
        'PartitionSpecPytree',
        'flatten_dict',
        'unflatten_dict',
    ),
    'module': (
        'compact',
        'nowrap',
        'Module',
        'merge_param',
        'PRNGKey',
        'RNGSequences',
        'VariableDict',
        'FrozenVariableDict',
        'CollectionFilter',
        'DenyList',
        'FrozenDict',
        'Scope',
        'union_filters',
        'InterceptorContext',
        'Interceptor',
        'Args',
        'Kwargs',
        '_Sentinel',
        '_unspecified_parent',
        '_get_unspecified_parent',
    ),
    'summary': (
        'Array',
        'PRNGKey',
        'RNGSequences',
        'CollectionFilter',
        'DenyList',
        'LazyRng',
        'FrozenVariableDict',
        'MutableVariableDict',
        'LogicalNames',
        'unfreeze',
    ),
}

_CASES = [(module, name) for module, names in NAMESPACE_NAMES.items() for name in names]


@pytest.mark.parametrize('module,name', _CASES, ids=[f'{m}.{n}' for m, n in _CASES])
def test_flax_submodule_names_are_on_linens_stand_in(module, name):
    flax_module = importlib.import_module(f'flax.linen.{module}')
    linen_module = getattr(linen_nn, module)
    assert hasattr(flax_module, name)
    value = getattr(linen_module, name)
    # What linen.nn offers under the same name is that very object.
    flax_value = getattr(flax_module, name)
    if getattr(flax_nn, name, None) is flax_value and hasattr(linen_nn, name):
        assert value is getattr(linen_nn, name)
    # A name of the module's __all__ is one on Flax's side too, never an extra.
    if name not in getattr(linen_module, '__all__', ()):
        assert not name.startswith('__')


def test_brax_reads_compact_from_the_activation_module():
    # brax.training.networks builds its activation table from `nn.activation`.
    assert linen_nn.activation.compact is linen_nn.compact
    assert linen_nn.activation.Dense is linen_nn.Dense
    assert flax_nn.activation.compact is flax_nn.compact


def test_flax_import_names_stay_out_of_the_public_lists():
    # Attributes for Flax code, not linen's public surface (`__all__`, stubs, docs).
    for module in NAMESPACE_NAMES:
        if module == 'module':
            continue
        public = getattr(getattr(linen_nn, module), '__all__', ())
        assert not {'compact', 'Module', 'PRNGKey', 'Initializer'} & set(public), module


def test_typing_aliases_annotate_a_layer_as_in_flax():
    def program(nn):
        linear = nn.linear

        class Proj(nn.Module):
            features: int
            dtype: linear.Dtype = None
            precision: linear.PrecisionLike = None
            kernel_init: linear.Initializer = linear.default_kernel_init
            dot_general: linear.DotGeneralT | None = None

            @linear.compact
            def __call__(self, x: linear.Array) -> linear.Array:
                return nn.Dense(self.features, kernel_init=self.kernel_init)(x)

        return Proj(3).init_with_output(jax.random.key(0), jnp.ones((2, 4)))

    (out_f, vars_f), (out_l, vars_l) = (program(nn) for nn in SIDES)
    np.testing.assert_array_equal(out_l, out_f)
    jax.tree_util.tree_map(np.testing.assert_array_equal, dict(vars_l), dict(vars_f))


def test_unspecified_parent_sentinel_as_in_flax():
    import flax.linen.module as flax_module

    import linen.module as linen_module

    for nn, module in ((flax_nn, flax_module), (linen_nn, linen_module)):

        class Sub(nn.Module):
            pass

        parent = {f.name: f for f in dataclasses.fields(Sub)}['parent']
        assert parent.default is module._unspecified_parent
        assert isinstance(module._unspecified_parent, module._Sentinel)
        assert module._get_unspecified_parent() is module._unspecified_parent
        assert Sub().parent is None  # resolved at construction, outside any module


# ------------------------------------------------------------ non-string module name


@pytest.mark.parametrize('name', [3, 1.5, ('a',)])
@pytest.mark.parametrize('where', ['compact', 'setup'])
def test_non_string_module_name_raises_flaxs_type_error(name, where):
    def program(nn):
        class Compact(nn.Module):
            @nn.compact
            def __call__(self, x):
                return nn.Dense(2, name=name)(x)

        class Setup(nn.Module):
            def setup(self):
                self.dense = nn.Dense(2, name=name)

            def __call__(self, x):
                return self.dense(x)

        model = Compact() if where == 'compact' else Setup()
        return model.init(jax.random.key(0), jnp.ones((1, 2)))

    exc = _assert_same_error(program)
    assert isinstance(exc, TypeError)


# ------------------------------------------------------------ containers a bound module holds


def _shape(value, frozen_dict):
    """A container's structure by kind: 'F' FrozenDict, 'd' dict, 't' tuple, 'l' list."""
    if isinstance(value, frozen_dict):
        return ('F', {k: _shape(v, frozen_dict) for k, v in value.items()})
    if isinstance(value, dict):
        return ('d', {k: _shape(v, frozen_dict) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        kind = type(value).__name__ if hasattr(value, '_fields') else type(value).__name__[0]
        return (kind, [_shape(v, frozen_dict) for v in value])
    return type(value).__name__


Pair = collections.namedtuple('Pair', 'a b')


def _holder(nn):
    class Holder(nn.Module):
        cfg: dict = None
        sizes: list = None
        pair: tuple = None

        def setup(self):
            self.layers = {'b': nn.Dense(2), 'a': nn.Dense(2)}
            self.stack = [nn.Dense(3), {'x': nn.Dense(2)}]
            self.options = {'k': 1, 'n': {'m': [1, 2]}, 'l': [3, {'q': 4}]}
            self.ordered = collections.OrderedDict(z=1)
            self.empty = {}
            self.members = {1, 2}

        def __call__(self, x):
            return self.layers['a'](x) + self.layers['b'](x) + self.stack[1]['x'](self.stack[0](x))

    return Holder(cfg={'a': [1]}, sizes=[1, {'x': 2}], pair=Pair(1, [2]))


ATTRIBUTES = ['cfg', 'sizes', 'pair', 'layers', 'stack', 'options', 'ordered', 'empty', 'members']


def _bound_holder(nn):
    module = _holder(nn)
    variables = module.init(jax.random.key(0), jnp.ones((1, 5)))
    return module, variables, module.bind(variables)


def test_a_bound_module_holds_dicts_frozen_and_lists_as_tuples():
    seen = {}
    for nn in SIDES:
        module, variables, bound = _bound_holder(nn)
        fd = FROZEN_DICT[nn]
        seen[nn] = {
            'unbound': [_shape(getattr(module, a), fd) for a in ('cfg', 'sizes', 'pair')],
            'bound': {a: _shape(getattr(bound, a), fd) for a in ATTRIBUTES},
            'params': jax.tree_util.tree_map(jnp.shape, dict(variables['params'])),
        }
    assert seen[linen_nn] == seen[flax_nn]
    assert seen[linen_nn]['bound']['options'][0] == 'F'
    # dict-of-submodules naming is unchanged: `layers_a`, `stack_1_x`
    assert set(seen[linen_nn]['params']) == {'layers_a', 'layers_b', 'stack_0', 'stack_1_x'}


@pytest.mark.parametrize(
    'mutation',
    [
        lambda b: b.options.__setitem__('k', 2),
        lambda b: b.cfg.__setitem__('a', 2),
        lambda b: b.options['l'].append(1),
        lambda b: b.sizes.append(1),
        lambda b: b.options.update({'x': 1}),
    ],
    ids=['setitem', 'field-setitem', 'nested-list-append', 'field-list-append', 'update'],
)
def test_mutating_a_held_container_fails_as_in_flax(mutation):
    _assert_same_error(lambda nn: mutation(_bound_holder(nn)[2]))


def test_filling_a_dict_in_setup_fails_as_in_flax():
    def program(nn):
        class Late(nn.Module):
            def setup(self):
                self.layers = {}
                self.layers['a'] = nn.Dense(2)

            def __call__(self, x):
                return self.layers['a'](x)

        return Late().init(jax.random.key(0), jnp.ones((1, 5)))

    exc = _assert_same_error(program)
    assert str(exc).startswith('FrozenDict is immutable.')


def test_share_scope_and_dict_submodules_keep_flaxs_tree():
    def program(nn):
        class Inner(nn.Module):
            def setup(self):
                self.blocks = {'enc': nn.Dense(3), 'dec': nn.Dense(2)}

            def __call__(self, x):
                return self.blocks['dec'](self.blocks['enc'](x))

        class Outer(nn.Module):
            def setup(self):
                self.inner = Inner()
                nn.share_scope(self, self.inner)
                self.heads = [nn.Dense(2), nn.Dense(2)]

            def __call__(self, x):
                y = self.inner(x)
                return y + self.heads[0](x) + self.heads[1](x)

        return Outer().init_with_output(jax.random.key(0), jnp.ones((1, 4)))

    (out_f, vars_f), (out_l, vars_l) = (program(nn) for nn in SIDES)
    np.testing.assert_array_equal(out_l, out_f)
    assert jax.tree_util.tree_structure(dict(vars_l)) == jax.tree_util.tree_structure(dict(vars_f))
    jax.tree_util.tree_map(np.testing.assert_array_equal, dict(vars_l), dict(vars_f))


# ------------------------------------------------------------ DenseGeneral batch_dims


@pytest.mark.parametrize('batch_dims', [(-3,), (0, -2), [-3], -3, (5,), (1,)])
def test_dense_general_batch_dims_must_lead_as_in_flax(batch_dims):
    def program(nn):
        layer = nn.DenseGeneral(3, axis=-1, batch_dims=batch_dims)
        return layer.init(jax.random.key(0), jnp.ones((2, 4, 5)))

    exc = _assert_same_error(program)
    assert isinstance(exc, ValueError)


def test_dense_general_batch_dims_in_any_order_as_in_flax():
    out = {}
    for nn in SIDES:
        layer = nn.DenseGeneral(3, axis=-1, batch_dims=(1, 0))
        out[nn] = layer.init_with_output(jax.random.key(0), jnp.ones((2, 4, 5)))
    np.testing.assert_array_equal(out[linen_nn][0], out[flax_nn][0])
    assert jax.tree_util.tree_map(jnp.shape, dict(out[linen_nn][1])) == jax.tree_util.tree_map(
        jnp.shape, dict(out[flax_nn][1])
    )


# ------------------------------------------------------------ attention shape errors

_X = jnp.ones((2, 5, 8))
_Q = jnp.ones((2, 5, 2, 4))


def _decode(nn, query):
    mha = nn.MultiHeadDotProductAttention(num_heads=2, qkv_features=8, decode=True)
    variables = mha.init(jax.random.key(1), _X)
    return mha.apply(variables, query, mutable=['cache'])


ATTENTION_CASES = {
    'decode-prompt': lambda nn: _decode(nn, _X[:, :2]),
    'decode-batch': lambda nn: _decode(nn, jnp.ones((3, 1, 8))),
    'mha-mask-rank': lambda nn: nn.MultiHeadDotProductAttention(num_heads=2).init(
        jax.random.key(0), _X, mask=jnp.ones((2, 5))
    ),
    'mha-mask-length': lambda nn: nn.MultiHeadDotProductAttention(num_heads=2).init(
        jax.random.key(0), _X, mask=jnp.ones((2, 1, 5, 7))
    ),
    'mha-mask-jit': lambda nn: jax.jit(
        lambda x: nn.MultiHeadDotProductAttention(num_heads=2).init(
            jax.random.key(0), x, mask=jnp.ones((2, 5))
        )
    )(_X),
    'weights-mask': lambda nn: nn.dot_product_attention_weights(_Q, _Q, mask=jnp.ones((2, 3))),
    'weights-bias': lambda nn: nn.dot_product_attention_weights(_Q, _Q, bias=jnp.ones((2, 3))),
    'weights-bias-and-mask': lambda nn: nn.dot_product_attention_weights(
        _Q, _Q, bias=jnp.ones((2, 3)), mask=jnp.ones((4, 5))
    ),
    'attention-bias': lambda nn: nn.dot_product_attention(_Q, _Q, _Q, bias=jnp.ones((7,))),
}


@pytest.mark.parametrize('case', ATTENTION_CASES)
def test_attention_shape_errors_start_as_flaxs(case):
    exc = _assert_same_error(ATTENTION_CASES[case])
    assert isinstance(exc, ValueError)
