"""linen.module: the dataclass ``Module``, ``setup``/``@compact``, ``init``/``apply``.

``_module.py`` holds the Module class (construction, adoption of submodules,
variables, cloning and binding), ``_entry.py`` its entry points (``init``,
``apply``, ``lazy_init``, ``module_paths``); ``_dispatch.py`` the method dispatcher and the
cached chain of method wrappers contributed through the ``linen_method_wrapper``
hook (``hookspecs.py``, which also defines :class:`MethodWrapper`);
``_intercept.py`` and ``_capture.py`` are two such wrappers, registered as
plugins like any other; ``_profiling_name.py`` calls the profiling-name hook.
"""

from __future__ import annotations

from linen.module.__about__ import __version__ as __version__
from linen.module._exports import NAMES as _NAMES

# Every public name is listed once, in ``_exports.py``; type checkers read the
# generated ``__init__.pyi``.
_NAMES.install(globals())
