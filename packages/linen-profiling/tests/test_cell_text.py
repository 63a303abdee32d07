"""The cell text of ``tabulate``: Flax's YAML-like rendering, checked against hand-written text."""

from __future__ import annotations

import dataclasses
import enum

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from linen.core.meta import Partitioned
from linen.profiling._cell_text import as_lines, cell_lines

pytest.importorskip('rich')


class Key(str, enum.Enum):  # noqa: UP042 (a str-mixin enum, as Flax's tests use)
    x = 'x'


class Number(enum.IntEnum):
    one = 1


@dataclasses.dataclass
class Meta:
    names: tuple
    w: object = None


def test_enum_keys_read_as_their_values():
    assert as_lines({Key.x: jnp.ones((1, 1)), Number.one: 2}) == ['x: float32[1,1]', '1: 2']


def test_a_mapping_in_a_mapping_is_indented_a_list_is_not():
    assert as_lines({'inputs': {'x': jnp.ones(2)}, 'l': [1, 2]}) == [
        'inputs:',
        '  x: float32[2]',
        'l:',
        '- 1',
        '- 2',
    ]


def test_a_dataclass_reads_as_its_fields():
    value = (Meta(('baz', 'qux'), jax.ShapeDtypeStruct((2,), jnp.float32)),)
    assert as_lines(value) == ['- names:', '  - baz', '  - qux', '  w: float32[2]']


@pytest.mark.parametrize(
    ('names', 'text'),
    [
        ((None,), 'float32[3] P(None,)'),
        (('a', None), 'float32[3] P(a, None)'),
        ((), 'float32[3] P()'),
    ],
)
def test_partition_names_read_as_a_tuple(names, text):
    assert as_lines(Partitioned(np.zeros(3, np.float32), names=names)) == [text]


def test_none_reads_none_and_empty_containers_read_nothing():
    assert cell_lines(None) == ['None']
    assert cell_lines(()) == cell_lines({}) == []
    assert cell_lines(np.pi) == ['3.141592653589793']
