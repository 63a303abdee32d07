"""A Module class as a dataclass: Flax's record, constructor, equality and hash."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

import linen.nn as nn
from linen.core import errors


class Features(nn.Module):
    features: int


def test_dataclass_fields_equality_and_keyword_name():
    assert Features(3) == Features(3)
    assert Features(3) != Features(4)
    with pytest.raises(TypeError):
        Features(3, None, 'positional-name')


def test_dataclass_record_is_flax_s_and_plain_dataclasses_mix_in():
    # Flax makes a Module class `dataclass(eq=True, unsafe_hash=True, repr=False)`,
    # not frozen: what `__dataclass_params__` records and what subclasses may do.
    params = Features.__dataclass_params__
    assert (params.init, params.repr, params.eq, params.unsafe_hash, params.frozen) == (
        True,
        False,
        True,
        True,
        False,
    )

    @dataclasses.dataclass
    class Mixin:
        m: int = 7

    class Mixed(Mixin, nn.Module):
        c: int = 1

    assert [f.name for f in dataclasses.fields(Mixed)] == ['m', 'c', 'parent', 'name']
    assert (Mixed().m, Mixed(3, 4).c) == (7, 4)

    @dataclasses.dataclass
    class Redecorated(Features):  # a plain decorator on a Module subclass
        extra: int = 4

    assert Redecorated(3).extra == 4 and Redecorated(3).features == 3

    @dataclasses.dataclass(frozen=True)
    class FrozenMixin:
        m: int = 7

    with pytest.raises(TypeError, match='non-frozen dataclass from a frozen one'):

        class OnFrozen(FrozenMixin, nn.Module):
            c: int = 1


def test_eq_and_hash_follow_the_compared_fields():
    class Fields(nn.Module):
        x: int = 1
        ignored: int = dataclasses.field(default=2, compare=False)
        unhashed: int = dataclasses.field(default=3, hash=False)

    assert Fields() == Fields() and Fields() is not Fields()
    assert Fields(x=2) != Fields()
    assert Fields(ignored=5) == Fields()  # compare=False
    assert Fields(unhashed=5) != Fields()  # compared, not hashed
    assert Fields(name='a') != Fields() and Fields(name='a') == Fields(name='a')
    assert Fields().__eq__(1) is NotImplemented
    assert Fields(unhashed=5) != Features(1)
    # hash((x, name)): the fields hashed; `parent` is neither compared nor hashed
    assert hash(Fields(unhashed=5, ignored=0)) == hash(Fields()) == hash((1, None))
    assert hash(Fields(x=2, name='n')) == hash((2, 'n'))

    class Sub(Fields):  # a subclass compares its own fields too
        y: int = 0

    assert Sub(y=1) != Sub() and Sub(y=1, ignored=0) == Sub(y=1)
    assert hash(Sub(y=1, unhashed=0)) == hash(Sub(y=1)) != hash(Sub(y=2))


def test_class_body_methods_are_kept():
    class Own(nn.Module):
        v: int = 1

        def __eq__(self, other):
            return isinstance(other, Own)

        def __hash__(self):
            return 5

        def __setattr__(self, name, value):
            object.__setattr__(self, name, value * 2 if name == 'w' else value)

    assert Own(1) == Own(2) and hash(Own(3)) == 5
    own = Own()
    own.w = 4
    assert own.w == 8
    with pytest.raises(errors.HashBoundModuleError):
        hash(Own().bind({}))  # the class's own hash, still refused once bound

    class EqOnly(nn.Module):  # __eq__ without __hash__: unhashable, as in Python
        v: int = 1

        def __eq__(self, other):
            return True

    with pytest.raises(errors.UnhashableModuleError, match='`__eq__` alone'):
        hash(EqOnly())


def test_hash_names_the_unhashable_field():
    class Widths(nn.Module):
        widths: list
        depth: int = 2

    with pytest.raises(errors.UnhashableModuleError) as info:
        hash(Widths([2, 3]))
    assert isinstance(info.value, TypeError)
    assert str(info.value).startswith('Failed to hash Flax Module.')
    assert str(info.value).endswith('Field `widths` holds an unhashable list.')
    assert hash(Widths((2, 3))) == hash(((2, 3), 2, None))


def test_constructor_keeps_the_dataclass_contract():
    """Module constructors write fields directly; the dataclass's contract must hold.

    The reference is a plain frozen dataclass with the same fields: same signature
    (names, kinds, defaults), same stored values, factories called per instance,
    ``init=False`` fields set, ``InitVar`` values handed to ``__post_init__``.
    """
    seen = []

    def namespace(post_init):
        return {
            '__annotations__': {
                'a': int,
                'b': list,
                'c': int,
                'd': dict,
                'scale': dataclasses.InitVar[int],
            },
            'b': dataclasses.field(default_factory=list),
            'c': dataclasses.field(default=3, init=False),
            'd': dataclasses.field(default_factory=dict, init=False),
            'scale': 2,
            '__post_init__': post_init,
        }

    def plain_post_init(self, scale):
        seen.append(scale)

    def module_post_init(self, scale):
        seen.append(scale)
        nn.Module.__post_init__(self)

    Plain = dataclasses.dataclass(frozen=True)(type('Plain', (), namespace(plain_post_init)))
    WithFields = type('WithFields', (nn.Module,), namespace(module_post_init))

    plain = inspect.signature(Plain).parameters
    ours = inspect.signature(WithFields).parameters
    assert [(p.name, p.kind, p.default) for p in plain.values()] == [
        (p.name, p.kind, p.default) for p in ours.values()
    ][: len(plain)]
    assert list(ours)[len(plain) :] == ['parent', 'name']

    for kwargs in ({}, {'b': [1], 'scale': 7}):
        seen.clear()
        p, m = Plain(1, **kwargs), WithFields(1, **kwargs, name='m')
        assert (m.a, m.b, m.c, m.d) == (p.a, p.b, p.c, p.d)
        assert seen == [kwargs.get('scale', 2)] * 2
    assert WithFields(1).b is not WithFields(1).b  # a fresh list per instance
    assert WithFields(1).d is not WithFields(1).d
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'a'"):
        WithFields()
    with pytest.raises(TypeError, match='unexpected keyword argument'):
        WithFields(1, c=4)  # init=False

    class KeywordOnly(nn.Module, kw_only=True):
        a: int
        b: int = 2

    assert (KeywordOnly(a=1).a, KeywordOnly(a=1).b) == (1, 2)
    with pytest.raises(TypeError):
        KeywordOnly(1)

    class OwnInit(nn.Module):
        a: int

        def __init__(self, a, parent=None, name=None):
            object.__setattr__(self, 'a', a * 10)
            object.__setattr__(self, 'parent', parent)
            object.__setattr__(self, 'name', name)
            self.__post_init__()

    assert OwnInit(2).a == 20  # a class's own __init__ is left alone


def test_unattached_module_is_a_plain_dataclass():
    # As in Flax: until a module is bound or attached, its attributes may change.
    m = Features(3)
    m.features = 4
    del m.features
    assert 'features' not in m.__dict__


def test_kw_only_field_stays_keyword_only_when_a_subclass_redeclares_it():
    import inspect

    from linen.nn import kw_only_dataclasses as kw

    class Base(nn.Module):
        scale: int = kw.field(default=1, kw_only=True)

    class Child(Base):
        size: int
        scale: int = 2

    params = inspect.signature(Child.__init__).parameters
    assert list(params) == ['self', 'size', 'scale', 'parent', 'name']
    assert params['scale'].kind is inspect.Parameter.KEYWORD_ONLY
    assert (Child(4).size, Child(4).scale, Child(4, scale=7).scale) == (4, 2, 7)
