"""The linen-profiling plugin: what this distribution adds to the ``linen`` bus.

Imported at start-up by the plugin manager, so it stays light: no JAX import
here (the wrapper is imported when the dispatcher first asks for it). The
default profiling-name rule's hook implementation lives with the rule
(``_naming.py``) and is registered through this module.
"""

from __future__ import annotations

from linen.core.hookspecs import hookimpl
from linen.profiling._naming import linen_profiling_name as linen_profiling_name
from linen.profiling._state import is_named_call_enabled


@hookimpl
def linen_exports():
    from linen.profiling._exports import FACADE, NAMES

    return NAMES.exports(FACADE, summary='linen.profiling.summary')


@hookimpl
def linen_method_wrapper():
    """The labelling wrapper while labels are on in this context; ``None`` when off.

    The default rule's labels are cached; while a user's ``linen_profiling_name``
    rule is installed the hook is asked for every call (the chain is rebuilt
    whenever plugins change). While ``tabulate`` records in this context, the
    recording wrapper runs too.
    """
    from linen.module.hookspecs import MethodWrapper
    from linen.profiling import _recording

    recording = _recording.is_recording()
    if not is_named_call_enabled():
        return MethodWrapper(_recording.record) if recording else None
    from linen.profiling import _labels
    from linen.profiling._naming import only_default_rule

    if recording:
        label = (
            _labels.label_method_call if only_default_rule() else _labels.label_method_call_hooked
        )
        return MethodWrapper(_recording.record_then(label))
    if only_default_rule():
        return MethodWrapper(_labels.label_method_call, at_boundary=_labels.label_at_boundary)
    return MethodWrapper(_labels.label_method_call_hooked)
