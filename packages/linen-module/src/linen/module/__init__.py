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

# Besides `__all__`: names flax.linen.module also has (its typing aliases, the core
# classes it imports, the sentinel type of a `parent` not given), kept for Flax code
# that imports them from this module (scico: `from flax.linen.module import _Sentinel`).
from linen.core import FrozenDict as FrozenDict  # noqa: E402
from linen.core.scope import CollectionFilter as CollectionFilter  # noqa: E402
from linen.core.scope import DenyList as DenyList  # noqa: E402
from linen.core.scope import Scope as Scope  # noqa: E402
from linen.core.scope import union_filters as union_filters  # noqa: E402
from linen.module import _module  # noqa: E402
from linen.module._intercept import InterceptorContext as InterceptorContext  # noqa: E402
from linen.module._typing import Args as Args  # noqa: E402
from linen.module._typing import FrozenVariableDict as FrozenVariableDict  # noqa: E402
from linen.module._typing import Interceptor as Interceptor  # noqa: E402
from linen.module._typing import Kwargs as Kwargs  # noqa: E402
from linen.module._typing import MutableVariableDict as MutableVariableDict  # noqa: E402
from linen.module._typing import PRNGKey as PRNGKey  # noqa: E402
from linen.module._typing import PRNGSequenceFilter as PRNGSequenceFilter  # noqa: E402
from linen.module._typing import RNGSequences as RNGSequences  # noqa: E402
from linen.module._typing import VariableDict as VariableDict  # noqa: E402

_Sentinel = _module._Unspecified
_unspecified_parent = _module._UNSPECIFIED
_get_unspecified_parent = _module._get_unspecified
