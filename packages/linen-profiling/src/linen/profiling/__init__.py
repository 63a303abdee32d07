"""linen.profiling: module labels in profiles, and per-module cost and time reports.

See the package README for how the parts fit.
"""

from linen.profiling.__about__ import __version__ as __version__
from linen.profiling._costs import CostRow as CostRow
from linen.profiling._costs import ModuleCosts as ModuleCosts
from linen.profiling._costs import module_costs as module_costs
from linen.profiling._hlo import module_path_from_op_name as module_path_from_op_name
from linen.profiling._hlo import strip_metadata as strip_metadata
from linen.profiling._named_call import named_call as named_call
from linen.profiling._naming import default_profiling_name as default_profiling_name
from linen.profiling._state import disable_named_call as disable_named_call
from linen.profiling._state import enable_named_call as enable_named_call
from linen.profiling._state import is_named_call_enabled as is_named_call_enabled
from linen.profiling._state import override_named_call as override_named_call
from linen.profiling._tabulate import tabulate as tabulate
from linen.profiling._trace import ModuleTimes as ModuleTimes
from linen.profiling._trace import TimeRow as TimeRow
from linen.profiling._trace import profile as profile

__all__ = [
    '__version__',
    'CostRow',
    'ModuleCosts',
    'ModuleTimes',
    'TimeRow',
    'default_profiling_name',
    'disable_named_call',
    'enable_named_call',
    'is_named_call_enabled',
    'module_costs',
    'module_path_from_op_name',
    'named_call',
    'override_named_call',
    'profile',
    'strip_metadata',
    'tabulate',
]
