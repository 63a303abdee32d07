"""The life of a Module, against flax.linen as the oracle.

Construction (``__post_init__``), lazy ``setup``, adoption of modules passed as
fields (and sharing of one module handed to two parents), ``bind``/``unbind``,
pickling, hashing, where variables may be created, ``apply(method=...)``,
``perturb`` and ``share_scope``. Each scenario is one function of the ``nn``
namespace it is given, run on linen and on Flax; the results must be equal
(variables bit for bit), and where Flax raises, linen raises an error of the
builtin kind (at least) whose message starts with Flax's sentence.
"""

from __future__ import annotations

import functools
import pickle
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip('flax')
cloudpickle = pytest.importorskip('cloudpickle')
pytestmark = pytest.mark.flax

import flax.core as flax_core  # noqa: E402
import flax.linen as flax_nn  # noqa: E402

import linen.core as linen_core  # noqa: E402
import linen.nn as linen_nn  # noqa: E402

BOTH = [(linen_nn, linen_core), (flax_nn, flax_core)]


def shapes(tree):
    return jax.tree_util.tree_map(jnp.shape, jax.tree_util.tree_map(lambda a: a, dict(tree)))


def assert_same_leaves(ours, theirs):
    ours, theirs = dict(ours), dict(theirs)
    assert shapes(ours) == shapes(theirs)
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def outcome(fn, *args):
    """``('ok', result)``, or ``('raised', builtin kinds, message)`` of ``fn(*args)``."""
    try:
        return ('ok', fn(*args))
    except Exception as error:  # the kind and the text are compared, never skipped
        kinds = tuple(
            k for k in (ValueError, TypeError, AttributeError, KeyError) if isinstance(error, k)
        )
        return ('raised', kinds, str(error))


def _no_addresses(text: str) -> str:
    return re.sub(r' at 0x[0-9a-f]+', '', text)


def assert_same_outcome(scenario):
    ours = outcome(scenario, *BOTH[0])
    theirs = outcome(scenario, *BOTH[1])
    assert ours[0] == theirs[0], (ours, theirs)
    if ours[0] == 'raised':
        # ours may add a kind (a typed error is also the builtin Flax's code catches)
        assert set(theirs[1]) <= set(ours[1]), (ours, theirs)
        # Flax's first sentence (object addresses aside) opens ours
        flax_sentence = _no_addresses(theirs[2].split(' (https://flax')[0]).split('. ')[0]
        assert _no_addresses(ours[2]).startswith(flax_sentence), (ours[2], flax_sentence)
    else:
        assert ours[1] == theirs[1]


# ------------------------------------------------------------------ __post_init__


def post_init_sets_attributes(nn, core):
    class Scaled(nn.Module):
        factor: int = 3

        def __post_init__(self):
            self.double = 2 * self.factor  # not a field
            self.factor = self.factor + 1  # a field, changed before super()
            super().__post_init__()

        def __call__(self, x):
            return x * self.factor + self.double

    m = Scaled()
    return m.factor, m.double, float(m.apply({}, 1.0))


def post_init_without_super(nn, core):
    class Forgot(nn.Module):
        size: int

        def __post_init__(self):
            self.squared = self.size**2

        @nn.compact
        def __call__(self, x):
            return x

    return Forgot(3).init(jax.random.key(0), jnp.ones(2))


def unattached_module_is_mutable(nn, core):
    class Stack(nn.Module):
        layers: tuple

        def __call__(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    stack = Stack(layers=())
    stack.layers = (nn.Dense(2), nn.Dense(3))  # allowed until bound, as in Flax
    variables = stack.init(jax.random.key(1), jnp.ones((1, 4)))
    bound = stack.bind(variables)
    return shapes(variables), [layer.scope is not None for layer in bound.layers]


def bound_module_is_frozen(nn, core):
    bound = nn.Dense(2).bind({})
    bound.features = 3


def test_construction_like_flax():
    for scenario in (
        post_init_sets_attributes,
        post_init_without_super,
        unattached_module_is_mutable,
        bound_module_is_frozen,
    ):
        assert_same_outcome(scenario)


def test_post_init_without_super_raises_the_typed_error():
    with pytest.raises(linen_core.errors.IncorrectPostInitOverrideError):
        post_init_without_super(*BOTH[0])


# -------------------------------------------------------------------- lazy setup


def field_of_bound_module_is_bound(nn, core):
    class Holder(nn.Module):
        def setup(self):
            self.w = self.param('w', lambda key: jnp.arange(3.0))

        def shifted(self, x):
            return self.w + x

    class Outer(nn.Module):
        inner: nn.Module

        def __call__(self, x):
            return self.inner.shifted(x)

    outer = Outer(inner=Holder())
    variables = nn.init(lambda m, x: m(x), outer)(jax.random.key(0), jnp.zeros(3))
    # the setup attribute of the field is reached without calling the field
    y = nn.apply(lambda m, x: m.inner.w * 2 + x, outer)(variables, jnp.ones(3))
    return shapes(variables), y.tolist()


def external_module_nested_in_setup(nn, core):
    class Leaf(nn.Module):
        k: int

        def setup(self):
            self.p = self.param('p', lambda key: 5)

        def __call__(self, x):
            return x * self.k + self.p

    class Middle(nn.Module):
        leaf: nn.Module

        def __call__(self, x):
            return self.leaf(x)

    class Top(nn.Module):
        def setup(self):
            self.middle = Middle(leaf=Leaf(k=2))

        def __call__(self, x):
            return self.middle.leaf(x)

    y, variables = Top().init_with_output(jax.random.key(0), 1)
    return y, jax.tree_util.tree_map(int, dict(variables))


def bind_binds_nested_sequential(nn, core):
    model = nn.Sequential([nn.Sequential([nn.Dense(2), nn.relu, nn.Dense(3)]), nn.Dense(1)])
    variables = model.init(jax.random.key(0), jnp.ones((1, 4)))
    bound = model.bind(variables)
    inner = bound.layers[0]
    return [inner.layers[0].scope is not None, inner.layers[2].scope is not None]


def dir_runs_setup(nn, core):
    class Inner(nn.Module):
        def setup(self):
            self.proj = nn.Dense(2)

        def __call__(self, x):
            return self.proj(x)

    class Outer(nn.Module):
        def setup(self):
            self.inner = Inner()

        def __call__(self, x):
            listed = 'proj' in dir(self.inner)
            return listed, self.inner(x)

    (listed, _), _ = Outer().init_with_output(jax.random.key(0), jnp.ones((1, 3)))
    return listed


def repr_does_not_run_setup(nn, core):
    calls = []

    class Inner(nn.Module):
        def setup(self):
            calls.append('inner')

    class Outer(nn.Module):
        size: int
        inner: nn.Module

        def setup(self):
            calls.append('outer')

    scope = core.Scope({})
    text = repr(Outer(size=1, inner=Inner(parent=scope), parent=scope))
    return 'size = 1' in text, calls


@pytest.mark.parametrize(
    'scenario',
    [
        field_of_bound_module_is_bound,
        external_module_nested_in_setup,
        bind_binds_nested_sequential,
        dir_runs_setup,
    ],
)
def test_lazy_setup_like_flax(scenario):
    assert_same_outcome(scenario)
    # and repr runs no setup at all, here as there
    assert_same_outcome(repr_does_not_run_setup)


# ---------------------------------------------------------------------- adoption


def _adoption_models(nn):
    dense = functools.partial(nn.Dense, use_bias=False)

    class Leaf(nn.Module):
        @nn.compact
        def __call__(self, x):
            return dense(2)(x)

    class Mid(nn.Module):
        leaf: nn.Module

        @nn.compact
        def __call__(self, x):
            return dense(2)(x) + self.leaf(x)

    class Top(nn.Module):
        leaf: nn.Module
        mid: nn.Module

        @nn.compact
        def __call__(self, x):
            return dense(2)(x) + self.mid(x) + self.leaf(x)

    class TopMidFirst(nn.Module):
        mid: nn.Module
        leaf: nn.Module

        def only_leaf(self, x):
            return self.leaf(x)

        def __call__(self, x):
            return self.leaf(x) + self.mid(x)

    return Leaf, Mid, Top, TopMidFirst


@pytest.mark.parametrize('top', ['Top', 'TopMidFirst'])
def test_module_given_to_two_parents_is_shared_like_flax(top):
    results = []
    for nn, _ in BOTH:
        Leaf, Mid, Top, TopMidFirst = _adoption_models(nn)
        leaf = Leaf()
        model = Top(leaf, Mid(leaf)) if top == 'Top' else TopMidFirst(Mid(leaf), leaf)
        x = jnp.ones((3, 2))
        variables = model.init(jax.random.key(4), x)
        y = model.apply(variables, x)
        results.append((variables, y))
        if top == 'TopMidFirst':
            # a method that reaches only the shared module finds its variables
            results[-1] += (model.apply(variables, x, method='only_leaf'),)
    (v_ours, *y_ours), (v_flax, *y_flax) = results
    assert_same_leaves(v_ours, v_flax)
    for a, b in zip(y_ours, y_flax):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def _dict_field_sharing(nn):
    class Counted(nn.Module):
        @nn.compact
        def __call__(self, x):
            n = self.variable('counter', 'n', jnp.zeros, ())
            n.value += 1
            return nn.Dense(1)(x)

    class Hub(nn.Module):
        table: dict

        @nn.compact
        def __call__(self, x):
            return sum(self.table[k](x) for k in ('z', 'y', 'x'))

    one = Counted()
    hub = Hub({'z': one, 'y': one, 'x': one})
    x = jnp.ones((2, 2))
    variables = hub.init(jax.random.key(0), x)
    y, state = hub.apply(variables, x, mutable='counter')
    return variables, state, y


def test_module_shared_inside_a_dict_field_like_flax():
    ours, theirs = (_dict_field_sharing(nn) for nn, _ in BOTH)
    assert_same_leaves(ours[0], theirs[0])
    assert_same_leaves(ours[1], theirs[1])
    np.testing.assert_array_equal(np.asarray(ours[2]), np.asarray(theirs[2]))


def _lora_around_a_module_made_elsewhere(nn):
    class LoRA(nn.Module):
        base: nn.Module
        rank: int

        def setup(self):
            nn.share_scope(self, self.base)

        @nn.compact
        def __call__(self, x):
            a = self.param('a', nn.initializers.ones, (x.shape[-1], self.rank))
            return self.base(x) + x @ a @ jnp.ones((self.rank, self.base.features))

    class Model(nn.Module):
        @nn.compact
        def __call__(self, x):
            return LoRA(nn.Dense(3), rank=2)(x)

    return Model().init(jax.random.key(2), jnp.ones((1, 4)))


def _share_scope_with_grandchild(nn):
    class Grand(nn.Module):
        @nn.compact
        def __call__(self):
            return nn.Dense(3)(jnp.ones(2))

    class Child(nn.Module):
        grand: nn.Module

        @nn.compact
        def __call__(self):
            return self.grand()

    class Parent(nn.Module):
        child: nn.Module

        def setup(self):
            nn.share_scope(self, self.child)

        @nn.compact
        def __call__(self):
            nn.Dense(4)(jnp.ones(2))
            return self.child()

    return Parent(Child(Grand())).init(jax.random.key(3))


def _share_scope_with_bound_field_chain(nn):
    # Fuzz finding F26: the field chain is bound with `inner` in setup, before
    # share_scope moves `inner`; every scope below it must follow (variables at the
    # parent's path) and the streams keep their old derivation (the dropout mask).
    class Leaf(nn.Module):
        @nn.compact
        def __call__(self, x):
            y = nn.Dense(3)(x)
            return nn.Dropout(0.5, deterministic=False)(y)

    class Block(nn.Module):
        sub: nn.Module

        @nn.compact
        def __call__(self, x):
            return self.sub(x)

    class Shared(nn.Module):
        def setup(self):
            self.inner = Block(Block(Block(Leaf())))
            nn.share_scope(self, self.inner)

        def __call__(self, x):
            return self.inner(x)

    x = jnp.arange(8.0).reshape(2, 4)
    rngs = {'params': jax.random.key(4), 'dropout': jax.random.key(5)}
    variables = Shared().init(rngs, x)
    y = Shared().apply(variables, x, rngs={'dropout': jax.random.key(6)})
    return {'variables': variables, 'y': y}


@pytest.mark.parametrize(
    'build',
    [
        _lora_around_a_module_made_elsewhere,
        _share_scope_with_grandchild,
        _share_scope_with_bound_field_chain,
    ],
)
def test_share_scope_like_flax(build):
    assert_same_leaves(*(build(nn) for nn, _ in BOTH))


# --------------------------------------------------------------- bind and unbind


def _bind_unbind(nn):
    class Wrap(nn.Module):
        inner: nn.Module

        @nn.compact
        def __call__(self, x):
            return self.inner(nn.Dense(2)(x))

    module = Wrap(Wrap(nn.Dense(3)))
    x = jnp.ones((1, 2))
    variables = module.init(jax.random.key(0), x)
    bound = module.bind(variables)
    unbound, unbound_vars = bound.unbind()
    return module == unbound, unbound_vars, bound(x)


def test_bind_unbind_round_trip_like_flax():
    (eq_ours, v_ours, y_ours), (eq_flax, v_flax, y_flax) = (_bind_unbind(nn) for nn, _ in BOTH)
    assert eq_ours is eq_flax is True
    assert_same_leaves(v_ours, v_flax)
    np.testing.assert_array_equal(np.asarray(y_ours), np.asarray(y_flax))


# ------------------------------------------------------------- pickle and hash


class _WithProperty(linen_nn.Module):
    count: int
    word: str

    @property
    def repeated(self):
        return self.word * self.count


def test_module_with_a_property_pickles_with_cloudpickle():
    # (Flax does this too; its test uses a locally defined class, pickled by value.)
    def make(nn):
        class Local(nn.Module):
            count: int
            word: str

            @property
            def repeated(self):
                return self.word * self.count

        return Local(count=2, word='ab')

    for nn, _ in BOTH:
        copy = pickle.loads(cloudpickle.dumps(make(nn)))
        assert (copy.count, copy.word, copy.repeated) == (2, 'ab', 'abab')
    copy = pickle.loads(cloudpickle.dumps(_WithProperty(count=3, word='x')))
    assert copy.repeated == 'xxx'


def hash_of_bound_module(nn, core):
    return hash(nn.Dense(4, parent=core.Scope({})))


def hash_of_unbound_modules(nn, core):
    return hash(nn.Dense(4)) == hash(nn.Dense(4)), hash(nn.Dense(4)) == hash(nn.Dense(5))


def custom_hash_is_kept(nn, core):
    class Keyed(nn.Module):
        a: int = 1
        b: int = 2

        def __hash__(self):
            return 7 * self.a

    return hash(Keyed(1, 2)) == hash(Keyed(1, 9)), hash(Keyed(1)) != hash(Keyed(2))


def test_hash_like_flax():
    for scenario in (hash_of_bound_module, hash_of_unbound_modules, custom_hash_is_kept):
        assert_same_outcome(scenario)


# -------------------------------------------- where variables may be created


def param_in_plain_call(nn, core):
    class NoCompact(nn.Module):
        def __call__(self, x):
            return x + self.param('b', nn.initializers.ones, x.shape)

    return NoCompact().init(jax.random.key(0), jnp.ones(2))


def variable_in_plain_method(nn, core):
    class Helper(nn.Module):
        @nn.compact
        def __call__(self, x):
            return x

        def extra(self, x):
            return x + self.variable('stats', 'm', jnp.zeros, x.shape).value

    return Helper().init(jax.random.key(0), jnp.ones(2), method='extra')


def param_in_helper_called_from_compact(nn, core):
    class Helper(nn.Module):
        @nn.compact
        def __call__(self, x):
            return self.bias(x)

        def bias(self, x):
            return x + self.param('b', nn.initializers.ones, x.shape)

    return shapes(Helper().init(jax.random.key(0), jnp.ones(2)))


@pytest.mark.parametrize('scenario', [param_in_plain_call, variable_in_plain_method])
def test_where_variables_may_be_created_like_flax(scenario):
    assert_same_outcome(scenario)
    # a helper method called from a compact method may create them, here as there
    assert_same_outcome(param_in_helper_called_from_compact)


# --------------------------------------------------------------- apply(method=)


def _methods_model(nn):
    class Model(nn.Module):
        sub: nn.Module
        size: int = 1

        def setup(self):
            self.scale = nn.Dense(2)

        def __call__(self, x):
            return self.sub(x) + self.scale(x)

        def twice(self, x):
            return 2 * self.sub(x)

    model = Model(nn.Dense(2))
    x = jnp.ones((1, 3))
    return model, model.init(jax.random.key(0), x), x


METHODS = [
    'twice',  # a method name
    'sub',  # a submodule field's name: calls the submodule
    'Model.twice',  # the function of the class
    'lambda',  # a function of the module
    'bound',  # a method of another instance
    'size',  # not callable: TypeError
    'scale',  # defined in setup: missing on the unbound module
    'nothing',  # missing
    'no_argument',  # a function that cannot take the module
]


def test_apply_method_like_flax():
    for method in METHODS:
        assert_same_outcome(functools.partial(_apply_with_method, method))


def _apply_with_method(method, nn, core):
    model, variables, x = _methods_model(nn)
    chosen = {
        'Model.twice': type(model).twice,
        'lambda': lambda m, y: m.scale(y) - m.sub(y),
        'bound': model.twice,
        'no_argument': lambda: 0,
    }.get(method, method)
    return model.apply(variables, x, method=chosen).tolist()


# ---------------------------------------------------------------------- perturb


def perturb_model(nn):
    class Probe(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.Dense(3)(x)
            x = self.perturb('hidden', x)
            return self.perturb('out', 4 * x)

    return Probe()


def test_perturb_like_flax():
    for given in ('all', 'params', 'empty'):
        assert_same_outcome(functools.partial(_perturb_given, given))
    _perturbation_gradients_like_flax()


def _perturb_given(given, nn, core):
    model = perturb_model(nn)
    x = jnp.ones((1, 2))
    variables = model.init(jax.random.key(5), x)
    chosen = {
        'all': dict(variables),
        'params': {'params': variables['params']},  # perturb is a no-op
        'empty': {'params': variables['params'], 'perturbations': {}},
    }[given]
    return model.apply(chosen, x).tolist()


def _perturbation_gradients(nn):
    model = perturb_model(nn)
    x = jnp.arange(4.0).reshape(2, 2)
    variables = model.init(jax.random.key(5), x)

    def loss(perturbations, params):
        y = model.apply({'params': params, 'perturbations': perturbations}, x)
        return jnp.sum(y**2)

    return jax.grad(loss)(variables['perturbations'], variables['params'])


def _perturbation_gradients_like_flax():
    assert_same_leaves(*(_perturbation_gradients(nn) for nn, _ in BOTH))


# ------------------------------------------------------------ Scope.debug_path


def test_scope_debug_path_like_flax():
    def paths(nn, core):
        seen = []

        class Leaf(nn.Module):
            def setup(self):
                seen.append(self.scope.debug_path)

            def __call__(self, x):
                return x

        class Root(nn.Module):
            def setup(self):
                self.a = Leaf()
                self.b = [Leaf(), Leaf()]
                seen.append(self.scope.debug_path)

            def __call__(self, x):
                return self.a(x) + self.b[0](x) + self.b[1](x)

        Root().init(jax.random.key(0), 1.0)
        root = core.Scope({}, debug_path=('outer',))
        seen.append(root.push('child').debug_path)
        return seen

    assert paths(*BOTH[0]) == paths(*BOTH[1])


# -------------------------------------------------------- kw_only_dataclasses


def test_kw_only_dataclasses_like_flax():
    def scenario(nn, core):
        kw = nn.kw_only_dataclasses

        class Base(nn.Module):
            scale: float = kw.field(default=2.0, kw_only=True)

        class Child(Base):
            size: int

            def __call__(self, x):
                return x * self.size * self.scale

        @kw.dataclass
        class Settings:
            label: str = kw.field(default='', kw_only=True)

        @kw.dataclass
        class Sized(Settings):
            size: float

        return (
            Child(3).apply({}, 1.0),
            Child(3, scale=0.5).apply({}, 1.0),
            Sized(1.5).label,
            Sized(1.5, label='x').label,
            outcome(lambda: kw.field(kw_only=True))[1:],
        )

    assert scenario(*BOTH[0]) == scenario(*BOTH[1])


# ------------------------------------------------------- errors users see first


def _dense_model(nn):
    class Model(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(2)(x)

    return Model()


def _noise_model(nn):
    class Noise(nn.Module):
        @nn.compact
        def __call__(self, x):
            return x + jax.random.normal(self.make_rng('dropout'), x.shape)

    return Noise()


def missing_params_stream_in_a_submodule(nn, core):
    _dense_model(nn).init({'other_stream': jax.random.key(0)}, jnp.ones((1, 3)))


def missing_stream_at_the_root(nn, core):
    _noise_model(nn).apply({}, jnp.ones((1, 3)))


def init_rngs_not_a_key(nn, core):
    _dense_model(nn).init('test', jnp.ones((1, 3)))


def init_rngs_a_batch_of_keys(nn, core):
    _dense_model(nn).init(jax.random.split(jax.random.key(0)), jnp.ones((1, 3)))


def init_rngs_raw_batch_of_keys(nn, core):
    _dense_model(nn).init(jax.random.split(jax.random.PRNGKey(0)), jnp.ones((1, 3)))


def apply_rngs_not_a_key(nn, core):
    _noise_model(nn).apply({}, jnp.ones((1, 3)), rngs='test')


def init_rngs_dict_with_a_bad_key(nn, core):
    _dense_model(nn).init({'params': 'test'}, jnp.ones((1, 3)))


def apply_rngs_dict_with_a_bad_key(nn, core):
    _noise_model(nn).apply({}, jnp.ones((1, 3)), rngs={'dropout': 'test'})


def raw_and_typed_keys_are_keys(nn, core):
    model = _dense_model(nn)
    typed = model.init(jax.random.key(0), jnp.ones((1, 3)))
    raw = model.init(jax.random.PRNGKey(0), jnp.ones((1, 3)))
    data = model.init(jax.random.key_data(jax.random.key(0)), jnp.ones((1, 3)))
    return [np.asarray(leaf).tolist() for leaf in jax.tree_util.tree_leaves((typed, raw, data))]


def module_without_call(nn, core):
    class Foo(nn.Module):
        pass

    Foo().init(jax.random.key(0))


def apply_without_call(nn, core):
    class Foo(nn.Module):
        pass

    Foo().apply({})


def bind_on_the_class(nn, core):
    class B(nn.Module):
        @nn.compact
        def __call__(self, x):
            return x

    B.bind({}, jnp.ones(2))


def apply_with_an_extra_params_layer(nn, core):
    model = _dense_model(nn)
    variables = model.init(jax.random.key(0), jnp.ones((1, 3)))
    model.apply({'params': variables}, jnp.ones((1, 3)))


def apply_with_params_only(nn, core):
    model = nn.Dense(2)
    variables = model.init(jax.random.key(0), jnp.ones((1, 3)))
    model.apply(variables['params'], jnp.ones((1, 3)))


@pytest.mark.parametrize(
    'scenario',
    [
        missing_params_stream_in_a_submodule,
        missing_stream_at_the_root,
        init_rngs_not_a_key,
        init_rngs_a_batch_of_keys,
        init_rngs_raw_batch_of_keys,
        apply_rngs_not_a_key,
        init_rngs_dict_with_a_bad_key,
        apply_rngs_dict_with_a_bad_key,
        raw_and_typed_keys_are_keys,
        module_without_call,
        apply_without_call,
        bind_on_the_class,
        apply_with_an_extra_params_layer,
        apply_with_params_only,
    ],
)
def test_errors_users_see_like_flax(scenario):
    assert_same_outcome(scenario)


@pytest.mark.parametrize(
    ('scenario', 'error'),
    [
        (missing_params_stream_in_a_submodule, 'InvalidRngError'),
        (init_rngs_not_a_key, 'InvalidRngError'),
        (apply_rngs_not_a_key, 'InvalidRngError'),
        (bind_on_the_class, 'InvalidInstanceModuleError'),
        (apply_with_an_extra_params_layer, 'ApplyScopeInvalidVariablesStructureError'),
        (apply_with_params_only, 'ApplyScopeInvalidVariablesTypeError'),
    ],
)
def test_errors_users_see_have_flax_class_names(scenario, error):
    # `except errors.X` written for flax.errors catches linen's error of that name.
    for nn, core in BOTH:
        errors_module = linen_core.errors if nn is linen_nn else __import__('flax').errors
        with pytest.raises(getattr(errors_module, error)):
            scenario(nn, core)


# ------------------------------------------------------------------ nested init


def _nested_init_models(nn):
    class Leaf(nn.Module):
        scale: int

        def setup(self):
            self.b = self.param('b', lambda key: jax.random.normal(key, ()))

        def __call__(self, x):
            return x + self.scale * self.b

    class Holder(nn.Module):
        leaf: nn.Module

        def __call__(self, x):
            return self.leaf(x)

    class Compact(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(2)(x)

    class Outer(nn.Module):
        def setup(self):
            self.holder = Holder(leaf=Leaf(scale=2))
            self.compact = Compact()

        def __call__(self, x):
            # a bound submodule's own init: variables of its own, none in ours
            y, holder_vars = self.holder.init_with_output(jax.random.key(1), x)
            compact_vars = self.compact.init(jax.random.key(2), jnp.ones((1, 3)))
            return y, holder_vars, compact_vars, self.holder(x)

    return Outer


def nested_init_of_bound_submodules(nn, core):
    outer = _nested_init_models(nn)()
    (y, holder_vars, compact_vars, z), variables = outer.init_with_output(
        jax.random.key(0), jnp.ones(())
    )
    leaves = jax.tree_util.tree_map(lambda a: np.asarray(a).tolist(), dict(variables))
    return (
        float(y),
        float(z),
        jax.tree_util.tree_map(lambda a: np.asarray(a).tolist(), dict(holder_vars)),
        jax.tree_util.tree_map(jnp.shape, dict(compact_vars)),
        leaves,
    )


def nested_apply_of_bound_submodule(nn, core):
    class Leaf(nn.Module):
        def setup(self):
            self.b = self.param('b', lambda key: jnp.ones(()))

        def __call__(self, x):
            return x + self.b

    class Holder(nn.Module):
        leaf: nn.Module

        def __call__(self, x):
            return self.leaf(x)

    class Outer(nn.Module):
        def setup(self):
            self.holder = Holder(leaf=Leaf())

        def __call__(self, x):
            own = {'params': {'leaf': {'b': jnp.full((), 10.0)}}}
            return self.holder.apply(own, x), self.holder(x)

    outs, variables = Outer().init_with_output(jax.random.key(0), jnp.ones(()))
    return [float(o) for o in outs], jax.tree_util.tree_map(float, dict(variables))


@pytest.mark.parametrize(
    'scenario', [nested_init_of_bound_submodules, nested_apply_of_bound_submodule]
)
def test_nested_init_like_flax(scenario):
    assert_same_outcome(scenario)


# ------------------------------------------------------- interceptors and setup


def interceptors_see_setup(nn, core):
    class Inner(nn.Module):
        def setup(self):
            self.proj = nn.Dense(2)

        def __call__(self, x):
            return self.proj(x)

    class Outer(nn.Module):
        def setup(self):
            self.inner = Inner()
            self.scale = self.param('scale', lambda key: jnp.full((), 3.0))

        def __call__(self, x):
            return self.scale * self.inner(x)

    model = Outer()
    x = jnp.ones((1, 3))
    variables = model.init(jax.random.key(0), x)
    log = []

    def record(next_fun, args, kwargs, context):
        log.append((type(context.module).__name__, context.method_name, len(args)))
        out = next_fun(*args, **kwargs)
        if context.method_name == 'setup':
            log.append(('setup returned', out))
        return out

    with nn.intercept_methods(record):
        y = model.apply(variables, x)
    with nn.intercept_methods(record):
        init_again = model.init(jax.random.key(0), x)
    assert_same_leaves(init_again, variables)
    return log, np.asarray(y).tolist()


def interceptor_replaces_setup_call(nn, core):
    class Counter(nn.Module):
        def setup(self):
            self.w = self.param('w', lambda key: jnp.ones(()))

        def __call__(self, x):
            return x * self.w

    seen = []

    def wrap_setup(next_fun, args, kwargs, context):
        if context.method_name == 'setup':
            seen.append(context.orig_method() is None)  # setup runs again, returns None
        return next_fun(*args, **kwargs)

    with nn.intercept_methods(wrap_setup):
        variables = Counter().init(jax.random.key(0), 2.0)
    return seen, jax.tree_util.tree_map(float, dict(variables))


@pytest.mark.parametrize('scenario', [interceptors_see_setup, interceptor_replaces_setup_call])
def test_interceptors_see_setup_like_flax(scenario):
    assert_same_outcome(scenario)


# ------------------------------------------------------------------------- repr


def repr_inside_compact(nn, core):
    class MLP(nn.Module):
        act: object = nn.relu
        sizes: tuple = (3, 2)

        @nn.compact
        def __call__(self, x):
            for size in self.sizes:
                x = self.act(nn.Dense(size)(x))
            return repr(self)

    x = jnp.ones((1, 2))
    text, variables = MLP().init_with_output(jax.random.key(0), x)
    return repr(MLP()), text, MLP().apply(variables, x)


def repr_of_setup_children_and_fields(nn, core):
    class Inner(nn.Module):
        layer: nn.Module

        def __call__(self, x):
            return self.layer(x)

    class Outer(nn.Module):
        inner: nn.Module
        f: object = lambda x: x
        g: object = jnp.tanh
        dtype: object = jnp.bfloat16
        label: str = 'a'

        def setup(self):
            self.proj = nn.Dense(2, name='named_proj')
            self.stack = [nn.Dense(1), nn.Dense(2)]

        def __call__(self, x):
            self.sow('intermediates', 'x', x)
            return repr(self), self.inner(self.proj(x))

    model = Outer(Inner(nn.Dense(2)), name='top')
    (text, _), _ = model.init_with_output(jax.random.key(0), jnp.ones((1, 2)))
    return repr(model), _no_addresses(text)


@pytest.mark.parametrize('scenario', [repr_inside_compact, repr_of_setup_children_and_fields])
def test_repr_like_flax(scenario):
    assert_same_outcome(scenario)


# ------------------------------------------------------------- no tracer leaks


def no_tracer_leaks_without_gc(nn, core):
    import gc
    from unittest import mock

    model = nn.Sequential([nn.Dense(5), nn.relu, nn.Dense(3)])

    @jax.jit
    @functools.partial(jax.vmap, in_axes=(0, None))
    def sample(rng, x):
        params = model.init(rng, jnp.zeros((2, 5)))
        return model.apply(params, x)

    # Without the leak checker's own gc.collect, a reference cycle through a
    # bound module (child -> parent -> child) would keep the traced values alive.
    with mock.patch.object(gc, 'collect', return_value=0), jax.checking_leaks():
        for seed in range(3):
            out = sample(jax.random.split(jax.random.key(seed), 4), jnp.ones((2, 5)))
            out.block_until_ready()
            shape = out.shape
            del out
    return shape


def test_no_tracer_leaks_like_flax():
    assert_same_outcome(no_tracer_leaks_without_gc)


def kw_only_field_redeclared_in_a_subclass(nn, core):
    import inspect

    kw = nn.kw_only_dataclasses

    class Base(nn.Module):
        scale: int = kw.field(default=1, kw_only=True)

        def __call__(self, x):
            return x * self.scale + self.offset()

        def offset(self):
            return 0

    class Child(Base):
        size: int  # required, after the inherited keyword-only field
        scale: int = 2  # stays keyword-only, with a new default

        def offset(self):
            return self.size

    class Grandchild(Child):
        label: str

    @kw.dataclass
    class A:
        x: int = kw.field(default=1, kw_only=True)

    @kw.dataclass
    class B(A):
        size: float
        y: int = kw.field(default=3, kw_only=True)
        x: int = 2

    # names and order, and defaults (parent's sentinel aside); the kinds differ on
    # purpose (a keyword-only field is keyword-only here, see the module's docs)
    signature = [
        [
            (n, None if n == 'parent' else p.default)
            for n, p in inspect.signature(c.__init__).parameters.items()
        ]
        for c in (Child, Grandchild, B)
    ]
    values = (
        Child(4).apply({}, 10),
        Child(4, scale=5).apply({}, 10),
        Grandchild(1, 'g').apply({}, 10),
        dataclasses_asdict(B(4)),
    )
    return signature, values


def dataclasses_asdict(value):
    import dataclasses

    return sorted(dataclasses.asdict(value).items())


def test_kw_only_field_redeclared_like_flax():
    assert_same_outcome(kw_only_field_redeclared_in_a_subclass)


# ------------------------------------------------------------ compact_name_scope


def compact_name_scope_methods(nn, core):
    class Foo(nn.Module):
        @nn.compact_name_scope
        def up(self, x):
            return nn.Dense(3)(x)

        @nn.compact_name_scope
        def down(self, x):
            return nn.Dense(3)(x)

        def __call__(self, x):
            return self.up(x) + self.down(x)

    class Bar(Foo):
        @nn.compact_name_scope
        def side(self, x):
            return nn.Dense(3)(x)

        @nn.compact
        def __call__(self, x):
            return self.side(x) + super().__call__(x) + nn.Dense(3)(x)

    x = jnp.ones((1, 2))
    names = [sorted(Foo()._compact_name_scope_methods), sorted(Bar()._compact_name_scope_methods)]
    variables = Bar().init(jax.random.key(0), x)
    outs = [np.asarray(Bar().apply(variables, x, method=m)).tolist() for m in (None, 'up', 'side')]
    return names, jax.tree_util.tree_map(lambda a: np.asarray(a).tolist(), dict(variables)), outs


def test_compact_name_scope_like_flax():
    assert_same_outcome(compact_name_scope_methods)


@pytest.mark.parametrize('given', [(0.5, 0.1), (None, None)], ids=['both', 'neither'])
def test_merge_param_says_what_flax_says(given):
    # Flax's own tests match these texts literally (a layer given `rate` twice, or never).
    texts = []
    for nn in (flax_nn, linen_nn):
        with pytest.raises(ValueError) as info:
            nn.merge_param('rate', *given)
        texts.append(str(info.value))
    assert texts[1] == texts[0]


# ------------------------------------------------------------------------- del


def _x():
    return jnp.ones((1, 2))


def del_field_in_compact_method(nn, core):
    # The bound clone loses its value and reads the class's default; the module the
    # user made keeps its own. A transform's clone afterwards sees the default too.
    class Scaled(nn.Module):
        scale: float = 2.0

        @nn.compact
        def __call__(self, x):
            del self.scale
            dense = nn.jit(nn.Dense)(int(self.scale))
            return self.scale, self.clone().scale, dense(x) * self.scale

    module = Scaled(5.0)
    (scales, x), variables = module.init_with_output(jax.random.key(0), _x())
    return scales, np.asarray(x).tolist(), shapes(variables), module.scale


def del_field_in_setup(nn, core):
    class Scaled(nn.Module):
        features: int
        scale: float = 2.0

        def setup(self):
            del self.scale
            self.dense = nn.Dense(self.features)

        def __call__(self, x):
            return self.dense(x) * self.scale

    module = Scaled(3, 5.0)
    y, variables = module.init_with_output(jax.random.key(0), _x())
    return np.asarray(y).tolist(), shapes(variables)


def del_field_without_default(nn, core):
    class Sized(nn.Module):
        features: int

        @nn.compact
        def __call__(self, x):
            del self.features
            return self.features

    return Sized(3).init(jax.random.key(0), _x())


def del_setup_attribute_and_bound_field(nn, core):
    class Held(nn.Module):
        scale: float = 2.0

        def setup(self):
            self.extra = 3

        def __call__(self, x):
            del self.extra
            return hasattr(self, 'extra'), np.asarray(x * self.scale).tolist()

    bound = Held(5.0).bind({})
    inside = bound(_x())
    del bound.scale
    unbound = Held(5.0)
    del unbound.scale
    return inside, bound.scale, bound(_x())[1], unbound.scale


def del_field_under_lifted_transforms(nn, core):
    class Scaled(nn.Module):
        scale: float = 2.0

        @nn.compact
        def __call__(self, x):
            del self.scale
            return x * self.scale

    return [np.asarray(lift(Scaled)(5.0).apply({}, _x())).tolist() for lift in (nn.remat, nn.jit)]


@pytest.mark.parametrize(
    'scenario',
    [
        del_field_in_compact_method,
        del_field_in_setup,
        del_field_without_default,
        del_setup_attribute_and_bound_field,
        del_field_under_lifted_transforms,
    ],
)
def test_del_like_flax(scenario):
    assert_same_outcome(scenario)


# ------------------------------------------------------------------ deep clones and copies


def _held_models(nn):
    class Inner(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(3)(x)

    class Outer(nn.Module):
        inner: nn.Module

        @nn.compact
        def __call__(self, x):
            return self.inner(x)

    return Inner, Outer


def _values(tree):
    return jax.tree_util.tree_map(lambda a: np.asarray(a).tolist(), dict(tree))


def copy_in_setup_copies_the_held_module(nn, core):
    Inner, Outer = _held_models(nn)

    class Top(nn.Module):
        def setup(self):
            self.shared = Inner()
            self.a = Outer(Inner())
            self.b = self.a.copy()  # a copy of what a holds, not a second holder of it
            self.c = Outer(self.shared).clone(_deep_clone=True)

        def __call__(self, x):
            return self.a(x) + self.b(x) + self.c(x) + self.shared(x)

    out, variables = Top().init_with_output(jax.random.key(0), jnp.ones((1, 2)))
    return np.asarray(out).tolist(), _values(variables)


def copy_in_compact_copies_a_module_bound_to_the_parent(nn, core):
    Inner, Outer = _held_models(nn)
    results = []
    for when in ('before', 'after'):

        class Top(nn.Module):
            order: str

            @nn.compact
            def __call__(self, x):
                a = Outer(Inner(), name='a')  # Inner() belongs to Top (Inner_0)
                if self.order == 'before':
                    c = a.copy(name='c')
                    y = a(x)
                else:
                    y = a(x)
                    c = a.clone(parent=self, name='c', _deep_clone=True)
                return y + c(x)

        out, variables = Top(when).init_with_output(jax.random.key(0), jnp.ones((1, 2)))
        results.append((np.asarray(out).tolist(), _values(variables)))
    return results


def init_of_a_module_holding_one_bound_elsewhere(nn, core):
    Inner, Outer = _held_models(nn)
    x = jnp.ones((1, 2))
    holder = Outer(Inner())
    bound = holder.bind(holder.init(jax.random.key(0), x))
    # The held module is bound to `bound`; the new root gets its own copy of it.
    variables = Outer(bound.inner).init(jax.random.key(2), x)
    applied = Outer(bound.inner).apply(
        {'params': {'inner': {'Dense_0': {'kernel': jnp.ones((2, 3)), 'bias': jnp.ones(3)}}}}, x
    )

    class Top(nn.Module):
        @nn.compact
        def __call__(self, x):
            inner = Inner()
            y = inner(x)
            out, nested = Outer(inner).init_with_output(jax.random.key(1), x)
            return y, _values(nested), np.asarray(out).tolist()

    (y, nested, out), top = Top().init_with_output(jax.random.key(0), x)
    return _values(variables), np.asarray(applied).tolist(), nested, out, _values(top)


def names_after_deep_clone_reset_names_and_unbind(nn, core):
    Inner, Outer = _held_models(nn)
    x = jnp.ones((1, 2))
    holder = Outer(Inner(name='given'))
    bound = holder.bind(holder.init(jax.random.key(0), x))

    def names(m):
        return [m.name, m.inner.name, m.inner.scope is None, m.inner.parent is None]

    return (
        names(bound.clone(_deep_clone=True)),
        names(bound.clone(_deep_clone=True, _reset_names=True)),
        bound.inner.clone(_reset_names=True).name,  # its own name stays
        bound.inner.clone(_deep_clone=True, _reset_names=True).name,
        names(bound.copy()),
        bound.inner.unbind()[0].name,
        names(bound.unbind()[0]),
        _values(bound.clone(_deep_clone=True).init(jax.random.key(1), x)),
    )


def unbound_submodule_holding_a_shared_module_inits_its_own(nn, core):
    # Flax's documented way to take a submodule out of a model (``unbind``, or ``clone``
    # and the submodule's variables); here it holds a module its parent shares.
    Inner, Outer = _held_models(nn)

    class Top(nn.Module):
        def setup(self):
            self.shared = Inner()
            self.holder = Outer(self.shared)

        def __call__(self, x):
            return self.holder(x) + self.shared(x)

    x = jnp.ones((1, 2))
    bound = Top().bind(Top().init(jax.random.key(0), x))
    sub, sub_variables = bound.holder.unbind()
    return (
        _values(sub_variables),
        _values(sub.init(jax.random.key(1), x)),
        _values(bound.holder.clone().init(jax.random.key(2), x)),
    )


@pytest.mark.parametrize(
    'scenario',
    [
        unbound_submodule_holding_a_shared_module_inits_its_own,
        copy_in_setup_copies_the_held_module,
        copy_in_compact_copies_a_module_bound_to_the_parent,
        init_of_a_module_holding_one_bound_elsewhere,
        names_after_deep_clone_reset_names_and_unbind,
    ],
)
def test_deep_clones_copy_every_held_module_like_flax(scenario):
    assert_same_outcome(scenario)
