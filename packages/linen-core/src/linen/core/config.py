"""Configuration flags, read from the environment and changeable at run time.

>>> from linen.core import config
>>> config.update('linen_profile', False)
>>> config.linen_profile
False

Unlike Flax, whose flags are read once at import, :func:`update` takes effect at
once: every listener registered with :func:`on_change` is told, so caches that
depend on a flag (the dispatcher's wrapper chain, ``nn.jit``'s trace cache) drop
themselves. Flax's names (``flax_profile``) are accepted as aliases.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
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
    )
}


class Config:
    """The flag values; read as attributes, change with :meth:`update`."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}
        self._listeners: list[Callable[[str, Any], None]] = []
        self._lock = threading.Lock()
        for flag in _FLAGS.values():
            raw = os.environ.get(flag.env)
            self._values[flag.name] = flag.default if raw is None else _parse_bool(flag.env, raw)

    @staticmethod
    def _canonical(name: str) -> str:
        if name.startswith('flax_'):
            name = 'linen_' + name[len('flax_') :]
        if name not in _FLAGS:
            raise ConfigError(f'Unknown linen config flag {name!r}; known flags: {sorted(_FLAGS)}.')
        return name

    def __getattr__(self, name: str) -> Any:
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
        with self._lock:
            self._values[name] = value
            listeners = list(self._listeners)
        for listener in listeners:
            listener(name, value)

    def on_change(self, listener: Callable[[str, Any], None]) -> None:
        """Call ``listener(name, value)`` after every :meth:`update`."""
        with self._lock:
            self._listeners.append(listener)

    def flags(self) -> dict[str, Flag]:
        return dict(_FLAGS)

    def __repr__(self) -> str:
        return f'Config({self._values})'


config = Config()
