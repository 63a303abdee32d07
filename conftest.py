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
    _xla_flags += ' --xla_force_host_platform_device_count=4'
# Compile speed, not semantics: the suite's CPU time is mostly XLA compiling small
# programs (every eager op of an init is one), and LLVM's optimization level is what
# that costs. At level 0 the same HLO is compiled (op names, fusion and the cost and
# memory analyses are the HLO passes', which still run) with far less LLVM work:
# -65 % CPU for a jitted attention init, -35 % for its eager one, about -30 % for the
# suite. It is what lets the whole suite run at both JAX ends within CI's budget.
# Programs compare with their oracles (Flax, NumPy) under the same setting. Outside
# the suite (`nox -s demo`, `nox -s bench`) XLA's default level is used.
if '--xla_backend_optimization_level' not in _xla_flags:
    _xla_flags += ' --xla_backend_optimization_level=0'
os.environ['XLA_FLAGS'] = _xla_flags.strip()
