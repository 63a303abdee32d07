"""The public surface of ``linen.core.errors``."""

from __future__ import annotations

import inspect
import pickle

import pytest

from linen.core import errors

CLASSES = [
    getattr(errors, name)
    for name in errors.__all__
    if not issubclass(getattr(errors, name), Warning)
]
WARNINGS = [
    getattr(errors, name) for name in errors.__all__ if issubclass(getattr(errors, name), Warning)
]


@pytest.mark.parametrize('cls', CLASSES, ids=lambda c: c.__name__)
def test_every_error_derives_from_linen_error_and_has_public_module(cls):
    assert inspect.isclass(cls)
    assert issubclass(cls, errors.LinenError)
    assert cls.__module__ == 'linen.core.errors'
    assert cls.__doc__, f'{cls.__name__} needs a docstring'


def test_all_lists_every_error_class_of_the_module():
    defined = {
        name
        for name, obj in vars(errors).items()
        if inspect.isclass(obj) and issubclass(obj, BaseException) and not name.startswith('_')
    }
    assert defined <= set(errors.__all__)
    assert len(errors.__all__) == len(set(errors.__all__))


@pytest.mark.parametrize('cls', WARNINGS, ids=lambda c: c.__name__)
def test_plugin_warnings_are_user_warnings_with_public_module(cls):
    assert issubclass(cls, errors.PluginWarning) and issubclass(cls, UserWarning)
    assert cls.__module__ == 'linen.core.errors'
    assert cls.__doc__


@pytest.mark.parametrize('cls', CLASSES, ids=lambda c: c.__name__)
def test_every_core_error_pickles(cls):
    # A constructor-agnostic round trip (the integration test builds real instances
    # of every distribution's errors): the message and attributes survive.
    err = cls.__new__(cls)
    err.args = ('message of the test',)
    err.where = 'Dense_0'
    clone = pickle.loads(pickle.dumps(err))
    assert type(clone) is cls
    assert clone.args == ('message of the test',) and clone.where == 'Dense_0'


def test_flax_error_is_the_base_alias():
    assert errors.FlaxError is errors.LinenError


@pytest.mark.parametrize(
    ('cls', 'builtin'),
    [
        (errors.ApplyScopeInvalidVariablesTypeError, TypeError),
        (errors.ApplyScopeInvalidVariablesStructureError, ValueError),
        (errors.ScopeParamNotFoundError, KeyError),
        (errors.ScopeCollectionNotFound, KeyError),
        (errors.ScopeParamShapeError, ValueError),
        (errors.InvalidRngError, ValueError),
        (errors.PluginLoadError, ImportError),
        (errors.ConfigError, KeyError),
    ],
)
def test_errors_are_also_the_builtin_users_catch(cls, builtin):
    assert issubclass(cls, builtin)


def test_key_errors_print_their_message_not_its_repr():
    err = errors.ScopeParamNotFoundError('kernel', 'Dense_0')
    assert str(err).startswith('Could not find parameter named "kernel" in scope "/Dense_0"')


@pytest.mark.parametrize(
    ('err', 'pattern'),
    [
        (errors.ScopeParamShapeError('w', 'a/b', (1, 2), (3,)), r'"w" in "/a/b".*\(3,\).*\(1, 2\)'),
        (errors.ModifyScopeVariableError('cache', 'k', ''), r'"k" in "/".*"cache"'),
        (
            errors.NameInUseError('submodule', 'Dense_0', 'MLP'),
            r'submodule "Dense_0" in Module MLP',
        ),
        (errors.PluginLoadError('p', 'd', ImportError('x')), r'LINEN_DISABLE_PLUGINS=p'),
        (errors.PluginExportConflictError('Dense', 'a', 'b'), r'"a" and "b"'),
        (
            errors.PluginExportConflictError('Dense', 'a', 'b', 'c'),
            r'by 3 distributions: "a", "b" and "c"',
        ),
        (errors.PluginExportsTypeError('p', 'd', 'returned a list'), r'"p".*"d".*a list'),
        (errors.PluginHookError('p', 'd', 'linen_exports', KeyError('k')), r'"p".*"d".*KeyError'),
        (errors.ApplyModuleInvalidMethodError('nope', 'M'), r"method='nope' on M"),
        (errors.MultipleMethodsCompactError('M', ['a', 'b']), r'M has several \(a, b\)'),
        (
            errors.DuplicateScopeNameError('w', 'a/b', 'variable'),
            r'^Duplicate use.*"w" in scope "/a/b"',
        ),
    ],
)
def test_messages_say_what_and_where(err, pattern):
    with pytest.raises(type(err), match=pattern):
        raise err
