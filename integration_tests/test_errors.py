"""Every error class of every distribution: exported, picklable, raised somewhere.

Errors cross process boundaries (multiprocessing, pytest-xdist), so each must
unpickle with its message and attributes whatever its constructor takes; users
import them from their distribution's public ``errors`` module; and a Flax-named
class that nothing raises would promise an ``except`` clause that never fires.
"""

from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from linen.core.errors import LinenError

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ('linen.core', 'linen.module', 'linen.transforms', 'linen.layers', 'linen.profiling')
ERRORS_MODULES = {
    'linen-core': 'linen.core.errors',
    'linen-transforms': 'linen.transforms.errors',
    'linen-layers': 'linen.layers.errors',
    'linen-profiling': 'linen.profiling.errors',
}


def _all_error_classes() -> list[type]:
    """Every LinenError subclass defined in any module of any distribution."""
    found: dict[str, type] = {}
    for package_name in PACKAGES:
        package = importlib.import_module(package_name)
        names = [package_name] + [
            info.name
            for info in pkgutil.walk_packages(package.__path__, package_name + '.')
            if not info.name.rsplit('.', 1)[-1].startswith('test')
        ]
        for name in names:
            module = importlib.import_module(name)
            for obj in vars(module).values():
                if inspect.isclass(obj) and issubclass(obj, LinenError):
                    found[f'{obj.__module__}.{obj.__qualname__}'] = obj
    return sorted(found.values(), key=lambda c: (c.__module__, c.__name__))


CLASSES = _all_error_classes()

# A value for each constructor parameter name the error classes use.
_ARGUMENTS = {
    'cause': ValueError('the original failure'),
    'collections': ['intermediates'],
    'programs_seen': ['jit_f'],
    'annotations': ['parent'],
    'methods': ['a', 'b'],
    'variables': {'params': 1},
}


def _argument(name: str):
    if name in _ARGUMENTS:
        return _ARGUMENTS[name]
    if 'shape' in name or name in ('expected', 'got'):
        return (2, 3)
    if name in ('features', 'qkv_features', 'num_heads'):
        return 4
    return f'<{name}>'


def _instance(cls: type) -> BaseException:
    params = [
        p
        for p in inspect.signature(cls.__init__).parameters.values()
        if p.name != 'self' and p.default is inspect.Parameter.empty
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    return cls(*[_argument(p.name) for p in params])


def test_the_walk_finds_the_errors_of_every_distribution():
    modules = {c.__module__ for c in CLASSES}
    assert set(ERRORS_MODULES.values()) <= modules
    assert len(CLASSES) > 50


@pytest.mark.parametrize('cls', CLASSES, ids=lambda c: c.__name__)
def test_error_pickles_with_its_message_and_attributes(cls):
    err = _instance(cls)
    clone = pickle.loads(pickle.dumps(err))
    assert type(clone) is cls
    assert str(clone) == str(err) and str(err)
    assert clone.args == err.args
    assert vars(clone).keys() == vars(err).keys()
    for key, value in vars(err).items():
        if isinstance(value, BaseException):
            assert type(vars(clone)[key]) is type(value)
        else:
            assert vars(clone)[key] == value


@pytest.mark.parametrize('cls', CLASSES, ids=lambda c: c.__name__)
def test_error_is_exported_by_its_distributions_errors_module(cls):
    assert cls.__module__ in ERRORS_MODULES.values(), (
        f'{cls.__name__} is defined in {cls.__module__}; move it to an errors module'
    )
    module = importlib.import_module(cls.__module__)
    assert getattr(module, cls.__name__) is cls
    assert cls.__name__ in module.__all__


# Bases users catch, never raised themselves.
_BASES = {'LinenError', 'PluginError'}
# Flax-named classes that Flax itself defines and no longer raises: kept so that
# `except` clauses carried over from Flax still import.
_FLAX_DEFINES_ONLY = {'MultipleMethodsCompactError'}


def _sources_outside_errors_modules() -> str:
    texts = []
    for path in sorted((ROOT / 'packages').glob('*/src/linen/**/*.py')):
        if path.name != 'errors.py':
            texts.append(path.read_text())
    return '\n'.join(texts)


@pytest.fixture(scope='module')
def sources():
    return _sources_outside_errors_modules()


@pytest.mark.parametrize('cls', CLASSES, ids=lambda c: c.__name__)
def test_no_error_class_is_dead(cls, sources):
    if cls.__name__ in _BASES | _FLAX_DEFINES_ONLY:
        return
    assert re.search(rf'\b{cls.__name__}\(', sources), (
        f'nothing raises {cls.__name__}: raise it where Flax does, or remove it'
    )


def test_the_moved_classes_keep_their_old_import_paths():
    from linen.core import errors as core_errors
    from linen.layers import _attention, _normalization, _recurrent
    from linen.layers import errors as layers_errors
    from linen.module import _functional

    assert _functional.MergeParamError is core_errors.MergeParamError
    assert _normalization.MissingUseRunningAverageError is (
        layers_errors.MissingUseRunningAverageError
    )
    assert _attention.QkvFeaturesNotDivisibleError is layers_errors.QkvFeaturesNotDivisibleError
    assert _recurrent.RNNInputShapeError is layers_errors.RNNInputShapeError


# ------------------------------------- the Flax-named errors raised where Flax raises them


def _both(nn_module):
    """The same three misuses, written once for flax.linen and once for linen.nn."""
    nn = nn_module

    class WithSetup(nn.Module):
        def setup(self):
            self.dense = nn.Dense(3)

        def __call__(self, x):
            return self.dense(x)

    class WithBrokenProperty(nn.Module):
        @property
        def width(self):
            return self.no_such_field

        def __call__(self, x):
            return x

    class ReturnsModule(nn.Module):
        @nn.jit
        @nn.compact
        def __call__(self, x):
            return nn.Dense(2)

    return WithSetup, WithBrokenProperty, ReturnsModule


@pytest.mark.flax
@pytest.mark.parametrize(
    'case',
    [
        'CallSetupUnboundModuleError',
        'DescriptorAttributeError',
        'TransformedMethodReturnValueError',
    ],
)
def test_flax_named_errors_raise_where_flax_does(case):
    import flax.errors
    import flax.linen as flax_nn

    import linen.nn as nn
    from linen.core import errors

    x = jnp.ones((1, 2), jnp.float32)
    for lib, error_module in ((flax_nn, flax.errors), (nn, errors)):
        with_setup, broken_property, returns_module = _both(lib)
        with pytest.raises(getattr(error_module, case)) as info:
            if case == 'CallSetupUnboundModuleError':
                with_setup().setup()
            elif case == 'DescriptorAttributeError':
                _ = broken_property().width
            else:
                returns_module().init(jax.random.key(0), x)
        if case == 'DescriptorAttributeError':
            assert isinstance(info.value.__cause__, AttributeError)


# ------------------------------------ Flax's message text first, for each Flax error class
# Each case triggers the same misuse with Flax and with linen; linen raises the same
# class and its message starts with Flax's (Flax's documentation link dropped), so a
# Flax-era `pytest.raises(..., match=...)` keeps matching; linen's where/how-to-fix
# follows.

X = jnp.ones((1, 2), jnp.float32)
K = jax.random.key(0)


def _param(scope):
    return scope.param('w', jax.nn.initializers.ones, (3,))


def _case_param_not_found(nn, core):
    core.apply(_param)({'params': {'b': jnp.ones(3)}})


def _case_collection_not_found(nn, core):
    core.apply(_param)({})


def _case_param_shape(nn, core):
    core.apply(_param)({'params': {'w': jnp.ones(4)}})


def _case_variable_not_found(nn, core):
    core.apply(lambda s: s.variable('state', 'v').value)({'state': {'u': 1}})


def _case_modify_variable(nn, core):
    core.apply(lambda s: s.put_variable('state', 'v', 1))({'state': {'v': 0}})


def _case_invalid_rng(nn, core):
    # Flax raises a plain ValueError here; linen's InvalidRngError is one.
    nn.Dense(2).init({'params': 3}, X)


def _case_frozen(nn, core):
    class Foo(nn.Module):
        i: int = 1

        @nn.compact
        def __call__(self, x):
            self.i = 2
            return x

    Foo().init(K, X)


def _case_assign_submodule(nn, core):
    class Foo(nn.Module):
        def __call__(self, x):
            self.d = nn.Dense(2)
            return self.d(x)

    Foo().init(K, X)


def _case_invalid_method(nn, core):
    m = nn.Dense(2)
    v = m.init(K, X)
    m.apply(v, X, method=3)


def _case_init_on_the_class(nn, core):
    nn.Dense.init(K, X)


def _case_apply_on_the_class(nn, core):
    nn.Dense.apply({'params': {}}, X)


def _case_compact_unbound(nn, core):
    nn.Dense(2)(X)


def _case_unbind_unbound(nn, core):
    nn.Dense(2).unbind()


def _case_share_scope_unbound(nn, core):
    nn.share_scope(nn.Dense(2), nn.Dense(3))


def _case_post_init(nn, core):
    class Foo(nn.Module):
        def __post_init__(self):
            pass

        def __call__(self, x):
            return x

    Foo().init(K, X)


def _case_transform_target(nn, core):
    nn.vmap(3, variable_axes={}, split_rngs={})


def _case_set_attribute_in_setup(nn, core):
    class Foo(nn.Module):
        def setup(self):
            self.d = nn.Dense(2)
            self.d = nn.Dense(3)

        def __call__(self, x):
            return self.d(x)

    Foo().init(K, X)


def _case_partitioning_unspecified(nn, core):
    class Foo(nn.Module):
        @nn.compact
        def __call__(self, x):
            w = self.param('w', nn.with_partitioning(jax.nn.initializers.ones, ('a',)), (2,))
            return x * w

    lifted = nn.vmap(Foo, variable_axes={'params': 0}, split_rngs={'params': True})
    lifted().init(K, jnp.ones((3, 2)))


def _case_duplicate_scope_name(nn, core):
    # Flax's functional core: a plain ValueError; linen's DuplicateScopeNameError is one.
    def model(scope):
        scope.push('a')
        scope.push('a')

    core.init(model)(K)


def _case_duplicate_scope_name_param_then_child(nn, core):
    def model(scope):
        scope.param('a', jax.nn.initializers.ones, (1,))
        scope.child(lambda s: None, name='a')()

    core.init(model)(K)


def _case_duplicate_scope_name_in_a_collection(nn, core):
    def model(scope):
        scope.variable('state', 'v', jnp.zeros, (1,))
        scope.variable('state', 'v', jnp.zeros, (1,))

    core.init(model)(K)


def _name_in_use(nn, kind):
    class Dup(nn.Module):
        @nn.compact
        def __call__(self, x):
            if kind == 'param':
                self.param('a', jax.nn.initializers.ones, (1,))
                self.param('a', jax.nn.initializers.ones, (1,))
            else:
                self.variable('state', 'a', jnp.zeros, (1,))
                self.variable('state', 'a', jnp.zeros, (1,))
            return x

    return Dup()


def _case_name_in_use_param(nn, core):
    _name_in_use(nn, 'param').init(K, X)


def _case_name_in_use_variable(nn, core):
    _name_in_use(nn, 'variable').init(K, X)


FLAX_TEXT_CASES = sorted(n[len('_case_') :] for n in list(globals()) if n.startswith('_case_'))


@pytest.mark.flax
@pytest.mark.parametrize('case', FLAX_TEXT_CASES)
def test_error_message_starts_with_flax_text(case):
    import flax.core as flax_core
    import flax.linen as flax_nn

    import linen.core as linen_core
    import linen.nn as linen_nn

    run = globals()['_case_' + case]
    caught = []
    for nn, core in ((flax_nn, flax_core), (linen_nn, linen_core)):
        with pytest.raises(Exception) as info:
            run(nn, core)
        caught.append(info.value)
    flax_err, linen_err = caught
    assert isinstance(linen_err, type(flax_err)) or (
        type(linen_err).__name__ == type(flax_err).__name__
    )
    flax_text = str(flax_err).split(' (https://flax.readthedocs.io')[0]
    # Flax appends the offending box's repr (its value included); linen names the fix.
    flax_text = flax_text.split(' Partitioned(value=')[0]
    assert str(linen_err).startswith(flax_text), (str(linen_err), flax_text)
    assert len(str(linen_err)) > len(flax_text)  # linen's guidance follows


@pytest.mark.flax
def test_parent_and_name_are_keyword_only_as_in_flax():
    import flax.linen as flax_nn

    import linen.nn as linen_nn

    for nn in (flax_nn, linen_nn):

        class Foo(nn.Module):
            features: int = 1

        assert Foo(2, name='x').name == 'x'
        with pytest.raises(TypeError, match='positional argument'):
            Foo(2, None, 'x')


@pytest.mark.flax
@pytest.mark.parametrize('kind', ['param', 'variable'])
def test_module_duplicates_are_name_in_use_not_value_errors_as_in_flax(kind):
    # The core's ValueError stays inside: a Module reports Flax's NameInUseError, which
    # (in Flax as here) is no ValueError, so `except ValueError` does not catch it.
    import flax.errors
    import flax.linen as flax_nn

    import linen.nn as linen_nn
    from linen.core import errors

    for nn, cls in ((flax_nn, flax.errors.NameInUseError), (linen_nn, errors.NameInUseError)):
        with pytest.raises(cls) as info:
            _name_in_use(nn, kind).init(K, X)
        assert not isinstance(info.value, ValueError)


def _two_compact_methods(nn):
    class Two(nn.Module):
        @nn.compact
        def __call__(self, x):
            return jnp.concatenate([nn.Dense(2)(x), self.other(x)], -1)

        @nn.compact
        def other(self, x):
            return nn.Dense(3)(x)

        def both(self, x):
            return self(x), self.other(x)

    return Two


@pytest.mark.flax
def test_two_compact_methods_behave_as_in_flax():
    # Flax defines MultipleMethodsCompactError and no longer raises it: neither at class
    # definition nor at call. A compact method called from another continues its
    # auto-naming; two outermost calls both start at Dense_0 (and clash on shapes here).
    import flax.linen as flax_nn

    import linen.nn as linen_nn

    x = jnp.linspace(-1.0, 1.0, 6).reshape(2, 3)
    results, errors_seen = [], []
    for nn in (flax_nn, linen_nn):
        two = _two_compact_methods(nn)()
        variables = two.init(K, x)
        other = two.init(K, x, method='other')
        results.append(
            (variables, two.apply(variables, x), other, two.apply(other, x, method='other'))
        )
        with pytest.raises(Exception) as info:
            two.init(K, x, method='both')
        errors_seen.append(type(info.value).__name__)
    ours, theirs = results
    assert jax.tree_util.tree_structure(ours) == jax.tree_util.tree_structure(theirs)
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-6)
    assert sorted(ours[0]['params']) == ['Dense_0', 'Dense_1']
    assert errors_seen == ['ScopeParamShapeError', 'ScopeParamShapeError']
