"""``named_call`` on a plain object with the attributes a Module has (name, _state)."""

import types

import jax
import jax.numpy as jnp
import pytest

from linen.profiling import _state, named_call, override_named_call
from linen.profiling._naming import default_profiling_name


@pytest.fixture(autouse=True)
def default_rule(monkeypatch):
    # Isolate from linen-module: the name hook is tested with real Modules.
    monkeypatch.setattr('linen.profiling._named_call.derive_profiling_name', default_profiling_name)
    monkeypatch.setattr(_state, '_invalidate', lambda everywhere=False: None)


class Encoder:
    def __init__(self, name=None, in_setup=False):
        self.name = name
        self._state = types.SimpleNamespace(in_setup=in_setup)

    @named_call
    def encode(self, x):
        return jnp.tanh(x)

    def follow(self, x):
        return jnp.sin(x)

    follow = named_call(follow, force=False)


X = jnp.ones(3)


def test_labels_with_instance_or_class_name(op_names):
    assert 'jit(<lambda>)/enc.encode/tanh' in op_names(lambda x: Encoder('enc').encode(x), X)
    assert 'jit(<lambda>)/Encoder.encode/tanh' in op_names(lambda x: Encoder().encode(x), X)


def test_force_labels_even_when_disabled(op_names):
    with override_named_call(False):
        names = op_names(lambda x: Encoder().encode(x), X)
    assert 'jit(<lambda>)/Encoder.encode/tanh' in names


def test_force_false_follows_the_state(op_names):
    with override_named_call(False):
        off = op_names(lambda x: Encoder().follow(x), X)
    with override_named_call(True):
        on = op_names(lambda x: Encoder().follow(x), X)
    assert 'jit(<lambda>)/sin' in off
    assert 'jit(<lambda>)/Encoder.follow/sin' in on


def test_skipped_during_setup(op_names):
    names = op_names(lambda x: Encoder(in_setup=True).encode(x), X)
    assert 'jit(<lambda>)/tanh' in names


def test_adds_no_instructions(op_names):
    from linen.profiling import strip_metadata

    def body(text):
        return strip_metadata(text).split('\n', 1)[1]

    labelled = jax.jit(lambda x: Encoder().encode(x)).lower(X).compile().as_text()
    plain = jax.jit(lambda x: jnp.tanh(x)).lower(X).compile().as_text()
    assert 'Encoder.encode' in labelled
    assert body(labelled) == body(plain)


def test_marks_the_method_so_the_dispatcher_does_not_label_twice(op_names):
    from linen.profiling._labels import LABELLED_ATTRIBUTE

    assert getattr(Encoder.encode, LABELLED_ATTRIBUTE) is True
    assert Encoder.encode.__name__ == 'encode'
