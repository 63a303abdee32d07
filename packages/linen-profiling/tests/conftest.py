"""Shared helpers for linen-profiling's tests."""

from __future__ import annotations

import re

import pytest

from linen.core.config import config


def _compiled_op_names(fn, *args) -> set[str]:
    import jax

    text = jax.jit(fn).lower(*args).compile().as_text()
    return set(re.findall(r'op_name="([^"]*)"', text))


@pytest.fixture
def op_names():
    """``op_names(fn, *args)``: every ``op_name`` in the optimized HLO of ``jax.jit(fn)``."""
    return _compiled_op_names


@pytest.fixture
def restore_profile_flag():
    before = config.linen_profile
    yield
    config.update('linen_profile', before)
