"""The whole suite runs under Flax's own CI conditions, set here once.

Flax tests ``flax.linen`` and ``flax.core`` with strict rank promotion, four
simulated host devices and warnings as errors; linen promises to be a drop-in
there, so every test here runs the same way. The environment must be set before
the first ``import jax`` of the process, which is why this is the root conftest
(pytest imports it before any test module) and why subprocesses started by the
tests inherit it through ``os.environ``.
"""

from __future__ import annotations

import os

os.environ['JAX_NUMPY_RANK_PROMOTION'] = 'raise'
os.environ['JAX_PLATFORMS'] = os.environ.get('JAX_PLATFORMS') or 'cpu'
_xla_flags = os.environ.get('XLA_FLAGS', '')
if '--xla_force_host_platform_device_count' not in _xla_flags:
    os.environ['XLA_FLAGS'] = (_xla_flags + ' --xla_force_host_platform_device_count=4').strip()
