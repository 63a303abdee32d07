"""The public surface: ``linen.transforms.__all__`` and what the plugin puts into ``linen.nn``."""

from __future__ import annotations

import importlib

import pytest

import linen.nn as nn
import linen.transforms as transforms
from linen.core import errors
from linen.core.errors import LinenError
from linen.transforms import errors as transform_errors

# The lift-level names Flax keeps out of flax.linen (flax.core.lift, flax.linen.transforms).
LIFT_LEVEL = ('In', 'Out', 'lift_transform')
# linen's own, not Flax's: reached as linen.transforms.<name> only.
LINEN_ONLY = ('linen_reuse_traces',)
# The lifted transforms: every public name but the version, the ``lift`` module and those.
FLAX_LINEN_TRANSFORMS = [
    n for n in transforms.__all__ if n not in ('__version__', 'lift', *LIFT_LEVEL, *LINEN_ONLY)
]


@pytest.mark.parametrize('module_name', ['linen.transforms', 'linen.transforms.lift'])
def test_every_name_in_all_resolves_and_star_imports(module_name):
    module = importlib.import_module(module_name)
    assert len(module.__all__) == len(set(module.__all__))
    for name in module.__all__:
        assert getattr(module, name) is not None, name
    namespace: dict = {}
    exec(f'from {module_name} import *', namespace)
    assert set(module.__all__) <= set(namespace)


@pytest.mark.parametrize('name', FLAX_LINEN_TRANSFORMS)
def test_the_facade_exposes_each_transform(name):
    assert getattr(nn, name) is getattr(transforms, name)
    assert name in dir(nn)


@pytest.mark.parametrize('name', LIFT_LEVEL)
def test_lift_level_names_stay_out_of_the_facade(name):
    assert getattr(transforms, name) is not None
    assert name not in dir(nn)


def test_facade_module_aliases():
    assert nn.transforms is transforms
    assert nn.lift is transforms.lift


def test_errors_are_linen_errors_with_public_module_paths():
    for cls in (
        transform_errors.TransformAxisSizeError,
        transform_errors.ScanLengthError,
        transform_errors.TransformArgumentError,
        transform_errors.InAxesListError,
        transform_errors.VmapVariableAxisError,
    ):
        assert issubclass(cls, LinenError) and issubclass(cls, ValueError)
        assert cls.__module__ == 'linen.transforms.errors'
    assert issubclass(errors.TransformTargetError, TypeError)


def test_transform_argument_error_message():
    with pytest.raises(transform_errors.TransformArgumentError, match='concrete=True'):
        nn.checkpoint(nn.Module, concrete=True)


@pytest.mark.parametrize('transform', [nn.vmap, nn.scan, nn.jit, nn.remat, nn.map_variables])
def test_non_module_targets_are_rejected(transform):
    with pytest.raises(errors.TransformTargetError, match='for plain functions use the JAX'):
        transform(int) if transform is not nn.jit else transform(dict)


@pytest.mark.parametrize(
    'transform', [nn.vmap, nn.scan, nn.jit, nn.remat, nn.map_variables, nn.fold_rngs]
)
def test_module_instances_are_rejected_as_targets(transform):
    class Layer(nn.Module):
        def __call__(self, x):
            return x

    with pytest.raises(errors.TransformTargetError, match='not a Module class or callable'):
        transform(Layer())
