"""setup (lists, tuples, dicts), @compact naming, @nowrap, compact_name_scope."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import linen.nn as nn
from linen.core import errors


def ones_init(key, shape):
    return jnp.ones(shape)


class Scale(nn.Module):
    """y = x * w with w of shape x.shape[-1:], initialised to ones."""

    @nn.compact
    def __call__(self, x):
        return x * self.param('w', ones_init, x.shape[-1:])


def tree_keys(tree):
    return jax.tree_util.tree_map(lambda _: None, tree)


def test_setup_list_tuple_dict_names():
    class Containers(nn.Module):
        def setup(self):
            self.items = [Scale(), Scale()]
            self.pair = (Scale(), Scale())
            self.named = {'enc': Scale(), 'dec': Scale()}
            self.single = Scale()

        def __call__(self, x):
            for m in [*self.items, *self.pair, self.named['enc'], self.named['dec'], self.single]:
                x = m(x)
            return x

    v = Containers().init(jax.random.key(0), jnp.ones(2))
    assert sorted(v['params']) == sorted(
        ['items_0', 'items_1', 'pair_0', 'pair_1', 'named_enc', 'named_dec', 'single']
    )


def test_setup_nested_containers():
    class Nested(nn.Module):
        def setup(self):
            self.blocks = [{'a': Scale(), 'b': [Scale()]}]

        def __call__(self, x):
            return self.blocks[0]['b'][0](self.blocks[0]['a'](x))

    v = Nested().init(jax.random.key(0), jnp.ones(2))
    assert sorted(v['params']) == ['blocks_0_a', 'blocks_0_b_0']


def test_setup_is_lazy_and_runs_once():
    calls = []

    class Lazy(nn.Module):
        def setup(self):
            calls.append(1)
            self.s = Scale()

        def __call__(self, x):
            return self.s(self.s(x))

        def other(self, x):
            return self.s(x)

    m = Lazy()
    assert calls == []
    v = m.init(jax.random.key(0), jnp.ones(2))
    assert calls == [1]
    m.apply(v, jnp.ones(2), method='other')
    assert calls == [1, 1]  # once per apply, not per method call


def test_setup_only_uses_params_that_are_touched():
    class Partial(nn.Module):
        def setup(self):
            self.used = Scale()
            self.unused = Scale()

        def __call__(self, x):
            return self.used(x)

    v = Partial().init(jax.random.key(0), jnp.ones(2))
    assert list(v['params']) == ['used']


def test_compact_auto_names_count_per_class_and_skip_explicit_names():
    class Other(nn.Module):
        @nn.compact
        def __call__(self, x):
            return x

    class M(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = Scale()(x)
            x = Other()(x)
            x = Scale(name='custom')(x)
            x = Scale()(x)
            return x

    v = M().init(jax.random.key(0), jnp.ones(2))
    assert sorted(v['params']) == ['Scale_0', 'Scale_1', 'custom']


def test_explicit_name_colliding_with_auto_name_is_skipped_by_auto_naming():
    class M(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = Scale(name='Scale_0')(x)
            return Scale()(x)

    v = M().init(jax.random.key(0), jnp.ones(2))
    assert sorted(v['params']) == ['Scale_0', 'Scale_1']


@pytest.mark.parametrize('explicit_name', [None, 's'])
def test_compact_called_twice_reuses_names_and_params(explicit_name):
    class M(nn.Module):
        @nn.compact
        def __call__(self, x):
            return Scale(name=explicit_name)(x)

    class Twice(nn.Module):
        def setup(self):
            self.m = M()

        def __call__(self, x):
            return self.m(x) + self.m(2 * x)

    class TwiceCompact(nn.Module):
        @nn.compact
        def __call__(self, x):
            m = M(name='m')
            return m(x) + m(2 * x)

    child = explicit_name or 'Scale_0'
    x = jnp.array([1.0, 2.0])
    for model in (Twice(), TwiceCompact()):
        v = model.init(jax.random.key(0), x)
        assert tree_keys(v) == {'params': {'m': {child: {'w': None}}}}
        w = jnp.array([3.0, 5.0])
        y = model.apply({'params': {'m': {child: {'w': w}}}}, x)
        np.testing.assert_allclose(y, x * w + 2 * x * w)


def test_nowrap_helper_is_not_wrapped():
    wrapped_calls = []

    def interceptor(next_fun, args, kwargs, context):
        wrapped_calls.append(context.method_name)
        return next_fun(*args, **kwargs)

    class M(nn.Module):
        @nn.nowrap
        def make(self, n):
            return Scale(name=f'scale_{n}')

        @nn.compact
        def __call__(self, x):
            return self.make(1)(x)

    with nn.intercept_methods(interceptor):
        v = M().init(jax.random.key(0), jnp.ones(2))
    assert list(v['params']) == ['scale_1']
    assert 'make' not in wrapped_calls and '__call__' in wrapped_calls
    assert not getattr(M.make, 'method_handler_wrapped', False)


def test_compact_name_scope():
    class Two(nn.Module):
        @nn.compact_name_scope
        def up(self, x):
            return Scale()(x) * 2

        @nn.compact_name_scope
        def down(self, x):
            return Scale()(x) / 2

        def __call__(self, x):
            return self.down(self.up(x))

    x = jnp.array([1.0, 3.0])
    v = Two().init(jax.random.key(0), x)
    assert tree_keys(v) == {
        'params': {'up': {'Scale_0': {'w': None}}, 'down': {'Scale_0': {'w': None}}}
    }
    v = {
        'params': {
            'up': {'Scale_0': {'w': jnp.array([2.0, 2.0])}},
            'down': {'Scale_0': {'w': jnp.array([3.0, 3.0])}},
        }
    }
    np.testing.assert_allclose(Two().apply(v, x), x * 2 * 2 * 3 / 2)
    np.testing.assert_allclose(Two().apply(v, x, method='up'), x * 2 * 2)


def test_setup_variables_and_params_in_setup():
    class S(nn.Module):
        def setup(self):
            self.w = self.param('w', ones_init, (2,))
            self.count = self.variable('state', 'count', lambda: 0)

        def __call__(self, x):
            if self.is_mutable_collection('state'):
                self.count.value += 1
            return x * self.w

    v = S().init(jax.random.key(0), jnp.ones(2))
    assert v['state']['count'] == 1
    _, upd = S().apply(v, jnp.ones(2), mutable='state')
    assert upd['state']['count'] == 2


def test_reassigning_field_in_setup_raises():
    class S(nn.Module):
        size: int = 2

        def setup(self):
            self.size = 3

        def __call__(self):
            return self.size

    with pytest.raises(errors.SetAttributeInModuleSetupError, match='frozen'):
        S().init(jax.random.key(0))


def test_setup_attribute_on_unbound_module_gives_hint():
    class S(nn.Module):
        def setup(self):
            self.thing = 1

    with pytest.raises(AttributeError, match='exist only on bound modules'):
        _ = S().thing


def test_kw_only_subclass_and_field_defaults():
    class Base(nn.Module):
        a: int = 1

    class Child(Base, kw_only=True):
        b: int

    c = Child(b=2)
    assert (c.a, c.b, c.name) == (1, 2, None)
    with pytest.raises(TypeError):
        Child(2)
