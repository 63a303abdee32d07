"""The plugin bus as sibling distributions use it (a public contract of linen-core).

linen-module calls its hooks through :func:`call_hook` and drops cached wrapper
chains through :func:`on_plugins_changed`; linen-profiling registers a plugin for
the duration of ``tabulate``. This module is the contract between linen-core and
those siblings (and third-party packages that do the same): the implementation
in ``_bus.py`` may change in any release, the names in ``__all__`` keep their
signature and meaning for a whole minor series of linen-core (``0.1.x``), and
changing one needs a new minor version and a CHANGELOG entry.

>>> from linen.core import plugin_bus
>>> class Quiet:  # a plugin that implements no hook
...     pass
>>> seen = []
>>> stop_listening = plugin_bus.on_plugins_changed(lambda: seen.append('changed'))
>>> name = plugin_bus.register(Quiet(), name='quiet-example')
>>> plugin_bus.unregister(name)
>>> stop_listening()
>>> seen
['changed', 'changed']
"""

from __future__ import annotations

from linen.core._bus import ENTRY_POINT_GROUP as ENTRY_POINT_GROUP
from linen.core._bus import call_hook as call_hook
from linen.core._bus import get_plugin_manager as get_plugin_manager
from linen.core._bus import on_plugins_changed as on_plugins_changed
from linen.core._bus import register as register
from linen.core._bus import unregister as unregister

__all__ = [
    'ENTRY_POINT_GROUP',
    'call_hook',
    'get_plugin_manager',
    'on_plugins_changed',
    'register',
    'unregister',
]
