"""Configuration flags: environment, run-time update, aliases, listeners."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from linen.core import errors
from linen.core.config import Config, config


@pytest.fixture
def restore_flags():
    before = {name: getattr(config, name) for name in config.flags()}
    yield
    for name, value in before.items():
        config.update(name, value)


def test_defaults_without_environment(monkeypatch):
    monkeypatch.delenv('LINEN_PROFILE', raising=False)
    monkeypatch.delenv('LINEN_SHAPE_CHECK', raising=False)
    fresh = Config()
    assert fresh.linen_profile is True
    assert fresh.linen_shape_check is True


@pytest.mark.parametrize(
    ('raw', 'value'), [('0', False), ('false', False), ('Off', False), ('1', True), ('yes', True)]
)
def test_environment_is_read(monkeypatch, raw, value):
    monkeypatch.setenv('LINEN_PROFILE', raw)
    assert Config().linen_profile is value


def test_bad_environment_value_raises(monkeypatch):
    monkeypatch.setenv('LINEN_SHAPE_CHECK', 'maybe')
    with pytest.raises(errors.ConfigError, match="LINEN_SHAPE_CHECK='maybe' is not a boolean"):
        Config()


def test_environment_read_in_fresh_interpreter():
    env = dict(os.environ, LINEN_PROFILE='0')
    out = subprocess.run(
        [
            sys.executable,
            '-c',
            'import json; from linen.core import config; print(json.dumps(config.linen_profile))',
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) is False


def test_update_takes_effect_and_notifies(restore_flags):
    seen = []
    config.on_change(lambda name, value: seen.append((name, value)))
    config.update('linen_shape_check', False)
    assert config.linen_shape_check is False
    config.update('flax_shape_check', True)  # Flax's spelling is an alias
    assert config.flax_shape_check is True
    assert seen[-2:] == [('linen_shape_check', False), ('linen_shape_check', True)]


def test_unknown_flag_and_wrong_type(restore_flags):
    with pytest.raises(errors.ConfigError, match="Unknown linen config flag 'linen_nope'"):
        config.update('linen_nope', True)
    with pytest.raises(AttributeError, match='Unknown linen config flag'):
        _ = config.linen_nope
    with pytest.raises(errors.ConfigError, match='takes a bool'):
        config.update('linen_profile', 1)


def test_shape_check_flag_reaches_scope(restore_flags):
    import jax.numpy as jnp

    from linen.core import apply

    def fn(scope):
        return scope.param('w', lambda k, s: jnp.zeros(s), (3,))

    wrong = {'params': {'w': jnp.ones((2,))}}
    with pytest.raises(errors.ScopeParamShapeError):
        apply(fn)(wrong)
    config.update('linen_shape_check', False)
    assert apply(fn)(wrong).shape == (2,)
    config.update('linen_shape_check', True)
    with pytest.raises(errors.ScopeParamShapeError):
        apply(fn)(wrong)


def test_temp_flip_flag_sets_and_restores(restore_flags):
    assert config.linen_return_frozendict is False
    with config.temp_flip_flag('return_frozendict', True):
        assert config.linen_return_frozendict is True
        assert config.flax_return_frozendict is True
    assert config.linen_return_frozendict is False


def test_temp_flip_flag_restores_on_error(restore_flags):
    with pytest.raises(RuntimeError, match='boom'):
        with config.temp_flip_flag('flax_preserve_adopted_names', True):
            raise RuntimeError('boom')
    assert config.linen_preserve_adopted_names is False


def test_int_flag_takes_int_or_none(restore_flags):
    config.update('flax_max_repr_depth', 2)
    assert config.linen_max_repr_depth == 2
    config.update('linen_max_repr_depth', None)
    assert config.flax_max_repr_depth is None
    with pytest.raises(errors.ConfigError, match='takes an int or None'):
        config.update('linen_max_repr_depth', 'deep')


def test_flax_environment_names_are_read(monkeypatch):
    monkeypatch.delenv('LINEN_MAX_REPR_DEPTH', raising=False)
    monkeypatch.setenv('FLAX_MAX_REPR_DEPTH', '3')
    monkeypatch.setenv('FLAX_RETURN_FROZENDICT', 'true')
    fresh = Config()
    assert fresh.linen_max_repr_depth == 3
    assert fresh.linen_return_frozendict is True


def test_unknown_flag_is_a_lookup_error():
    with pytest.raises(LookupError, match='Unknown linen config flag'):
        config.update('flax_nope', True)
