"""The public submodules (``linen.layers.linear``, ...) that ``nn.linear`` & co. resolve to."""

from __future__ import annotations

import importlib

import pytest

import linen.layers as ll
from linen.layers._conv import canonicalize_padding
from linen.layers._exports import NAMES
from linen.layers.errors import LayerPaddingError

SUBMODULES = [n for n in NAMES if ':' not in NAMES.targets[n]]
NAMESPACES = [s for s in SUBMODULES if s not in ('initializers', 'activation', 'dtypes')]


@pytest.mark.parametrize('namespace', NAMESPACES)
def test_namespace_reexports_the_layers(namespace):
    module = importlib.import_module(f'linen.layers.{namespace}')
    assert getattr(ll, namespace) is module
    assert module.__all__ == sorted(module.__all__)
    for name in module.__all__:
        value = getattr(module, name)
        # A name also offered at the top of linen.layers is the very same object.
        if name in NAMES:
            assert getattr(ll, name) is value, name


def test_every_layer_is_in_some_namespace():
    in_namespaces = set()
    for namespace in NAMESPACES:
        in_namespaces.update(importlib.import_module(f'linen.layers.{namespace}').__all__)
    layers = {n for n in NAMES if n[0].isupper() and n not in ('PReLU',)}
    assert layers - in_namespaces == set()


@pytest.mark.parametrize(
    'padding,expected',
    [
        ('VALID', 'VALID'),
        (1, [(1, 1), (1, 1)]),
        ([2], [(2, 2), (2, 2)]),
        ([(0, 1), 3], [(0, 1), (3, 3)]),
    ],
)
def test_canonicalize_padding(padding, expected):
    assert canonicalize_padding(padding, 2) == expected


@pytest.mark.parametrize(
    'padding,match',
    [('WRAP', 'unknown padding string'), ([1, 2, 3], '3 entries'), ([(1, 2, 3)], 'not an int')],
)
def test_canonicalize_padding_errors(padding, match):
    with pytest.raises(LayerPaddingError, match=f'canonicalize_padding: invalid padding.*{match}'):
        canonicalize_padding(padding, 2)
