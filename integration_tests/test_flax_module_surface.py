"""Module surface against flax.linen as an oracle: descriptor errors, kw_only fields,
interceptors on unbound modules, module_paths, unbound-module errors and error texts.

Each program is written once over an ``nn`` namespace; errors must be of the class
Flax raises (by name, or a subclass of Flax's builtin base) and match Flax's text.
"""

from __future__ import annotations

import dataclasses
import re

import jax
import jax.numpy as jnp
import pytest

pytest.importorskip('flax')
pytestmark = pytest.mark.flax

import flax.linen as flax_nn  # noqa: E402

import linen.nn as linen_nn  # noqa: E402

SIDES = [flax_nn, linen_nn]


def _raised(fn):
    with pytest.raises(Exception) as info:
        fn()
    return info.value


def _flax_text(exc):
    # Flax appends a documentation link to its own errors' messages.
    return re.sub(r' \(https://flax\.readthedocs\.io[^)]*\)$', '', str(exc))


def _assert_same_error(program):
    flax_exc, linen_exc = (_raised(lambda nn=nn: program(nn)) for nn in SIDES)
    assert type(linen_exc).__name__ == type(flax_exc).__name__ or isinstance(
        linen_exc, type(flax_exc)
    )
    assert str(linen_exc).startswith(_flax_text(flax_exc)), (str(linen_exc), str(flax_exc))
    return linen_exc


def test_property_whose_getter_fails_names_the_missing_attribute():
    def program(nn):
        class M(nn.Module):
            @property
            def prop(self):
                return self.missing_thing

            def __call__(self):
                return self.prop

        return M().apply({})

    exc = _assert_same_error(program)
    assert 'missing_thing' in str(exc) and 'M.prop' in str(exc)


def test_frozen_module_error_text():
    def program(nn):
        class Foo(nn.Module):
            i: int = 1

            def __call__(self):
                self.i = 2

        return Foo().apply({})

    exc = _assert_same_error(program)
    assert str(exc).startswith(
        "Can't set i=2 for Module of type Foo: Module instance is frozen outside of setup method."
    )


@pytest.mark.parametrize(
    'call',
    [
        lambda m: m.has_variable('params', 'kernel'),
        lambda m: m.make_rng('params'),
        lambda m: m.variables,
        lambda m: m.get_variable('params', 'kernel'),
        lambda m: m.put_variable('state', 'x', 1),
        lambda m: m.has_rng('params'),
        lambda m: m.is_mutable_collection('params'),
        lambda m: m.is_initializing(),
        lambda m: m.path,
        lambda m: m.sow('intermediates', 'x', 1),
    ],
)
def test_unbound_module_errors(call):
    _assert_same_error(lambda nn: call(nn.Dense(2)))


def test_kw_only_fields():
    def program(nn):
        class M(nn.Module):
            a: int
            _: dataclasses.KW_ONLY
            b: int = 2
            c: int = dataclasses.field(kw_only=True, default=5)

            def __call__(self):
                return (self.a, self.b, self.c)

        class N(M):
            d: int = 7

            def __call__(self):
                return (self.a, self.b, self.c, self.d)

        fields = [f.name for f in dataclasses.fields(N)]
        return M(1, b=3).apply({}), N(1, 4, c=2).apply({}), N(1).apply({}), N(1, 4).name, fields

    assert program(linen_nn) == program(flax_nn)


def _intercepted_calls(nn, bound):
    seen = []

    def interceptor(next_fun, args, kwargs, context):
        assert dataclasses.is_dataclass(context)
        names = [f.name for f in dataclasses.fields(context)]
        # Running the original method bypasses the dispatcher (no compact state).
        direct = None if context.method_name == '__call__' else context.orig_method(*args)
        seen.append((names, type(context.module).__name__, context.method_name, direct))
        return next_fun(*args, **kwargs)

    class M(nn.Module):
        def hello(self, k):
            return 3 * k

        @nn.compact
        def __call__(self, x):
            return nn.Dense(2)(x)

    with nn.intercept_methods(interceptor):
        if bound:
            x = jnp.ones((1, 3))
            M().init(jax.random.key(0), x)
        else:
            M().hello(2)
    return [(n, c, m, d) for n, c, m, d in seen]


@pytest.mark.parametrize('bound', [False, True])
def test_intercept_methods_context_and_unbound_calls(bound):
    assert _intercepted_calls(linen_nn, bound) == _intercepted_calls(flax_nn, bound)


def test_module_paths():
    def program(nn):
        class Block(nn.Module):
            @nn.compact
            def __call__(self, x):
                return nn.Dense(3)(x)

        class Foo(nn.Module):
            def setup(self):
                self.block = Block()
                self.head = nn.Dense(2)

            def __call__(self, x):
                return self.head(self.block(self.block(x)))

        paths = Foo().module_paths(jax.random.key(0), jnp.ones((1, 3)))
        return {p: (type(m).__name__, m.parent is None, m.scope is None) for p, m in paths.items()}

    assert program(linen_nn) == program(flax_nn)


def _dataclass_surface(nn):
    class A(nn.Module):
        x: int = 1
        y: int = dataclasses.field(default=2, compare=False)
        z: int = dataclasses.field(default=3, hash=False)

    seen = {
        'params': {
            s: getattr(A.__dataclass_params__, s)
            for s in ('init', 'repr', 'eq', 'order', 'unsafe_hash', 'frozen')
        },
        'eq': [A() == A(), A(x=2) == A(), A(y=5) == A(), A(z=5) == A(), A(name='a') == A()],
        'hash': [hash(A(y=5)) == hash(A()), hash(A(z=5)) == hash(A()), hash(A(x=2)) == hash(A())],
    }

    @dataclasses.dataclass
    class Redecorated(A):
        w: int = 4

    seen['redecorated'] = (Redecorated().w, Redecorated(x=5) == Redecorated(x=5))

    @dataclasses.dataclass
    class Mixin:
        m: int = 7

    class Mixed(Mixin, nn.Module):
        c: int = 1

    seen['mixed'] = (Mixed().m, Mixed(3, 4).c, [f.name for f in dataclasses.fields(Mixed)])

    @dataclasses.dataclass(frozen=True)
    class FrozenMixin:
        m: int = 7

    try:

        class OnFrozen(FrozenMixin, nn.Module):
            c: int = 1

        seen['on_frozen'] = 'accepted'
    except TypeError as exc:
        seen['on_frozen'] = str(exc)

    class Own(nn.Module):
        v: int = 1

        def __hash__(self):
            return 5

        def __setattr__(self, name, value):
            object.__setattr__(self, name, value * 2 if name == 'w' else value)

    own = Own()
    own.w = 4
    seen['own'] = (hash(Own(2)), own.w)
    return seen


def test_dataclass_record_eq_hash_and_subclassing():
    assert _dataclass_surface(linen_nn) == _dataclass_surface(flax_nn)


def test_hash_of_module_with_unhashable_field_error_text():
    def program(nn):
        class Widths(nn.Module):
            widths: list

        return hash(Widths([2, 3]))

    exc = _assert_same_error(program)
    assert str(exc).endswith('Field `widths` holds an unhashable list.')


def test_hash_of_module_defining_eq_alone_error_text():
    def program(nn):
        class EqOnly(nn.Module):
            v: int = 1

            def __eq__(self, other):
                return True

        return hash(EqOnly())

    _assert_same_error(program)


def test_scope_path_text_and_flags_read_as_flaxs():
    # Code written for Flax logs or matches `self.scope.path_text` ('/outer/inner', the
    # root '/') and reads `self.scope.flags` ({'initializing': True} in init).
    def program(nn):
        seen = []

        class Inner(nn.Module):
            @nn.compact
            def __call__(self, x):
                seen.append((self.scope.path_text, dict(self.scope.flags)))
                return nn.Dense(2)(x)

        class Outer(nn.Module):
            @nn.compact
            def __call__(self, x):
                seen.append((self.scope.path_text, dict(self.scope.flags)))
                return Inner(name='inner')(x)

        x = jnp.ones((1, 3))
        variables = Outer().init(jax.random.key(0), x)
        Outer().apply(variables, x)
        seen.append((Outer().bind(variables).scope.path_text, None))
        return seen

    expected = [
        ('/', {'initializing': True}),
        ('/inner', {'initializing': True}),
        ('/', {}),
        ('/inner', {}),
        ('/', None),
    ]
    assert program(flax_nn) == expected
    assert program(linen_nn) == expected
