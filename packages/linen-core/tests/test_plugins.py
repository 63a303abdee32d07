"""The plugin bus and the ``linen.nn`` facade."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import textwrap
import types

import pytest

import linen.nn as nn
from linen.core import DenyList, _bus, errors
from linen.core.frozen_dict import FrozenDict
from linen.core.hookspecs import hookimpl


def run_fresh(code: str, **env: str) -> dict:
    """Run ``code`` in a new interpreter (its plugin manager loads afresh); last line is JSON."""
    full_env = dict(os.environ)
    full_env.pop('LINEN_DISABLE_PLUGINS', None)
    full_env['JAX_PLATFORMS'] = 'cpu'
    full_env.update(env)
    out = subprocess.run(
        [sys.executable, '-c', textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=full_env,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def make_plugin(**hooks) -> types.SimpleNamespace:
    return types.SimpleNamespace(**{k: hookimpl(v) for k, v in hooks.items()})


@pytest.fixture
def registered():
    """``registered(plugin, name)``: register for the duration of one test."""
    names = []

    def register(plugin, name, **kwargs):
        names.append(_bus.register(plugin, name=name, **kwargs))
        return names[-1]

    yield register
    for name in names:
        _bus.unregister(name)


def test_runtime_register_adds_exports_and_unregister_removes_them(registered):
    marker = object()
    plugin = make_plugin(linen_exports=lambda: {'TestOnlyThing': marker})
    generation = _bus.plugins_generation()
    name = registered(plugin, 'test-only-exports')
    assert name == 'test-only-exports'
    assert _bus.plugins_generation() != generation
    assert nn.TestOnlyThing is marker
    assert 'TestOnlyThing' in dir(nn)
    assert _bus.plugin_distribution(plugin) == ('test-only-exports', '<runtime>')
    _bus.unregister('test-only-exports')
    assert 'TestOnlyThing' not in dir(nn)
    with pytest.raises(AttributeError, match="no attribute 'TestOnlyThing'"):
        _ = nn.TestOnlyThing


def test_exports_given_as_import_strings_resolve_lazily(registered):
    registered(make_plugin(linen_exports=lambda: {'test_sqrt_alias': 'math:sqrt'}), 'test-strings')
    import math

    assert nn.test_sqrt_alias is math.sqrt


def test_unregister_by_object_and_unknown_name_is_noop():
    plugin = make_plugin(linen_exports=lambda: {'TestByObject': 1})
    _bus.register(plugin, name='test-by-object')
    assert nn.TestByObject == 1
    _bus.unregister(plugin)
    assert 'TestByObject' not in dir(nn)
    _bus.unregister('no-such-plugin')  # nothing to do, no error


def test_hook_raising_names_the_plugin(registered):
    def broken():
        raise ValueError('boom from test')

    registered(make_plugin(linen_exports=broken), 'test-broken-hook', distribution='test-dist')
    with pytest.raises(
        errors.PluginHookError,
        match=r'"test-broken-hook" \(entry point "test-broken-hook" of distribution '
        r'"test-dist"\) raised in hook linen_exports: ValueError: boom from test',
    ) as info:
        _bus.call_hook('linen_exports')
    assert info.value.plugin == 'test-broken-hook'
    assert info.value.distribution == 'test-dist'
    assert isinstance(info.value.__cause__, ValueError)


def test_raising_exports_cost_only_that_plugin(registered):
    original = ValueError('boom from test')

    def broken():
        raise original

    registered(make_plugin(linen_exports=broken), 'test-raising', distribution='test-dist')
    with pytest.warns(errors.PluginWarning, match=r'"test-raising".*"test-dist".*boom') as rec:
        names = dir(nn)
    # the original traceback is chained to the warning
    (warning,) = [w.message for w in rec if 'test-raising' in str(w.message)]
    assert warning.__cause__ is original
    assert {'Module', 'FrozenDict', 'DenyList'} <= set(names)
    assert nn.FrozenDict is FrozenDict
    # a name the broken plugin may have meant: the error says which plugin failed
    with pytest.raises(AttributeError, match='NotThere.*test-raising.*boom') as info:
        _ = nn.NotThere
    assert isinstance(info.value.__cause__, errors.PluginHookError)
    assert info.value.__cause__.__cause__ is original


@pytest.mark.parametrize(
    ('exports', 'pattern'),
    [
        (['Dense'], r'returned a list'),
        ('Dense', r'returned a str'),
        ({1: object()}, r'keys that are not identifiers: \[1\]'),
    ],
)
def test_malformed_exports_cost_only_that_plugin(registered, exports, pattern):
    registered(make_plugin(linen_exports=lambda: exports), 'test-malformed', distribution='bad')
    with pytest.warns(errors.PluginWarning, match=r'"test-malformed".*"bad".*' + pattern):
        names = dir(nn)
    assert 'Module' in names and nn.DenyList is DenyList


def test_facade_recovers_after_broken_plugin_is_removed():
    _bus.register(make_plugin(linen_exports=lambda: 1 / 0), name='test-transient')
    with pytest.warns(errors.PluginWarning, match='ZeroDivisionError'):
        assert 'Module' in dir(nn)
    _bus.unregister('test-transient')
    assert 'Module' in dir(nn)  # and no warning any more (warnings are errors here)


def test_clash_with_a_first_party_name_keeps_the_first_party_one(registered):
    mine = object()
    registered(
        make_plugin(linen_exports=lambda: {'DenyList': 1, 'TestMine': mine}),
        'test-clash',
        distribution='x-dist',
    )
    with pytest.warns(
        errors.PluginWarning,
        match=r'linen.nn.DenyList is contributed by two.*"linen-core".*"x-dist"',
    ):
        names = dir(nn)
    assert nn.DenyList is DenyList
    assert nn.TestMine is mine  # the plugin's other names still work
    assert {'Module', 'TestMine'} <= set(names)


def test_two_third_party_plugins_exporting_one_name_withhold_it(registered):
    registered(
        make_plugin(linen_exports=lambda: {'TestTwice': 1, 'TestA': 7}), 'ta', distribution='a'
    )
    registered(make_plugin(linen_exports=lambda: {'TestTwice': 2}), 'tb', distribution='b')
    with pytest.warns(errors.PluginWarning, match=r'TestTwice is contributed by two'):
        names = dir(nn)
    assert 'TestTwice' not in names and 'TestA' in names
    with pytest.raises(errors.PluginExportConflictError, match=r'"[ab]" and "[ab]"') as info:
        _ = nn.TestTwice
    assert sorted([info.value.first, info.value.second]) == ['a', 'b']
    assert not hasattr(nn, 'TestTwice')  # the conflict is an AttributeError too
    assert nn.TestA == 7 and nn.Module is not None


def test_export_whose_import_fails_raises_a_typed_error_naming_the_plugin(registered):
    registered(
        make_plugin(linen_exports=lambda: {'TestGone': 'no_such_module_xyz:Thing', 'TestOk': 3}),
        'test-gone',
        distribution='gone-dist',
    )
    with pytest.raises(errors.PluginLoadError, match=r'"test-gone".*"gone-dist".*no_such') as info:
        _ = nn.TestGone
    assert isinstance(info.value.__cause__, ModuleNotFoundError)
    assert nn.TestOk == 3 and 'Module' in dir(nn)


def test_misspelled_hook_name_warns_with_a_suggestion(registered):
    plugin = make_plugin(linen_export=lambda: {'TestNeverSeen': 1})
    with pytest.warns(
        errors.PluginHookNameWarning,
        match=r'"test-typo" .*distribution "typo-dist"\) defines linen_export, which is not a '
        r"linen hook.*Did you mean 'linen_exports'\?",
    ):
        registered(plugin, 'test-typo', distribution='typo-dist')
    assert 'TestNeverSeen' not in dir(nn)


def test_plain_function_with_a_hook_like_name_warns_too(registered):
    plugin = types.SimpleNamespace(linen_exprots=lambda: {}, helper=lambda: None)
    with pytest.warns(errors.PluginHookNameWarning, match='linen_exprots'):
        registered(plugin, 'test-typo-plain')


def test_registering_a_plugin_with_a_wrong_hook_signature_fails_loudly():
    plugin = make_plugin(linen_exports=lambda unexpected_argument: {})
    with pytest.raises(errors.PluginLoadError, match=r'"test-bad-signature".*"test-dist"'):
        _bus.register(plugin, name='test-bad-signature', distribution='test-dist')
    assert _bus.get_plugin_manager().get_plugin('test-bad-signature') is None
    assert all('test-bad-signature' not in str(e) for e in _bus.load_errors())


def test_listeners_are_told_of_changes_until_removed():
    seen = []
    remove = _bus.on_plugins_changed(lambda: seen.append(1))
    _bus.register(make_plugin(linen_exports=lambda: {}), name='test-listener')
    _bus.unregister('test-listener')
    remove()
    _bus.register(make_plugin(linen_exports=lambda: {}), name='test-listener')
    _bus.unregister('test-listener')
    assert len(seen) == 2
    remove()  # removing twice is harmless


def test_a_raising_listener_warns_and_the_others_still_run():
    seen = []

    def broken():
        raise NameError("name 'gone' is not defined")

    removers = [
        _bus.on_plugins_changed(broken),
        _bus.on_plugins_changed(lambda: seen.append(1)),
    ]
    try:
        with pytest.warns(
            errors.PluginWarning, match=r'listener .*broken.* raised NameError'
        ) as rec:
            _bus.register(make_plugin(linen_exports=lambda: {}), name='test-raising-listener')
        assert isinstance(rec[0].message.__cause__, NameError)
        assert seen == [1]  # the listener after the broken one ran
        assert _bus.get_plugin_manager().get_plugin('test-raising-listener') is not None
    finally:
        for remove in removers:
            remove()
        _bus.unregister('test-raising-listener')


def test_import_string():
    import os.path

    assert _bus.import_string('os.path:join') is os.path.join
    assert _bus.import_string('os') is os


def test_first_party_distributions_registered_through_entry_points():
    pm = _bus.get_plugin_manager()
    assert pm.get_plugin('core') is not None
    assert _bus.plugin_distribution(pm.get_plugin('core'))[1] == 'linen-core'
    assert _bus.load_errors() == []


def test_plugin_distribution_names_agree_with_importlib_metadata():
    # The bus reads the Name header itself (importlib parses the whole file).
    from importlib import metadata

    pm = _bus.get_plugin_manager()
    eps = metadata.entry_points(group=_bus.ENTRY_POINT_GROUP)
    assert eps
    for ep in eps:
        plugin = pm.get_plugin(ep.name)
        assert plugin is not None, ep.name
        assert _bus.plugin_distribution(plugin) == (ep.name, ep.dist.metadata['Name'])


def test_exported_modules_import_as_submodules_of_the_facade():
    import linen.core.meta

    exported = {n: getattr(nn, n) for n in dir(nn)}
    modules = {n: m for n, m in exported.items() if isinstance(m, types.ModuleType)}
    assert {'errors', 'meta', 'spmd'} <= set(modules)
    for name, module in modules.items():
        assert importlib.import_module(f'linen.nn.{name}') is module
        assert sys.modules[f'linen.nn.{name}'] is module
        # the module keeps its own spec (the import machinery sets the alias's on it)
        assert module.__spec__.name == module.__name__ != f'linen.nn.{name}'
    from linen.nn.meta import Partitioned, unbox

    assert (Partitioned, unbox) == (linen.core.meta.Partitioned, linen.core.meta.unbox)


def test_names_below_an_exported_package_are_its_modules_not_copies():
    before = sys.modules.get('linen.core.frozen_dict')
    alias = importlib.import_module('linen.nn.module.kw_only_dataclasses')
    assert alias is importlib.import_module('linen.module.kw_only_dataclasses')
    from linen.nn.errors import ScopeParamShapeError

    assert ScopeParamShapeError is errors.ScopeParamShapeError
    assert sys.modules.get('linen.core.frozen_dict') is before


@pytest.mark.parametrize('name', ['FrozenDict', 'no_such_module', 'threading', 'annotations'])
def test_a_name_that_is_no_exported_module_does_not_import(name):
    # An exported class, an unknown name, and names the facade's own code imports:
    # `import flax.linen.FrozenDict` fails alike.
    with pytest.raises(ModuleNotFoundError, match=f"No module named 'linen.nn.{name}'"):
        importlib.import_module(f'linen.nn.{name}')


def test_a_plugins_module_imports_while_registered(registered):
    import json

    spec = json.__spec__
    registered(make_plugin(linen_exports=lambda: {'test_json_mod': 'json'}), 'test-module')
    from linen.nn.test_json_mod import dumps

    assert dumps is json.dumps and sys.modules['linen.nn.test_json_mod'] is json
    assert json.__spec__ is spec
    _bus.unregister('test-module')
    assert 'linen.nn.test_json_mod' not in sys.modules
    with pytest.raises(ModuleNotFoundError, match="No module named 'linen.nn.test_json_mod'"):
        importlib.import_module('linen.nn.test_json_mod')


def test_dir_lists_installed_names():
    names = dir(nn)
    assert names == sorted(names)
    assert {'DenyList', 'FrozenDict', 'config', 'errors'} <= set(names)


def test_unknown_name_message():
    with pytest.raises(AttributeError, match="module 'linen.nn' has no attribute 'NoSuchLayer'"):
        _ = nn.NoSuchLayer


def test_disabled_distribution_gives_install_hint():
    result = run_fresh(
        """
        import json
        import linen.nn as nn
        try:
            nn.Dense
            msg = None
        except AttributeError as exc:
            msg = str(exc)
        print(json.dumps({'msg': msg, 'has_dense': 'Dense' in dir(nn),
                          'has_frozen': 'FrozenDict' in dir(nn)}))
        """,
        LINEN_DISABLE_PLUGINS='layers',
    )
    assert result['has_frozen'] and not result['has_dense']
    assert 'linen-layers' in result['msg']
    # This suite runs on an editable checkout: the hint installs the sibling folder.
    assert 'pip install -e ' in result['msg'] and 'packages/linen-layers' in result['msg']


def test_reloading_the_facade_keeps_one_submodule_finder():
    result = run_fresh(
        """
        import importlib, json, sys
        import linen.nn as nn
        importlib.reload(nn)
        finders = [type(f).__name__ for f in sys.meta_path].count('_SubmoduleFinder')
        import linen.nn.meta as meta
        print(json.dumps({'finders': finders, 'same': meta is nn.meta}))
        """
    )
    assert result == {'finders': 1, 'same': True}


def test_submodule_of_a_disabled_distribution_gives_install_hint():
    result = run_fresh(
        """
        import json
        try:
            from linen.nn.initializers import lecun_normal
            error = None
        except ModuleNotFoundError as exc:
            error = [exc.name, str(exc)]
        print(json.dumps({'error': error}))
        """,
        LINEN_DISABLE_PLUGINS='layers',
    )
    name, message = result['error']
    assert name == 'linen.nn.initializers'
    assert 'linen-layers' in message and 'pip install' in message


def test_disable_plugins_comma_list_blocks_each():
    result = run_fresh(
        """
        import json
        from linen.core import _bus
        pm = _bus.get_plugin_manager()
        names = sorted(pm.get_name(p) for p in pm.get_plugins())
        blocked = _bus.register(object(), name='module')  # runtime registration too
        print(json.dumps({'names': names, 'blocked': pm.get_plugin(blocked) is None}))
        """,
        LINEN_DISABLE_PLUGINS=' layers , module',
    )
    assert 'core' in result['names']
    assert 'layers' not in result['names'] and 'module' not in result['names']
    assert result['blocked']


def test_disable_plugins_accepts_distribution_names():
    result = run_fresh(
        """
        import json
        from linen.core import _bus
        pm = _bus.get_plugin_manager()
        names = sorted(pm.get_name(p) for p in pm.get_plugins())
        blocked = _bus.register(object(), name='mine', distribution='linen-module')
        print(json.dumps({'names': names, 'blocked': pm.get_plugin(blocked) is None}))
        """,
        LINEN_DISABLE_PLUGINS='linen-layers,linen-module',
    )
    assert 'core' in result['names']
    assert 'layers' not in result['names'] and 'module' not in result['names']
    assert result['blocked']


def test_add_hookspecs_is_historic_and_reaches_plugins_registered_later():
    # A plugin registered after start-up brings its own spec through the historic
    # hook; pluggy then checks its implementation against that spec, so a wrong
    # signature is refused instead of silently never matching.
    result = run_fresh(
        """
        import json
        from linen.core import errors, plugin_bus
        from linen.core.hookspecs import hookimpl, hookspec

        class Specs:
            @hookspec(firstresult=True)
            def linen_test_answer(question): ...

        def late(answer):
            class Late:
                @hookimpl
                def linen_add_hookspecs(plugin_manager):
                    plugin_manager.add_hookspecs(Specs)

            setattr(Late, 'linen_test_answer', hookimpl(answer))
            return Late

        pm = plugin_bus.get_plugin_manager()
        plugin_bus.register(late(lambda question: 42), name='late')
        try:
            plugin_bus.register(late(lambda question, extra: 0), name='wrong')
            refused = None
        except errors.PluginLoadError as err:
            refused = str(err)
        print(json.dumps({
            'historic': pm.hook.linen_add_hookspecs.spec.opts['historic'],
            'answer': pm.hook.linen_test_answer(question='?'),
            'refused': refused,
        }))
        """
    )
    assert result['historic'] is True
    assert result['answer'] == 42
    assert 'wrong' in result['refused'] and 'extra' in result['refused']
