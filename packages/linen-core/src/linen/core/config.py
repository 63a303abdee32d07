"""Configuration flags, read from the environment and changeable at run time.

>>> from linen.core import config
>>> config.update('linen_profile', False)
>>> config.linen_profile
False

Unlike Flax, whose flags are read once at import, :func:`update` takes effect at
once: every listener registered with :func:`on_change` is told, so caches that
depend on a flag (the dispatcher's wrapper chain, ``nn.jit``'s trace cache) drop
themselves. Flax's names (``flax_profile``) are accepted as aliases, and each flag
is read from ``LINEN_<NAME>`` or else Flax's ``FLAX_<NAME>`` environment variable.

>>> with config.temp_flip_flag('return_frozendict', True):
...     config.flax_return_frozendict
True
>>> config.linen_return_frozendict
False
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from linen.core.errors import ConfigError

__all__ = ['config', 'Config', 'Flag']


def _parse_bool(name: str, raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in ('1', 'true', 'yes', 'on', 't', 'y'):
        return True
    if lowered in ('0', 'false', 'no', 'off', 'f', 'n', ''):
        return False
    raise ConfigError(
        f'Environment variable {name}={raw!r} is not a boolean; use 1/0, true/false, on/off.'
    )


def _parse_int(name: str, raw: str) -> int | None:
    if raw.strip().lower() in ('', 'none'):
        return None
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f'Environment variable {name}={raw!r} is not an integer.') from None


@dataclass(frozen=True)
class Flag:
    name: str
    env: str
    default: Any
    help: str


_FLAGS = {
    flag.name: flag
    for flag in (
        Flag(
            'linen_profile',
            'LINEN_PROFILE',
            True,
            'Run Module methods under jax.named_scope so profiles show module labels.',
        ),
        Flag(
            'linen_shape_check',
            'LINEN_SHAPE_CHECK',
            True,
            'Check on apply that stored parameters have the shape their initializer gives.',
        ),
        Flag(
            'linen_strict_logical_rules',
            'LINEN_STRICT_LOGICAL_RULES',
            False,
            'Raise (instead of warning once) on logical axis rules that cannot be right.',
        ),
        Flag(
            'linen_strict_restore',
            'LINEN_STRICT_RESTORE',
            False,
            'Make from_state_dict/from_bytes raise InvalidCheckpointError when a stored array '
            "does not have the target's shape, or the target's array is stored as a dict or "
            'other non-array (as Flax, by default the stored value is returned unchecked).',
        ),
        Flag(
            'linen_strict_lazy_init',
            'LINEN_STRICT_LAZY_INIT',
            False,
            'Make lazy_init raise LazyInitError when a variable depends on the value of an '
            'input given as a jax.ShapeDtypeStruct (as Flax 0.12.8; by default, as Flax '
            '0.12.9 and later, it is computed as if that input were zeros).',
        ),
        Flag(
            'linen_preserve_adopted_names',
            'LINEN_PRESERVE_ADOPTED_NAMES',
            False,
            'When adopting Modules made outside a parent, keep a name they were given instead '
            "of naming them after the attribute (a class attribute 'preserve_adopted_names' "
            'overrides it per Module class).',
        ),
        Flag(
            'linen_return_frozendict',
            'LINEN_RETURN_FROZENDICT',
            False,
            'Return FrozenDicts (not dicts) from init/apply and Scope.variables().',
        ),
        Flag(
            'linen_fix_rng_separator',
            'LINEN_FIX_RNG_SEPARATOR',
            False,
            'Hash a NUL byte before each path item when deriving PRNG keys (changes every key; '
            "Flax's fix for ('ab', 'c') and ('a', 'bc') colliding).",
        ),
        Flag(
            'linen_filter_frames',
            'LINEN_FILTER_FRAMES',
            True,
            "Take linen's frames out of the traceback of an error that leaves init, apply "
            'or lazy_init (Flax hides its own); JAX_TRACEBACK_FILTERING=off keeps them too.',
        ),
        Flag(
            'linen_strict_scan_collections',
            'LINEN_STRICT_SCAN_COLLECTIONS',
            False,
            'Inside nn.scan, keep collections no scan rule names mutable and raise '
            'ScanCollectionError when the body writes one (as Flax, by default they are '
            'read-only there: sow returns False and the write is dropped).',
        ),
        Flag(
            'linen_reuse_traces',
            'LINEN_REUSE_TRACES',
            False,
            'Trace a repeated submodule call (same class, attributes, shapes) once per trace '
            'and reuse its program; its Python side effects then run once per distinct program.',
        ),
        Flag(
            'linen_max_repr_depth',
            'LINEN_MAX_REPR_DEPTH',
            None,
            'Maximum nesting depth of Module reprs (None: no limit); deeper Modules print as '
            '"Name(...)".',
        ),
    )
}

_INT_FLAGS = frozenset({'linen_max_repr_depth'})


class Config:
    """The flag values; read as attributes, change with :meth:`update`."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}
        self._listeners: list[Callable[[str, Any], None]] = []
        self._lock = threading.Lock()
        for flag in _FLAGS.values():
            env = flag.env
            raw = os.environ.get(env)
            if raw is None:
                env = 'FLAX_' + flag.env[len('LINEN_') :]
                raw = os.environ.get(env)
            if raw is None:
                self._values[flag.name] = flag.default
            elif flag.name in _INT_FLAGS:
                self._values[flag.name] = _parse_int(env, raw)
            else:
                self._values[flag.name] = _parse_bool(env, raw)

    @staticmethod
    def _canonical(name: str) -> str:
        if name.startswith('flax_'):
            name = 'linen_' + name[len('flax_') :]
        if name not in _FLAGS:
            raise ConfigError(f'Unknown linen config flag {name!r}; known flags: {sorted(_FLAGS)}.')
        return name

    def __getattr__(self, name: str) -> Any:
        try:  # a canonical name: one lookup (every init and apply reads a flag)
            return self.__dict__['_values'][name]
        except KeyError:
            pass
        if name.startswith('_'):
            raise AttributeError(name)
        try:
            return self._values[self._canonical(name)]
        except ConfigError as exc:
            raise AttributeError(str(exc)) from None

    def update(self, name: str, value: Any) -> None:
        """Set flag ``name`` to ``value``; takes effect immediately."""
        name = self._canonical(name)
        default = _FLAGS[name].default
        if isinstance(default, bool) and not isinstance(value, bool):
            raise ConfigError(f'Flag {name} takes a bool, got {value!r}.')
        if name in _INT_FLAGS and not (
            value is None or (isinstance(value, int) and not isinstance(value, bool))
        ):
            raise ConfigError(f'Flag {name} takes an int or None, got {value!r}.')
        with self._lock:
            self._values[name] = value
            listeners = list(self._listeners)
        for listener in listeners:
            listener(name, value)

    @contextlib.contextmanager
    def temp_flip_flag(self, var_name: str, var_value: Any) -> Iterator[None]:
        """Set a flag inside a ``with`` block, restoring it on exit (as Flax's).

        ``var_name`` is the flag's name without its prefix (``'return_frozendict'``),
        as Flax spells it; a full ``flax_``/``linen_`` name works too.
        """
        name = var_name if var_name.startswith(('flax_', 'linen_')) else 'linen_' + var_name
        old = getattr(self, name)
        self.update(name, var_value)
        try:
            yield
        finally:
            self.update(name, old)

    def on_change(self, listener: Callable[[str, Any], None]) -> None:
        """Call ``listener(name, value)`` after every :meth:`update`."""
        with self._lock:
            self._listeners.append(listener)

    def flags(self) -> dict[str, Flag]:
        return dict(_FLAGS)

    def __repr__(self) -> str:
        return f'Config({self._values})'


config = Config()
