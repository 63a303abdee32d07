"""NameTable: one list of a package's names, and the forms derived from it."""

from __future__ import annotations

import email.message
import email.utils
import json.decoder
import types

import pytest

from linen.core.name_table import NameTable, render_stub


def _table(**kwargs) -> NameTable:
    return NameTable(
        'email',
        {'.message': ('Message', 'EmailMessage'), 'json.decoder': ('JSONDecodeError',)},
        submodules=('utils',),
        **kwargs,
    )


def test_targets_and_sorted_names():
    table = _table(aliases={'decode_error': 'json.decoder:JSONDecodeError'})
    assert table.names == ('EmailMessage', 'JSONDecodeError', 'Message', 'decode_error', 'utils')
    assert table.targets['Message'] == 'email.message:Message'
    assert table.targets['utils'] == 'email.utils'
    assert table.resolve('decode_error') is json.decoder.JSONDecodeError
    assert table.defined_in('.message') == ('Message', 'EmailMessage')


def test_a_name_listed_twice_is_refused():
    with pytest.raises(ValueError, match="'Message' is listed twice"):
        NameTable('email', {'.message': ('Message',), '.parser': ('Message',)})


def test_install_makes_a_lazy_package():
    module = types.ModuleType('fake')
    module.__version__ = '1.0'
    _table().install(vars(module))
    assert module.__all__ == ['__version__', 'EmailMessage', 'JSONDecodeError', 'Message', 'utils']
    assert 'Message' not in vars(module)  # nothing imported until asked for
    assert module.Message is email.message.Message
    assert vars(module)['Message'] is email.message.Message  # kept after the first access
    assert module.utils is email.utils
    assert dir(module) == sorted(module.__all__)
    with pytest.raises(AttributeError, match="module 'email' has no attribute 'nope'"):
        _ = module.nope


def test_eager_modules_are_bound_at_install():
    namespace: dict = {}
    _table(eager=('.message', '.utils')).install(namespace)
    assert namespace['Message'] is email.message.Message
    assert namespace['utils'] is email.utils
    assert 'JSONDecodeError' not in namespace
    assert '__version__' not in namespace['__all__']


def test_exports_for_the_facade():
    table = _table()
    assert table.exports(['Message'], extra='pkg.mod:obj') == {
        'Message': 'email.message:Message',
        'extra': 'pkg.mod:obj',
    }
    assert set(table.exports()) == set(table.names)
    with pytest.raises(KeyError, match='nope'):
        table.exports(['nope'])


def test_render_stub_orders_like_isort_and_wraps_long_lines():
    text = render_stub(
        'Doc.',
        [
            ('pkg.b', 'func', 'func'),
            ('pkg.b', 'Klass', 'Klass'),
            ('pkg.b', 'CONST', 'CONST'),
            ('pkg', 'b', 'b'),
            ('pkg', '_private', '_private'),
            ('pkg', 'b', 'b'),
            ('pkg.long', 'x' * 60, 'x' * 60),
        ],
        preamble=['from typing import Any'],
        tail='def f() -> Any: ...',
    )
    x = 'x' * 60
    assert text == (
        '"""Doc.\n"""\n\n'
        'from typing import Any\n\n'
        'from pkg import _private\n'
        'from pkg import b as b\n'
        'from pkg.b import CONST as CONST\n'
        'from pkg.b import Klass as Klass\n'
        'from pkg.b import func as func\n'
        f'from pkg.long import (\n    {x} as {x},\n)\n'
        '\ndef f() -> Any: ...\n'
    )
