"""Every error of the Module API, raised by real misuse, matched on its message."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

import linen.nn as nn
from linen.core import errors


def zeros_init(key, shape):
    return jnp.zeros(shape)


class Dense(nn.Module):
    features: int

    @nn.compact
    def __call__(self, x):
        return x @ self.param('kernel', zeros_init, (x.shape[-1], self.features))


class Noisy(nn.Module):
    @nn.compact
    def __call__(self):
        return self.make_rng('dropout')


def test_compact_method_on_unbound_module():
    with pytest.raises(
        errors.CallCompactUnboundModuleError,
        match=r"Can't call compact methods on unbound modules \(Dense.__call__.*module.init",
    ):
        Dense(3)(jnp.ones((1, 2)))


@pytest.mark.parametrize(
    'method, error, match',
    [
        # Flax looks a name up on the instance: its AttributeError, its TypeError text.
        ('no_such_method', AttributeError, '"Dense" object has no attribute "no_such_method"'),
        (
            'features',
            errors.ApplyModuleMethodNotCallableError,
            "'Dense.features' must be a callable",
        ),
        (42, errors.ApplyModuleInvalidMethodError, r'method=42 on Dense'),
        (lambda: 1, errors.ApplyModuleInvalidMethodError, r'Cannot call apply\(\)'),
    ],
)
def test_invalid_method(method, error, match):
    with pytest.raises(error, match=match):
        Dense(3).init(jax.random.key(0), jnp.ones((1, 2)), method=method)


def test_module_without_call_and_no_method():
    class NoCall(nn.Module):
        pass

    # Flax raises AttributeError; the class is also linen's ApplyModuleInvalidMethodError.
    for error in (AttributeError, errors.ApplyModuleInvalidMethodError):
        with pytest.raises(error, match='^"NoCall" object has no attribute "__call__"'):
            NoCall().init(jax.random.key(0))
        with pytest.raises(error, match='define one, or pass `method=`'):
            NoCall().apply({})


def test_submodule_created_in_non_compact_method():
    class Bad(nn.Module):
        def __call__(self, x):
            return Dense(2)(x)

    with pytest.raises(
        errors.AssignSubModuleError, match=r'Submodule Dense must be defined in `setup\(\)`'
    ):
        Bad().init(jax.random.key(0), jnp.ones((1, 2)))


def test_submodule_assigned_outside_setup():
    class Bad(nn.Module):
        def setup(self):
            pass

        def __call__(self, x):
            self.dense = Dense(2)
            return x

    # the submodule is refused as it is made, before the assignment
    with pytest.raises(errors.AssignSubModuleError, match=r'Submodule Dense must be defined'):
        Bad().init(jax.random.key(0), jnp.ones((1, 2)))


def test_attribute_assigned_outside_setup():
    class Bad(nn.Module):
        def __call__(self, x):
            self.cache = x
            return x

    with pytest.raises(
        errors.SetAttributeFrozenModuleError, match=r"Can't set cache=.* for Module of type Bad"
    ):
        Bad().init(jax.random.key(0), jnp.ones((1, 2)))


def test_reusing_a_name_in_compact():
    class Dup(nn.Module):
        @nn.compact
        def __call__(self, x):
            Dense(2, name='d')(x)
            return Dense(2, name='d')(x)

    with pytest.raises(errors.NameInUseError, match=r'submodule "d" in Module Dup'):
        Dup().init(jax.random.key(0), jnp.ones((1, 2)))


def test_reusing_a_name_for_param_and_submodule():
    class Dup(nn.Module):
        @nn.compact
        def __call__(self, x):
            Dense(2, name='w')(x)
            return self.param('w', zeros_init, (2,))

    with pytest.raises(errors.NameInUseError, match=r'"w" in Module'):
        Dup().init(jax.random.key(0), jnp.ones((1, 2)))


def test_reusing_a_param_name():
    class Dup(nn.Module):
        @nn.compact
        def __call__(self):
            self.param('w', zeros_init, (2,))
            return self.param('w', zeros_init, (2,))

    # Flax's Module text (the core's "Duplicate use of scope name" is for scopes)
    with pytest.raises(errors.NameInUseError, match=r'^Could not create param "w" in Module Dup'):
        Dup().init(jax.random.key(0))


def test_reusing_a_variable_name_in_one_collection():
    class Dup(nn.Module):
        @nn.compact
        def __call__(self):
            self.variable('state', 'v', jnp.zeros, (2,))
            return self.variable('state', 'v', jnp.zeros, (2,)).value

    with pytest.raises(
        errors.NameInUseError, match=r'^Could not create variable "v" in Module Dup'
    ):
        Dup().init(jax.random.key(0))


def test_reusing_a_name_in_setup():
    class Dup(nn.Module):
        def setup(self):
            self.a = Dense(2, name='x')
            self.b = Dense(2, name='x')

        def __call__(self, x):
            return self.a(x)

    with pytest.raises(errors.NameInUseError, match=r'"x"'):
        Dup().init(jax.random.key(0), jnp.ones((1, 2)))


def test_missing_rng_stream():
    with pytest.raises(errors.InvalidRngError, match=r'"dropout".*rngs=\{"dropout": key\}'):
        Noisy().apply({})


def test_missing_rng_stream_names_the_module_first():
    # Flax's sentence: the scope's name (None at the root), then linen's how-to-fix.
    with pytest.raises(errors.InvalidRngError, match=r'^None needs PRNG for "dropout"\. '):
        Noisy().apply({})

    class Outer(nn.Module):
        @nn.compact
        def __call__(self, x):
            return Dense(2)(x)

    with pytest.raises(
        errors.InvalidRngError, match=r'^Dense_0 needs PRNG for "params"\. .*"/Dense_0"'
    ):
        Outer().init({'other': jax.random.key(0)}, jnp.ones((1, 3)))


@pytest.mark.parametrize(
    'bad', ['test', jnp.ones(3), jax.random.split(jax.random.key(0)), jnp.zeros((2, 2), jnp.uint32)]
)
def test_rngs_not_a_key_names_the_module_class(bad):
    pattern = r'^RNGs should be of shape \(2,\) or PRNGKey in Module Dense, but rngs are: '
    x = jnp.ones((1, 2))
    v = Dense(2).init(jax.random.key(0), x)
    with pytest.raises(errors.InvalidRngError, match=pattern):
        Dense(2).init(bad, x)
    with pytest.raises(errors.InvalidRngError, match=pattern):
        Dense(2).init_with_output(bad, x)
    with pytest.raises(errors.InvalidRngError, match=pattern):
        Dense(2).lazy_init(bad, x)
    with pytest.raises(errors.InvalidRngError, match=pattern):
        Dense(2).apply(v, x, rngs=bad)
    with pytest.raises(errors.InvalidRngError, match=pattern):
        Dense(2).bind(v, rngs=bad)


def test_rngs_dict_with_a_bad_key_keeps_the_core_text():
    x = jnp.ones((1, 2))
    with pytest.raises(errors.InvalidRngError, match='^First argument passed to an init function'):
        Dense(2).init({'params': 'test'}, x)
    with pytest.raises(errors.InvalidRngError, match='^The ``rngs`` argument passed to an apply'):
        Noisy().apply({}, rngs={'dropout': 'test'})


def test_module_method_on_the_class_raises():
    with pytest.raises(errors.InvalidInstanceModuleError):
        Dense.bind({}, jnp.ones(2))  # variables= is the array: called on the class
    with pytest.raises(errors.InvalidInstanceModuleError):
        Dense.lazy_init(jax.random.key(0), jnp.ones((1, 2)))


def test_invalid_rng_value():
    with pytest.raises(errors.InvalidRngError, match='jax.random.key'):
        Dense(2).init(0, jnp.ones((1, 2)))
    with pytest.raises(errors.InvalidRngError, match=r"rngs\['dropout'\]"):
        Noisy().apply({}, rngs={'dropout': 'not a key'})


def test_missing_param_on_apply():
    class Two(nn.Module):
        @nn.compact
        def __call__(self, x):
            return Dense(2, name='a')(x) + Dense(2, name='b')(x)

    x = jnp.ones((1, 2))
    v = Two().init(jax.random.key(0), x)
    del v['params']['b']['kernel']
    with pytest.raises(errors.ScopeParamNotFoundError, match=r'"kernel" in scope "/b"'):
        Two().apply(v, x)
    del v['params']['b']
    with pytest.raises(errors.ScopeParamNotFoundError, match=r'"kernel" in scope "/b"'):
        Two().apply(v, x)
    with pytest.raises(errors.ScopeCollectionNotFound, match=r'"kernel" from collection "params"'):
        Two().apply({'params': {}}, x)


def test_param_shape_mismatch():
    v = Dense(3).init(jax.random.key(0), jnp.ones((1, 2)))
    with pytest.raises(
        errors.ScopeParamShapeError,
        match=r'"kernel" in "/".*expected to generate shape \(2, 4\).*has shape \(2, 3\)',
    ):
        Dense(4).apply(v, jnp.ones((1, 2)))


@pytest.mark.parametrize('bad', [jnp.ones(3), None, [{'params': {}}]])
def test_variables_not_a_mapping(bad):
    with pytest.raises(errors.ApplyScopeInvalidVariablesTypeError, match='mapping of collections'):
        Dense(2).apply(bad, jnp.ones((1, 2)))


def test_variables_params_passed_without_collection():
    v = Dense(2).init(jax.random.key(0), jnp.ones((1, 2)))
    with pytest.raises(
        errors.ApplyScopeInvalidVariablesTypeError, match=r"pass `\{'params': params\}`"
    ):
        Dense(2).apply(v['params'], jnp.ones((1, 2)))


def test_variables_with_an_extra_params_layer():
    v = Dense(2).init(jax.random.key(0), jnp.ones((1, 2)))
    with pytest.raises(errors.ApplyScopeInvalidVariablesStructureError, match='extra params layer'):
        Dense(2).apply({'params': v}, jnp.ones((1, 2)))


def test_writing_an_immutable_collection():
    class Writes(nn.Module):
        @nn.compact
        def __call__(self):
            v = self.variable('batch_stats', 'mean', lambda: 0.0)
            v.value = 1.0

    v = Writes().init(jax.random.key(0))
    with pytest.raises(
        errors.ModifyScopeVariableError,
        match=r'"mean" in "/" because collection "batch_stats" is immutable.*'
        r'mutable=\["batch_stats"\]',
    ):
        Writes().apply(v)
    with pytest.raises(errors.ModifyScopeVariableError, match='"params" is immutable'):
        Dense(2).bind(v).put_variable('params', 'x', 1)


def test_two_compact_methods_are_allowed_and_share_auto_names():
    # As in Flax (which defines MultipleMethodsCompactError but no longer raises it):
    # a compact method called from another continues its auto-naming (Dense_1);
    # each outermost call starts again at Dense_0.
    class Two(nn.Module):
        @nn.compact
        def __call__(self, x):
            return Dense(2, name=None)(x) + self.other(x)

        @nn.compact
        def other(self, x):
            return Dense(2)(x)

    x = jnp.ones((1, 3))
    variables = Two().init(jax.random.key(0), x)
    assert sorted(variables['params']) == ['Dense_0', 'Dense_1']
    assert sorted(Two().init(jax.random.key(0), x, method='other')['params']) == ['Dense_0']


@pytest.mark.parametrize('field', ['name', 'parent'])
def test_reserved_field_names(field):
    with pytest.raises(errors.ReservedModuleAttributeError, match=rf"reserved.*'{field}'"):
        type('Bad', (nn.Module,), {'__annotations__': {field: int}})


def test_frozen_module_attribute():
    # A bound module is frozen; one not attached to anything yet is a plain
    # dataclass, as in Flax (see test_module.py).
    with pytest.raises(
        errors.SetAttributeFrozenModuleError,
        match=r"Can't set features=3 for Module of type Dense.*clone",
    ):
        Dense(2).bind({}).features = 3


def test_unbind_on_unbound_module():
    with pytest.raises(errors.CallUnbindOnUnboundModuleError, match='not bound'):
        Dense(2).unbind()


def test_init_on_module_class_or_without_module():
    with pytest.raises(errors.InvalidInstanceModuleError, match='instance of the Module class'):
        nn.apply(lambda m: None, Dense)
    with pytest.raises(errors.InvalidInstanceModuleError):
        nn.init(lambda m: None)
    # The methods called on the class itself (the key lands in `self`).
    x = jnp.ones((1, 2))
    with pytest.raises(errors.InvalidInstanceModuleError, match='MyModule\\(...\\).init'):
        Dense.init(jax.random.key(0), x)
    with pytest.raises(errors.InvalidInstanceModuleError):
        Dense.init_with_output(jax.random.key(0), x)
    with pytest.raises(errors.InvalidInstanceModuleError):
        Dense.apply({'params': {}}, x)


def test_post_init_override_without_super():
    class Bad(nn.Module):
        def __post_init__(self):
            pass

        def __call__(self):
            pass

    with pytest.raises(errors.IncorrectPostInitOverrideError, match='super'):
        Bad().init(jax.random.key(0))


def test_variable_api_on_unbound_module():
    with pytest.raises(errors.UnboundModuleError, match=r"Can't use RNGs on unbound modules"):
        Dense(2).make_rng('params')
    with pytest.raises(ValueError, match=r"Can't access variables on unbound modules\. Dense"):
        _ = Dense(2).variables
    with pytest.raises(errors.UnboundModuleError, match=r'paths on unbound modules\. Dense has'):
        _ = Dense(2).path


def test_bad_parent():
    with pytest.raises(errors.LinenError, match='must be a Module, a Scope or None'):
        Dense(2, parent=3)


def test_scope_used_after_apply():
    kept = []

    class Keep(nn.Module):
        @nn.compact
        def __call__(self):
            kept.append(self)

    Keep().init(jax.random.key(0))
    with pytest.raises(errors.InvalidScopeError, match='no longer valid'):
        kept[0].put_variable('state', 'x', 1)


def test_frozen_module_error_starts_with_flax_text():
    class Foo(nn.Module):
        i: int = 1

        def __call__(self):
            self.i = 2

    flax_text = "Can't set i=2 for Module of type Foo: Module instance is frozen outside of setup"
    with pytest.raises(errors.SetAttributeFrozenModuleError, match=flax_text + r'.*clone\(i='):
        Foo().apply({})


class _Descriptor:
    """A data descriptor whose getter reads an attribute that does not exist."""

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return obj.not_there

    def __set__(self, obj, value):
        raise AttributeError('read-only')


def test_descriptor_getter_errors_name_the_missing_attribute():
    import functools

    class WithProps(nn.Module):
        @property
        def prop(self):
            return self.absent_a

        @functools.cached_property
        def cached(self):
            return self.absent_b

        custom = _Descriptor()

        @property
        def fine(self):
            return 3

    m = WithProps()
    for attr, missing in [('prop', 'absent_a'), ('cached', 'absent_b'), ('custom', 'not_there')]:
        with pytest.raises(errors.DescriptorAttributeError, match=rf'WithProps\.{attr}.*{missing}'):
            getattr(m, attr)
    assert m.fine == 3
    assert isinstance(WithProps.__dict__['prop'].fget, type(lambda: 0))
    with pytest.raises(errors.SetAttributeFrozenModuleError):
        m.bind({}).custom = 1


def test_interceptors_fire_on_unbound_modules():
    seen = []

    def interceptor(next_fun, args, kwargs, context):
        seen.append((context.method_name, context.orig_method(*args, **kwargs)))
        return next_fun(*args, **kwargs) + 1

    class M(nn.Module):
        def double(self, x):
            return 2 * x

    with nn.intercept_methods(interceptor):
        assert M().double(3) == 7
    assert seen == [('double', 6)]
    assert M().double(3) == 6


def test_module_paths_lists_each_module_once():
    class Foo(nn.Module):
        @nn.compact
        def __call__(self, x):
            shared = Dense(3, name='shared')
            return shared(shared(x))

    paths = Foo().module_paths(jax.random.key(0), jnp.ones((1, 3)))
    assert sorted(paths) == ['', 'shared']
    assert paths['shared'].features == 3 and paths['shared'].scope is None


@pytest.mark.parametrize('kind', ['param', 'variable'])
def test_variable_created_outside_setup_and_compact(kind):
    class Plain(nn.Module):
        def __call__(self, x):
            if kind == 'param':
                return x + self.param('b', nn.initializers.zeros, x.shape)
            return x + self.variable('stats', 'm', jnp.zeros, x.shape).value

    flax_text = ('Parameters' if kind == 'param' else 'Variables') + (
        r' must be initialized in `setup\(\)` or in a method wrapped in `@compact`'
    )
    with pytest.raises(errors.InitializeVariableOutsideSetupError, match=flax_text + '.*Plain'):
        Plain().init(jax.random.key(0), jnp.ones(2))


def test_perturbation_collection_without_the_variable():
    class Probe(nn.Module):
        @nn.compact
        def __call__(self, x):
            return self.perturb('hidden', x)

    with pytest.raises(
        errors.PerturbationNotFoundError,
        match='Perturbation collection perturbations present, but missing perturbation '
        'variable hidden',
    ):
        Probe().apply({'perturbations': {}}, jnp.ones(2))
    # without the collection, perturb is a no-op
    assert Probe().apply({}, jnp.ones(2)).tolist() == [1.0, 1.0]


def test_hash_of_a_bound_module():
    with pytest.raises(errors.HashBoundModuleError, match="^Can't call __hash__ on modules"):
        hash(Dense(2).bind({}))
    assert hash(Dense(2)) == hash(Dense(2))
