"""linen.profiling: module labels in profiles, and per-module cost and time reports.

See the package README for how the parts fit. Names resolve on first access, so
the plugin bus can import ``linen.profiling._plugin`` at start-up without
loading the report machinery.
"""

from __future__ import annotations

import importlib as _importlib
from typing import TYPE_CHECKING

from linen.profiling.__about__ import __version__ as __version__

_LOCATION = {
    'CostRow': 'linen.profiling._costs',
    'ModuleCosts': 'linen.profiling._costs',
    'module_costs': 'linen.profiling._costs',
    'MemoryRow': 'linen.profiling._memory',
    'SavedActivations': 'linen.profiling._activations',
    'SavedValue': 'linen.profiling._activations',
    'saved_activations': 'linen.profiling._activations',
    'ModuleMemory': 'linen.profiling._memory',
    'module_memory': 'linen.profiling._memory',
    'phase_of_op_name': 'linen.profiling._costs',
    'module_path_from_op_name': 'linen.profiling._hlo',
    'strip_metadata': 'linen.profiling._hlo',
    'named_call': 'linen.profiling._named_call',
    'label_scope': 'linen.profiling._labels',
    'default_profiling_name': 'linen.profiling._naming',
    'disable_named_call': 'linen.profiling._state',
    'enable_named_call': 'linen.profiling._state',
    'is_named_call_enabled': 'linen.profiling._state',
    'override_named_call': 'linen.profiling._state',
    'tabulate': 'linen.profiling._tabulate',
    'perfetto_trace': 'linen.profiling._perfetto',
    'flame_boxes': 'linen.profiling._flame',
    'flame_graph': 'linen.profiling._flame',
    'Report': 'linen.profiling._joined',
    'ReportDiff': 'linen.profiling._joined',
    'DEVICE_PEAKS': 'linen.profiling._roofline',
    'Roofline': 'linen.profiling._roofline',
    'RooflineRow': 'linen.profiling._roofline',
    'roofline': 'linen.profiling._roofline',
    'TraceTimeRow': 'linen.profiling._trace_time',
    'TraceTimes': 'linen.profiling._trace_time',
    'trace_times': 'linen.profiling._trace_time',
    'ModuleTimes': 'linen.profiling._trace',
    'TimeRow': 'linen.profiling._trace',
    'profile': 'linen.profiling._trace',
}


if TYPE_CHECKING:  # what the lazy names below resolve to, for type checkers and IDEs
    from linen.profiling._activations import SavedActivations as SavedActivations
    from linen.profiling._activations import SavedValue as SavedValue
    from linen.profiling._activations import saved_activations as saved_activations
    from linen.profiling._costs import CostRow as CostRow
    from linen.profiling._costs import ModuleCosts as ModuleCosts
    from linen.profiling._costs import module_costs as module_costs
    from linen.profiling._costs import phase_of_op_name as phase_of_op_name
    from linen.profiling._flame import flame_boxes as flame_boxes
    from linen.profiling._flame import flame_graph as flame_graph
    from linen.profiling._hlo import module_path_from_op_name as module_path_from_op_name
    from linen.profiling._hlo import strip_metadata as strip_metadata
    from linen.profiling._joined import Report as Report
    from linen.profiling._joined import ReportDiff as ReportDiff
    from linen.profiling._labels import label_scope as label_scope
    from linen.profiling._memory import MemoryRow as MemoryRow
    from linen.profiling._memory import ModuleMemory as ModuleMemory
    from linen.profiling._memory import module_memory as module_memory
    from linen.profiling._named_call import named_call as named_call
    from linen.profiling._naming import default_profiling_name as default_profiling_name
    from linen.profiling._perfetto import perfetto_trace as perfetto_trace
    from linen.profiling._roofline import DEVICE_PEAKS as DEVICE_PEAKS
    from linen.profiling._roofline import Roofline as Roofline
    from linen.profiling._roofline import RooflineRow as RooflineRow
    from linen.profiling._roofline import roofline as roofline
    from linen.profiling._state import disable_named_call as disable_named_call
    from linen.profiling._state import enable_named_call as enable_named_call
    from linen.profiling._state import is_named_call_enabled as is_named_call_enabled
    from linen.profiling._state import override_named_call as override_named_call
    from linen.profiling._tabulate import tabulate as tabulate
    from linen.profiling._trace import ModuleTimes as ModuleTimes
    from linen.profiling._trace import TimeRow as TimeRow
    from linen.profiling._trace import profile as profile
    from linen.profiling._trace_time import TraceTimeRow as TraceTimeRow
    from linen.profiling._trace_time import TraceTimes as TraceTimes
    from linen.profiling._trace_time import trace_times as trace_times

__all__ = ['__version__', *sorted(_LOCATION)]


def __getattr__(name: str):
    module = _LOCATION.get(name)
    if module is None:
        raise AttributeError(f"module 'linen.profiling' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
