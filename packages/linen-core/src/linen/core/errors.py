"""Typed errors of linen.

Every error derives from :class:`LinenError`. Class names follow Flax's
(``<Verb><Object><Type>Error``) so that ``except`` clauses written for
``flax.errors`` carry over; ``FlaxError`` is an alias of the base class.

Each message says what went wrong, where (module path, collection, variable) and
how to fix it. Each class docstring shows code that raises it.
"""

from __future__ import annotations

from linen.core._errors_base import (
    FlaxError,
    LinenError,
    _restore_error,
)
from linen.core._errors_module import (
    ApplyModuleInvalidMethodError,
    ApplyModuleMethodNotCallableError,
    ApplyModuleMissingCallError,
    AssignSubModuleError,
    CallCompactUnboundModuleError,
    CallSetupUnboundModuleError,
    CallShareScopeOnUnboundModuleError,
    CallUnbindOnUnboundModuleError,
    DescriptorAttributeError,
    DuplicateScopeNameError,
    HashBoundModuleError,
    IncorrectPostInitOverrideError,
    InitializeVariableOutsideSetupError,
    InvalidInstanceModuleError,
    MergeParamError,
    ModuleParentTypeError,
    MultipleMethodsCompactError,
    NameInUseError,
    PerturbationNotFoundError,
    ReservedModuleAttributeError,
    SetAttributeFrozenModuleError,
    SetAttributeInModuleSetupError,
    UnboundModuleError,
    UnhashableModuleError,
)
from linen.core._errors_partitioning import (
    LogicalAxisRulesError,
    PartitioningUnspecifiedError,
)
from linen.core._errors_plugins import (
    ConfigError,
    PluginError,
    PluginExportConflictError,
    PluginExportsTypeError,
    PluginHookError,
    PluginHookNameWarning,
    PluginLoadError,
    PluginWarning,
)
from linen.core._errors_scope import (
    ApplyScopeInvalidVariablesStructureError,
    ApplyScopeInvalidVariablesTypeError,
    InvalidFilterError,
    InvalidRngError,
    InvalidScopeError,
    LazyInitError,
    ModifyScopeVariableError,
    ScopeCollectionNotFound,
    ScopeParamNotFoundError,
    ScopeParamShapeError,
    ScopeVariableNotFoundError,
)
from linen.core._errors_serialization import (
    InvalidCheckpointError,
    TrainStateOptimizerError,
    TraversalSetValuesCountError,
    TraverseInputTypeError,
)
from linen.core._errors_transforms import (
    TransformedMethodReturnValueError,
    TransformTargetError,
)

__all__ = [
    'LinenError',
    'FlaxError',
    'ApplyScopeInvalidVariablesTypeError',
    'ApplyScopeInvalidVariablesStructureError',
    'ScopeParamNotFoundError',
    'ScopeCollectionNotFound',
    'ScopeParamShapeError',
    'ScopeVariableNotFoundError',
    'ModifyScopeVariableError',
    'InvalidFilterError',
    'InvalidScopeError',
    'LazyInitError',
    'InvalidRngError',
    'NameInUseError',
    'DuplicateScopeNameError',
    'AssignSubModuleError',
    'SetAttributeInModuleSetupError',
    'SetAttributeFrozenModuleError',
    'MultipleMethodsCompactError',
    'ReservedModuleAttributeError',
    'ApplyModuleInvalidMethodError',
    'ApplyModuleMissingCallError',
    'ApplyModuleMethodNotCallableError',
    'InitializeVariableOutsideSetupError',
    'HashBoundModuleError',
    'PerturbationNotFoundError',
    'CallCompactUnboundModuleError',
    'CallSetupUnboundModuleError',
    'CallUnbindOnUnboundModuleError',
    'CallShareScopeOnUnboundModuleError',
    'InvalidInstanceModuleError',
    'IncorrectPostInitOverrideError',
    'DescriptorAttributeError',
    'MergeParamError',
    'ModuleParentTypeError',
    'UnboundModuleError',
    'UnhashableModuleError',
    'TransformTargetError',
    'TransformedMethodReturnValueError',
    'InvalidCheckpointError',
    'TraverseInputTypeError',
    'TraversalSetValuesCountError',
    'TrainStateOptimizerError',
    'PartitioningUnspecifiedError',
    'LogicalAxisRulesError',
    'PluginError',
    'PluginLoadError',
    'PluginHookError',
    'PluginExportConflictError',
    'PluginExportsTypeError',
    'PluginHookNameWarning',
    'PluginWarning',
    'ConfigError',
]


# The public path of every error is linen.core.errors (Haiku's habit): tracebacks
# then name the module users import from. The classes are defined in the private
# modules above, split by area; setting ``__module__`` here keeps pickles (which
# restore a class from ``cls.__module__`` + ``cls.__qualname__``), autodoc and
# doctests seeing each class as this module's, as before the split. Pickled errors
# also name the function that rebuilds them (``LinenError.__reduce__``), so it too
# is found here, where pickles made before the split look for it.
for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type):
        _obj.__module__ = __name__
_restore_error.__module__ = __name__
del _name, _obj
