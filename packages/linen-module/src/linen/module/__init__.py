"""linen.module: the dataclass ``Module``, ``setup``/``@compact``, ``init``/``apply``.

``_module.py`` holds the Module class (construction, adoption of submodules,
variables, ``init``/``apply``); ``_dispatch.py`` the method dispatcher and the
cached chain of method wrappers contributed through the ``linen_method_wrapper``
hook (``hookspecs.py``, which also defines :class:`MethodWrapper`);
``_intercept.py`` and ``_capture.py`` are two such wrappers, registered as
plugins like any other; ``_profiling_name.py`` calls the profiling-name hook.
"""

from __future__ import annotations

from linen.core import Variable as Variable
from linen.module.__about__ import __version__ as __version__
from linen.module._dispatch import MethodCallContext as MethodCallContext
from linen.module._dispatch import invalidate_method_wrappers as invalidate_method_wrappers
from linen.module._functional import apply as apply
from linen.module._functional import init as init
from linen.module._functional import init_with_output as init_with_output
from linen.module._functional import merge_param as merge_param
from linen.module._functional import share_scope as share_scope
from linen.module._intercept import intercept_methods as intercept_methods
from linen.module._module import Module as Module
from linen.module._module import compact as compact
from linen.module._module import compact_name_scope as compact_name_scope
from linen.module._module import nowrap as nowrap
from linen.module._profiling_name import derive_profiling_name as derive_profiling_name
from linen.module._state import module_stack as module_stack
from linen.module.hookspecs import MethodWrapper as MethodWrapper

__all__ = [
    '__version__',
    'MethodCallContext',
    'MethodWrapper',
    'Module',
    'Variable',
    'apply',
    'compact',
    'compact_name_scope',
    'derive_profiling_name',
    'init',
    'init_with_output',
    'intercept_methods',
    'invalidate_method_wrappers',
    'merge_param',
    'module_stack',
    'nowrap',
    'share_scope',
]
