"""Third-party plugins through real entry points: discovery, numerics, clashes, failures.

The fixture packages live in ``fixtures/``. ``linen-plugin-example`` is installed
into the test environment by the nox ``tests`` session; the in-process tests need
that and skip otherwise. The subprocess tests install each fixture themselves
(``pip install --target``) and never disturb this process's plugin set.
"""

from __future__ import annotations

import importlib.metadata

import jax
import jax.numpy as jnp
import numpy as np
import pytest


@pytest.fixture
def needs_scaled_dense(needs_module):
    """ScaledDense is a Module around linen.layers.Dense: a broken Dense fails here."""
    from linen.layers import Dense  # noqa: F401


@pytest.fixture
def nn(needs_scaled_dense):
    try:
        importlib.metadata.distribution('linen-plugin-example')
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(
            'linen-plugin-example is not installed here; the nox tests session installs '
            'it (pip install integration_tests/fixtures/linen-plugin-example)'
        )
    import linen.nn

    return linen.nn


def _dense_reference(x, kernel, bias, scale):
    y = jnp.dot(x, kernel, precision=jax.lax.Precision.HIGHEST)
    bias = jnp.broadcast_to(jnp.asarray(bias), y.shape[-1:])
    return (y + bias.reshape((1,) * (y.ndim - 1) + bias.shape)) * scale


def _chosen_params(in_features=4, features=3):
    kernel = jnp.arange(in_features * features, dtype=jnp.float32).reshape(in_features, features)
    kernel = kernel / 10.0 - 0.5
    bias = jnp.array([0.25, -1.0, 2.0], dtype=jnp.float32)[:features]
    return {'params': {'Dense_0': {'kernel': kernel, 'bias': bias}, 'scale': jnp.float32(2.5)}}


# ------------------------------------------------------- discovery, in a fresh process


def test_plugin_exports_listed_without_import(probe, plugin_site, needs_facade):
    """An installed entry point puts ScaledDense into dir(nn); its layer module stays unimported."""
    result = probe(
        """
        import json, sys
        import linen.nn as nn
        print(json.dumps({
            'listed': 'ScaledDense' in dir(nn),
            'layer_imported': 'linen_plugin_example._layers' in sys.modules,
        }))
        """,
        sites=[plugin_site('linen-plugin-example')],
    )
    assert result == {'listed': True, 'layer_imported': False}


def test_plugin_layer_resolves_lazily(probe, plugin_site, needs_scaled_dense):
    result = probe(
        """
        import json, sys
        import linen.nn as nn
        cls = nn.ScaledDense
        print(json.dumps({
            'module': cls.__module__,
            'name': cls.__name__,
            'layer_imported': 'linen_plugin_example._layers' in sys.modules,
        }))
        """,
        sites=[plugin_site('linen-plugin-example')],
    )
    assert result == {
        'module': 'linen_plugin_example._layers',
        'name': 'ScaledDense',
        'layer_imported': True,
    }


def test_disable_plugins_hides_the_plugin(probe, plugin_site, needs_facade):
    code = """
        import json
        import linen.nn as nn
        try:
            nn.ScaledDense
        except AttributeError:
            outcome = 'AttributeError'
        else:
            outcome = 'found'
        print(json.dumps({'listed': 'ScaledDense' in dir(nn), 'access': outcome}))
        """
    site = plugin_site('linen-plugin-example')
    disabled = probe(code, sites=[site], env={'LINEN_DISABLE_PLUGINS': 'unrelated, example'})
    assert disabled == {'listed': False, 'access': 'AttributeError'}
    # Same interpreter set-up without the variable: the plugin is there.
    enabled = probe(code, sites=[site])
    assert enabled['listed'] is True
    assert enabled['access'] == 'found'


def test_export_clash_keeps_the_first_party_name_and_warns(probe, plugin_site, needs_facade):
    """linen-plugin-clash exports Dense, which linen-layers owns: a warning naming both,
    linen-layers keeps the name, and the rest of linen.nn works."""
    result = probe(
        """
        import json, warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            import linen.nn as nn
            from linen.layers import Dense
            names = dir(nn)
            dense_is_first_party = nn.Dense is Dense
        from linen.core.errors import PluginWarning
        print(json.dumps({
            'warnings': [[type(w.message).__name__, str(w.message)] for w in caught
                         if issubclass(w.category, PluginWarning)],
            'dense_is_first_party': dense_is_first_party,
            'module_works': nn.Module.__name__ == 'Module' and 'Module' in names,
        }))
        """,
        sites=[plugin_site('linen-plugin-clash')],
    )
    assert result['dense_is_first_party'] and result['module_works']
    ((kind, message),) = result['warnings']
    assert kind == 'PluginWarning'
    assert 'linen.nn.Dense' in message
    assert 'linen-layers' in message and 'linen-plugin-clash' in message


def test_faulty_plugins_cost_only_their_own_names(probe, plugin_site, needs_module):
    """A list from linen_exports, a raising linen_exports and a misspelled hook: each warns
    naming its entry point and distribution (cause chained); a healthy sibling works."""
    result = probe(
        """
        import json, warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            import linen.nn as nn
            names = dir(nn)
            module_ok = nn.Module.__name__ == 'Module'
            ok = nn.FaultyOk.__name__
        try:
            nn.FaultyListed
        except AttributeError as exc:
            missing = {'message': str(exc), 'cause': type(exc.__cause__).__name__}
        print(json.dumps({
            'warnings': sorted(
                [type(w.message).__name__, str(w.message),
                 type(w.message.__cause__).__name__ if w.message.__cause__ else None]
                for w in caught if 'linen-plugin-faulty' in str(w.message)),
            'module_ok': module_ok and 'Module' in names and 'Dense' in names,
            'ok': ok,
            'listed': sorted(n for n in names if n.startswith('Faulty')),
            'missing': missing,
        }))
        """,
        sites=[plugin_site('linen-plugin-faulty')],
    )
    assert result['module_ok']
    assert result['ok'] == 'Healthy' and result['listed'] == ['FaultyOk']
    by_entry_point = {}
    for kind, message, cause in result['warnings']:
        (entry_point,) = [
            e for e in ('faulty_list', 'faulty_raises', 'faulty_typo') if e in message
        ]
        by_entry_point[entry_point] = (kind, message, cause)
    assert set(by_entry_point) == {'faulty_list', 'faulty_raises', 'faulty_typo'}
    kind, message, cause = by_entry_point['faulty_list']
    assert (kind, cause) == ('PluginWarning', 'PluginExportsTypeError')
    assert 'returned a list' in message
    kind, message, cause = by_entry_point['faulty_raises']
    assert (kind, cause) == ('PluginWarning', 'RuntimeError')
    assert 'exploded while listing' in message
    kind, message, cause = by_entry_point['faulty_typo']
    assert kind == 'PluginHookNameWarning'
    assert 'linen_export, which is not a linen hook' in message
    assert "Did you mean 'linen_exports'?" in message
    # An unknown name chains the failure of the plugin that may have provided it.
    assert 'faulty_' in result['missing']['message']
    assert result['missing']['cause'] in {'PluginHookError', 'PluginExportsTypeError'}


def test_faulty_plugins_disabled_by_distribution_name(probe, plugin_site, needs_module):
    result = probe(
        """
        import json, warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            import linen.nn as nn
            names = dir(nn)
        print(json.dumps({'warnings': [str(w.message) for w in caught],
                          'faulty': [n for n in names if n.startswith('Faulty')],
                          'dense': 'Dense' in names}))
        """,
        sites=[plugin_site('linen-plugin-faulty')],
        env={'LINEN_DISABLE_PLUGINS': 'linen-plugin-faulty'},
    )
    assert result == {'warnings': [], 'faulty': [], 'dense': True}


def test_plugin_loading_from_eight_threads_at_once(probe, needs_module):
    """Eight threads start at a barrier and each reads linen.nn names and the manager:
    none may see the manager before every entry point is loaded."""
    result = probe(
        """
        import json, threading
        from linen.core import _bus
        barrier = threading.Barrier(8)
        seen = [None] * 8

        def worker(i):
            barrier.wait()
            try:
                if i % 2:
                    pm = _bus.get_plugin_manager()
                    got = [pm.get_plugin(n) is not None for n in ('layers', 'module', 'core')]
                    import linen.nn as nn
                    seen[i] = ['manager', got, nn.Dense.__module__]
                else:
                    import linen.nn as nn
                    seen[i] = ['facade', nn.Dense.__name__, nn.Module.__name__,
                               'Dense' in dir(nn)]
            except BaseException as exc:
                seen[i] = ['error', f'{type(exc).__name__}: {exc}']

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(json.dumps(seen))
        """
    )
    assert [r[0] for r in result] == ['facade', 'manager'] * 4, result
    for r in result[0::2]:
        assert r[1:] == ['Dense', 'Module', True]
    for r in result[1::2]:
        assert r[1] == [True, True, True]


def test_broken_plugin_is_named_and_the_rest_works(probe, plugin_site, needs_facade):
    result = probe(
        """
        import json, warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            import linen.nn as nn
            names = dir(nn)
        from linen.core import _bus
        errors = [
            {'type': type(e).__name__, 'plugin': e.plugin, 'dist': e.distribution,
             'message': str(e)}
            for e in _bus.load_errors()
        ]
        print(json.dumps({
            'warnings': [str(w.message) for w in caught],
            'errors': errors,
            'has_dense': 'Dense' in names,
            'has_example': 'ScaledDense' in names,
        }))
        """,
        sites=[plugin_site('linen-plugin-broken'), plugin_site('linen-plugin-example')],
    )
    (error,) = [e for e in result['errors'] if e['dist'] == 'linen-plugin-broken']
    assert error['type'] == 'PluginLoadError'
    assert (error['plugin'], error['dist']) == ('broken', 'linen-plugin-broken')
    assert 'not_installed_dependency' in error['message']
    assert 'LINEN_DISABLE_PLUGINS=broken' in error['message']
    # The facade says so on import, naming plugin and distribution...
    assert any('broken' in w and 'linen-plugin-broken' in w for w in result['warnings']), result
    # ...and every other plugin, first- and third-party, still contributes.
    assert result['has_dense'] and result['has_example']


def test_broken_plugin_disabled_is_silent(probe, plugin_site, needs_facade):
    result = probe(
        """
        import json, warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            import linen.nn as nn
            dir(nn)
        from linen.core import _bus
        print(json.dumps({'warnings': [str(w.message) for w in caught
                                        if 'linen-plugin-broken' in str(w.message)],
                          'errors': [str(e) for e in _bus.load_errors()
                                     if e.distribution == 'linen-plugin-broken']}))
        """,
        sites=[plugin_site('linen-plugin-broken')],
        env={'LINEN_DISABLE_PLUGINS': 'broken'},
    )
    assert result == {'warnings': [], 'errors': []}


# --------------------------------------------- the installed layer, in this process


def test_scaled_dense_is_the_fixture_class(nn):
    from linen_plugin_example._layers import ScaledDense

    assert nn.ScaledDense is ScaledDense


def test_scaled_dense_init(nn):
    x = jnp.linspace(-1.0, 1.0, 8, dtype=jnp.float32).reshape(2, 4)
    y, variables = nn.ScaledDense(features=3).init_with_output(jax.random.key(0), x)
    params = variables['params']
    assert jax.tree_util.tree_map(jnp.shape, dict(params['Dense_0'])) == {
        'kernel': (4, 3),
        'bias': (3,),
    }
    assert params['scale'].shape == ()
    assert float(params['scale']) == 1.0
    np.testing.assert_array_equal(params['Dense_0']['bias'], np.zeros(3, np.float32))
    expected = _dense_reference(x, params['Dense_0']['kernel'], 0.0, 1.0)
    np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)


def test_scaled_dense_apply_matches_hand_computation(nn):
    x = jnp.array([[1.0, 2.0, 3.0, 4.0], [-1.0, 0.5, 0.0, 2.0]], dtype=jnp.float32)
    variables = _chosen_params()
    y = nn.ScaledDense(features=3).apply(variables, x)
    p = variables['params']
    # x @ kernel + bias, then * 2.5, written out by hand for the first row.
    kernel = np.asarray(p['Dense_0']['kernel'], np.float64)
    row0 = (np.array([1.0, 2.0, 3.0, 4.0]) @ kernel + np.array([0.25, -1.0, 2.0])) * 2.5
    np.testing.assert_allclose(y[0], row0, rtol=1e-5)
    np.testing.assert_allclose(
        y, _dense_reference(x, p['Dense_0']['kernel'], p['Dense_0']['bias'], 2.5), rtol=1e-5
    )


def test_scaled_dense_under_jit(nn):
    x = jnp.ones((5, 4), jnp.float32)
    variables = _chosen_params()
    model = nn.ScaledDense(features=3)
    y = jax.jit(model.apply)(variables, x)
    p = variables['params']
    np.testing.assert_allclose(
        y, _dense_reference(x, p['Dense_0']['kernel'], p['Dense_0']['bias'], 2.5), rtol=1e-5
    )


def test_scaled_dense_under_nn_vmap(nn):
    batched = nn.vmap(
        nn.ScaledDense,
        in_axes=0,
        out_axes=0,
        variable_axes={'params': None},
        split_rngs={'params': False},
    )
    xs = jnp.arange(2 * 3 * 4, dtype=jnp.float32).reshape(2, 3, 4) / 10.0
    variables = batched(features=3).init(jax.random.key(1), xs)
    # Broadcast parameters keep the unbatched layout.
    assert variables['params']['Dense_0']['kernel'].shape == (4, 3)
    variables = _chosen_params()
    ys = batched(features=3).apply(variables, xs)
    p = variables['params']
    np.testing.assert_allclose(
        ys, _dense_reference(xs, p['Dense_0']['kernel'], p['Dense_0']['bias'], 2.5), rtol=1e-5
    )
