import functools

import pytest

from linen.profiling._naming import default_profiling_name, method_function_name


class Encoder:
    def __init__(self, name=None):
        self.name = name

    def __call__(self, x):
        return x

    def encode(self, x, scale=1):
        return x * scale


@pytest.mark.parametrize(
    ('module', 'method_name', 'method', 'expected'),
    [
        (Encoder(), '__call__', Encoder.__call__, 'Encoder'),
        (Encoder('proj'), '__call__', Encoder.__call__, 'proj'),
        (Encoder(), 'encode', Encoder.encode, 'Encoder.encode'),
        (Encoder('enc'), 'encode', Encoder.encode, 'enc.encode'),
        (Encoder(), 'encode', functools.partial(Encoder.encode, scale=2), 'Encoder.encode'),
        (
            Encoder('e'),
            'x',
            functools.partial(functools.partial(Encoder.encode), scale=3),
            'e.encode',
        ),
        (Encoder(), 'encode', Encoder().encode, 'Encoder.encode'),
        (Encoder(''), '__call__', None, 'Encoder'),
        (Encoder(), 'decode', None, 'Encoder.decode'),
    ],
)
def test_default_profiling_name(module, method_name, method, expected):
    assert default_profiling_name(module, method_name, method) == expected


def test_method_function_name_falls_back_to_given_name():
    assert method_function_name(object(), 'apply_fn') == 'apply_fn'
