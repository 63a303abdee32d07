"""Errors and warnings of the plugin bus, and of the configuration flags.

Public as :mod:`linen.core.errors`, which re-exports every class.
"""

from __future__ import annotations

from linen.core._errors_base import LinenError


def _plugin_where(plugin: str, distribution: str) -> str:
    return f'linen plugin "{plugin}" (entry point "{plugin}" of distribution "{distribution}")'


def _skip_hint(plugin: str, distribution: str) -> str:
    return f'skip it with LINEN_DISABLE_PLUGINS={plugin} (or ={distribution})'


class PluginError(LinenError):
    """Base class of plugin failures; the message names the plugin and its distribution.

    The original exception, where there is one, is chained as ``__cause__``.
    """


class PluginLoadError(PluginError, ImportError):
    """A plugin registered in entry-point group ``linen`` failed to import.

    >>> print(PluginLoadError('my-layers', 'my-layers-dist', ImportError('no module named foo')))
    linen plugin "my-layers" ... failed to load: ImportError: no module named foo. ...
    """

    def __init__(self, plugin: str, distribution: str, cause: BaseException):
        self.plugin, self.distribution = plugin, distribution
        super().__init__(
            f'{_plugin_where(plugin, distribution)} failed to load: '
            f'{type(cause).__name__}: {cause}. Reinstall or fix that distribution, or '
            f'{_skip_hint(plugin, distribution)}.'
        )


class PluginHookError(PluginError, RuntimeError):
    """A plugin's hook implementation raised.

    >>> print(PluginHookError('my-layers', 'my-layers-dist', 'linen_exports', KeyError('x')))
    linen plugin "my-layers" ... raised in hook linen_exports: KeyError: 'x'. ...
    """

    def __init__(self, plugin: str, distribution: str, hook: str, cause: BaseException):
        self.plugin, self.distribution, self.hook = plugin, distribution, hook
        super().__init__(
            f'{_plugin_where(plugin, distribution)} raised in hook {hook}: '
            f'{type(cause).__name__}: {cause}. Fix or uninstall that distribution, or '
            f'{_skip_hint(plugin, distribution)}.'
        )


class PluginExportsTypeError(PluginError, TypeError):
    """A plugin's ``linen_exports`` returned something other than a mapping of names.

    >>> problem = 'returned a list'  # e.g. `return [Dense]` instead of {'Dense': Dense}
    >>> print(PluginExportsTypeError('my-layers', 'my-layers-dist', problem))
    linen plugin "my-layers" ...: linen_exports returned a list; it must return a mapping ...
    """

    def __init__(self, plugin: str, distribution: str, problem: str):
        self.plugin, self.distribution = plugin, distribution
        super().__init__(
            f'{_plugin_where(plugin, distribution)}: linen_exports {problem}; it must '
            'return a mapping of str names to objects or "package.module:attr" strings, '
            f'e.g. {{"MyLayer": "my_pkg.layers:MyLayer"}}. Fix that distribution, or '
            f'{_skip_hint(plugin, distribution)}.'
        )


class PluginExportConflictError(PluginError, ValueError, AttributeError):
    """Two or more plugins contribute the same name to ``linen.nn``.

    A first-party distribution keeps its name (the other plugin's is dropped with a
    :class:`PluginWarning`); between third-party plugins the name is withheld and
    reading it raises this error (an ``AttributeError`` too, so ``hasattr`` works).
    ``distributions`` lists every contributor, in the order they were loaded.

    >>> print(PluginExportConflictError('MyLayer', 'pkg-a', 'pkg-b'))
    linen.nn.MyLayer is contributed by two distributions: "pkg-a" and "pkg-b". ...
    """

    def __init__(self, name: str, first: str, second: str, *more: str):
        self.name, self.first, self.second = name, first, second
        self.distributions = (first, second, *more)
        quoted = [f'"{d}"' for d in self.distributions]
        count = 'two' if len(quoted) == 2 else str(len(quoted))
        super().__init__(
            f'linen.nn.{name} is contributed by {count} distributions: '
            f'{", ".join(quoted[:-1])} and {quoted[-1]}. Rename the layer in all but one of '
            'them, or disable the others with LINEN_DISABLE_PLUGINS (entry-point or '
            'distribution names, comma-separated).'
        )


class PluginWarning(UserWarning):
    """A plugin misbehaved; its names are dropped and the rest of ``linen.nn`` works.

    The message names the plugin's entry point and distribution; ``__cause__``
    holds the original exception where there is one.
    """


class PluginHookNameWarning(PluginWarning):
    """A plugin defines a ``linen_*`` function that is no hook (a misspelling?).

    >>> issubclass(PluginHookNameWarning, UserWarning)  # e.g. for `def linen_export():`
    True
    """


# ------------------------------------------------------------------- configuration


class ConfigError(LinenError, KeyError):
    """An unknown configuration flag, or a value of the wrong type."""

    def __init__(self, msg: str):
        super().__init__(msg)

    def __str__(self):
        return self.args[0]
