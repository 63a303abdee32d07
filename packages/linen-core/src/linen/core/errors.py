"""Typed errors of linen.

Every error derives from :class:`LinenError`. Class names follow Flax's
(``<Verb><Object><Type>Error``) so that ``except`` clauses written for
``flax.errors`` carry over; ``FlaxError`` is an alias of the base class.

Each message says what went wrong, where (module path, collection, variable) and
how to fix it. Each class docstring shows code that raises it.
"""

from __future__ import annotations

from typing import Any

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
    'UnboundModuleError',
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


def _restore_error(cls: type[BaseException], args: tuple, state: dict) -> BaseException:
    # Subclasses take their own constructor arguments (a plugin name, a shape, ...),
    # not the message, so unpickling rebuilds the instance without calling __init__.
    err = cls.__new__(cls, *args)
    err.args = args
    vars(err).update(state)
    return err


class LinenError(Exception):
    """Base class of every error linen raises on purpose.

    Every subclass pickles with its message and attributes (multiprocessing and
    pytest-xdist send exceptions between processes), whatever its ``__init__`` takes.
    """

    def __init__(self, message: str):
        super().__init__(message)

    def __reduce__(self):
        return _restore_error, (type(self), self.args, dict(self.__dict__))


FlaxError = LinenError


def _where(path: str | None) -> str:
    return f'"/{path}"' if path else 'the root'


def _flax_path(path: str | None) -> str:
    # Flax's spelling of a scope path in its messages: "/" is the root.
    return f'"/{path or ""}"'


# --------------------------------------------------------------------------- scope


class ApplyScopeInvalidVariablesTypeError(LinenError, TypeError):
    """``apply`` got variables that are not a mapping of collections (mappings).

    >>> from linen.core import apply
    >>> apply(lambda scope: None)(jnp.ones(3))
    Traceback (most recent call last):
    ...
    ApplyScopeInvalidVariablesTypeError: ...
    >>> params = {'w': jnp.ones(3)}
    >>> apply(lambda scope: None)(params)  # should be {'params': params}
    Traceback (most recent call last):
    ...
    ApplyScopeInvalidVariablesTypeError: ...
    """

    def __init__(self, got=None, collection: str | None = None):
        flax_text = (
            'The first argument passed to an apply function should be a dictionary of '
            'collections. Each collection should be a dictionary with string keys. '
        )
        if collection is None:
            kind = type(got).__name__ if got is not None else 'a non-mapping'
            super().__init__(
                f'{flax_text}Got {kind}: pass a mapping of collections, the dictionary '
                'returned by `init` (e.g. {"params": {...}}).'
            )
            return
        keys = list(got.keys())[:5]
        super().__init__(
            f'{flax_text}Got a mapping with keys {keys} whose value at {collection!r} is a '
            f'{type(got[collection]).__name__}, not a collection. '
            "If you passed `variables['params']`, pass `{'params': params}` instead."
        )


class ApplyScopeInvalidVariablesStructureError(LinenError, ValueError):
    """``apply`` got ``{'params': variables}``: the collections wrapped in one more layer.

    >>> from linen.core import apply
    >>> variables = {'params': {'w': jnp.ones(3)}}
    >>> apply(lambda scope: None)({'params': variables})  # should be variables
    Traceback (most recent call last):
    ...
    ApplyScopeInvalidVariablesStructureError: ...
    """

    def __init__(self, variables=None):
        super().__init__(
            'Expect the `variables` (first argument) passed to apply() to be a dict with the '
            'structure {"params": ...}, but got a dict with an extra params layer, i.e.  '
            '{"params": {"params": ... } }. You should instead pass in your dict\'s '
            '["params"]: `apply(variables, ...)`, not `apply({\'params\': variables}, ...)`.'
        )


class ScopeParamNotFoundError(LinenError, KeyError):
    """A parameter is missing on apply: the variables do not hold it.

    >>> from linen.core import apply
    >>> def model(scope):
    ...     return scope.param('w', jax.nn.initializers.ones, (3,))
    >>> apply(model)({'params': {'b': jnp.ones(3)}})
    Traceback (most recent call last):
    ...
    ScopeParamNotFoundError: ...
    """

    def __init__(self, param_name: str, scope_path: str):
        self.param_name, self.scope_path = param_name, scope_path
        super().__init__(
            f'Could not find parameter named "{param_name}" in scope '
            f'{_flax_path(scope_path)}. The variables passed to `apply` do not match the '
            'model: re-create them with `init`, or check the module names and the '
            'checkpoint you loaded.'
        )

    def __str__(self):  # KeyError would repr() the message
        return self.args[0]


class ScopeCollectionNotFound(LinenError, KeyError):
    """A variable is requested from a collection the variables do not have.

    >>> from linen.core import apply
    >>> def model(scope):
    ...     return scope.variable('batch_stats', 'mean', jnp.zeros, (3,)).value
    >>> apply(model)({'params': {}})  # no 'batch_stats' passed
    Traceback (most recent call last):
    ...
    ScopeCollectionNotFound: ...
    """

    def __init__(self, col_name: str, var_name: str, scope_path: str):
        self.col_name, self.var_name, self.scope_path = col_name, var_name, scope_path
        super().__init__(
            f'Tried to access "{var_name}" from collection "{col_name}" in '
            f'{_flax_path(scope_path)} but the collection is empty. Pass the '
            f'"{col_name}" collection returned by `init` to `apply`, or make it mutable '
            f'with `mutable=["{col_name}"]` so it can be created.'
        )

    def __str__(self):
        return self.args[0]


class ScopeParamShapeError(LinenError, ValueError):
    """A stored parameter's shape differs from what its initializer gives.

    >>> from linen.core import apply
    >>> def model(scope):
    ...     return scope.param('w', jax.nn.initializers.ones, (3,))
    >>> apply(model)({'params': {'w': jnp.ones(4)}})
    Traceback (most recent call last):
    ...
    ScopeParamShapeError: ...
    """

    def __init__(self, param_name: str, scope_path: str, value_shape, init_shape):
        self.param_name, self.scope_path = param_name, scope_path
        super().__init__(
            f'For parameter "{param_name}" in {_flax_path(scope_path)}, the given initializer '
            f'is expected to generate shape {tuple(init_shape)}, but the existing parameter '
            f'it received has shape {tuple(value_shape)}. The module attributes or input shapes differ from those the variables were '
            'initialized with: re-initialize, or construct the module as it was at `init`.'
        )


class ScopeVariableNotFoundError(LinenError, KeyError):
    """A variable is read that does not exist and cannot be created here."""

    def __init__(self, name: str, col: str, scope_path: str):
        self.name, self.col, self.scope_path = name, col, scope_path
        super().__init__(
            f'No Variable named "{name}" for collection "{col}" exists in '
            f'{_flax_path(scope_path)}. Pass it to `apply`, or make "{col}" mutable so it can be initialized.'
        )

    def __str__(self):
        return self.args[0]


class ModifyScopeVariableError(LinenError):
    """A variable of an immutable collection is written.

    >>> from linen.core import apply
    >>> def count(scope):
    ...     counter = scope.variable('counter', 'n', lambda: 0)
    ...     counter.value += 1
    >>> apply(count)({'counter': {'n': 0}})  # needs mutable=['counter']
    Traceback (most recent call last):
    ...
    ModifyScopeVariableError: ...
    """

    def __init__(self, col: str, variable_name: str, scope_path: str):
        self.col, self.variable_name, self.scope_path = col, variable_name, scope_path
        super().__init__(
            f'Cannot update variable "{variable_name}" in {_flax_path(scope_path)} because '
            f'collection "{col}" is immutable. Pass `mutable=["{col}"]` to `apply` '
            '(it then returns `(output, updated_variables)`).'
        )


class InvalidFilterError(LinenError, TypeError):
    """A collection filter is not a bool, str, collection of str or DenyList."""

    def __init__(self, filter_like):
        super().__init__(
            f'Invalid collection filter {filter_like!r} of type {type(filter_like).__name__}. '
            'Use True, False, a collection name, a list of names, or DenyList(...).'
        )


class InvalidScopeError(LinenError):
    """A scope is used after the function that created it returned."""

    def __init__(self, scope_name: str):
        super().__init__(
            f'The scope "{scope_name}" is no longer valid: it was used outside the '
            '`init`/`apply` call (or transform) that created it. Do not keep scopes or '
            'bound modules past the call; use `module.bind(variables)` for interactive use.'
        )


class InvalidRngError(LinenError, ValueError):
    """An rng stream is requested that was not provided (and no 'params' fallback).

    >>> from linen.core import apply
    >>> apply(lambda scope: scope.make_rng('dropout'))({'params': {}})  # no rngs=
    Traceback (most recent call last):
    ...
    InvalidRngError: ...
    """

    def __init__(self, msg: str, *, rngs: Any = None, hint: str = ''):
        super().__init__(msg)
        # Set when ``rngs`` itself (not a mapping) is no key: Module methods then
        # say so naming the Module class, as Flax does (see :meth:`for_module`).
        self.rngs = rngs
        self.hint = hint

    def for_module(self, module_name: str) -> InvalidRngError:
        """The error a Module method raises for the same ``rngs``: Flax's text naming the class."""
        return InvalidRngError(
            f'RNGs should be of shape (2,) or PRNGKey in Module {module_name}, but rngs are: '
            f'{self.rngs}. {self.hint}',
            rngs=self.rngs,
            hint=self.hint,
        )


# -------------------------------------------------------------------------- module


class NameInUseError(LinenError):
    """Two submodules or variables of one module got the same name."""

    def __init__(self, key_type: str, value: str, module_name: str):
        super().__init__(
            f'Could not create {key_type} "{value}" in Module {module_name}: Name in use. '
            'Give one of them a different `name=`.'
        )


class DuplicateScopeNameError(NameInUseError, ValueError):
    """The functional core claimed one name twice in a scope (``scope.push('a')`` twice).

    A ``ValueError`` whose text starts as Flax's core error does (Flax's core raises
    a plain ``ValueError`` here); Modules report their own duplicates as
    :class:`NameInUseError` (this class is one too).

    >>> from linen.core import init
    >>> def model(scope):
    ...     scope.push('a')
    ...     scope.push('a')
    >>> init(model)(jax.random.key(0))
    Traceback (most recent call last):
    ...
    DuplicateScopeNameError: Duplicate use of scope name: "a" ...
    """

    def __init__(self, name: str, path: str = '', kind: str = 'child scope'):
        self.name = name
        self.path = path
        LinenError.__init__(
            self,
            f'Duplicate use of scope name: "{name}" in scope {_flax_path(path)}, claimed again '
            f'for a {kind}. A name is used once per scope (a variable name once per '
            'collection): give one of them a different name, or claim an existing child '
            'scope again with `push(name, reuse=True)`.',
        )


class AssignSubModuleError(LinenError, AttributeError):
    """A submodule is assigned to an attribute outside ``setup``."""

    def __init__(self, cls: str):
        super().__init__(
            f'Submodule {cls} must be defined in `setup()` or in a method wrapped in '
            '`@compact`. Move the assignment into `setup`, or create the submodule '
            'inline inside the `@compact` method.'
        )


class SetAttributeInModuleSetupError(LinenError, AttributeError):
    """A dataclass field is reassigned inside ``setup``."""

    def __init__(self):
        super().__init__(
            'Module construction attributes are frozen: do not reassign a dataclass field '
            'in `setup`. Give the derived value a new attribute name.'
        )


class SetAttributeFrozenModuleError(LinenError, AttributeError):
    """An attribute of a module is set outside ``setup``."""

    def __init__(self, module_cls: str, attr_name: str, attr_val=None):
        super().__init__(
            f"Can't set {attr_name}={attr_val} for Module of type {module_cls}: Module "
            'instance is frozen outside of setup method. Set attributes in `setup`, or '
            f'create a new instance with `module.clone({attr_name}=...)`.'
        )


class MultipleMethodsCompactError(LinenError):
    """More than one method of a Module class is decorated with ``@compact``.

    Defined for ``except`` clauses carried over from Flax; like current Flax, linen
    does not raise it: several ``@compact`` methods are allowed (a compact method
    called from another continues its auto-naming, each outermost call starts anew).
    """

    def __init__(self, cls_name: str = '', methods=()):
        names = ', '.join(methods)
        super().__init__(
            f'Only one method per class can be @compact; {cls_name} has several'
            + (f' ({names})' if names else '')
            + '. Use `setup()` for the others, or `nn.compact_name_scope`.'
        )


class ReservedModuleAttributeError(LinenError):
    """A Module field uses a reserved name (``parent``, ``name``)."""

    def __init__(self, annotations):
        super().__init__(
            f'The names `parent` and `name` are reserved for Module internals; found '
            f'{sorted(annotations)} among the fields. Rename the field.'
        )


class ApplyModuleInvalidMethodError(LinenError, TypeError):
    """``method=`` names no method of the module."""

    def __init__(self, method, module_cls: str = ''):
        super().__init__(
            f'Cannot call apply(): {method!r} is not a valid function for apply(). '
            f'(method={method!r}'
            + (f' on {module_cls}' if module_cls else '')
            + ') is not a method of the module nor a callable. Pass a method name '
            'string, a (bound or unbound) method, or a function whose first argument is '
            'the module.'
        )


class ApplyModuleMissingCallError(ApplyModuleInvalidMethodError, AttributeError):
    """``init``/``apply`` without ``method=`` on a Module class that defines no ``__call__``.

    Flax raises a plain ``AttributeError`` with the same first sentence.

    >>> class Foo(nn.Module):
    ...     pass
    >>> Foo().init(jax.random.key(0))
    Traceback (most recent call last):
    ...
    ApplyModuleMissingCallError: "Foo" object has no attribute "__call__". ...
    """

    def __init__(self, module_cls: str):
        LinenError.__init__(
            self,
            f'"{module_cls}" object has no attribute "__call__". If "__call__" is defined in '
            "'.setup()', remember these fields are only accessible from inside 'init' or "
            f"'apply'. {module_cls} defines no `__call__` method: define one, or pass "
            '`method=` naming the method that `init`/`apply` should run.',
        )


class ApplyModuleMethodNotCallableError(LinenError, TypeError):
    """``method=`` names an attribute of the module that is not callable.

    Flax raises a plain ``TypeError`` with the same text first.

    >>> class Foo(nn.Module):
    ...     size: int = 1
    >>> Foo().apply({}, method='size')
    Traceback (most recent call last):
    ...
    ApplyModuleMethodNotCallableError: ...
    """

    def __init__(self, module_cls: str, attribute: str, value_type: type):
        super().__init__(
            f"'{module_cls}.{attribute}' must be a callable, got {value_type}. Pass the "
            'name of a method (or of a submodule) to `method=`.'
        )


class InitializeVariableOutsideSetupError(LinenError, ValueError):
    """``param``/``variable`` is called in a method that is neither ``setup`` nor ``@compact``.

    Flax raises a plain ``ValueError`` with the same text first.

    >>> class Foo(nn.Module):
    ...     def __call__(self, x):  # no @nn.compact
    ...         return x + self.param('bias', nn.initializers.zeros, x.shape)
    >>> Foo().init(jax.random.key(0), jnp.ones(2))
    Traceback (most recent call last):
    ...
    InitializeVariableOutsideSetupError: ...
    """

    def __init__(self, kind: str, name: str, module_cls: str):
        super().__init__(
            f'{kind} must be initialized in `setup()` or in a method wrapped in `@compact`'
            f' ("{name}" of {module_cls}). Decorate the method with `@nn.compact`, or '
            'create the variable in `setup`.'
        )


class HashBoundModuleError(LinenError, TypeError):
    """``hash`` of a bound Module (its variables may change); Flax's exact text.

    Hash the unbound module instead: ``hash(module.clone())``, or key on
    ``module.path``.

    >>> hash(nn.Dense(2).bind({}))
    Traceback (most recent call last):
    ...
    HashBoundModuleError: Can't call __hash__ on modules that hold variables.
    """

    def __init__(self):
        # Flax's tests match this sentence literally: the how-to-fix is above.
        super().__init__("Can't call __hash__ on modules that hold variables.")


class PerturbationNotFoundError(LinenError, ValueError):
    """``perturb`` finds its collection in the variables but not its variable.

    Flax raises a plain ``ValueError`` with the same text first.

    >>> class Foo(nn.Module):
    ...     @nn.compact
    ...     def __call__(self, x):
    ...         return self.perturb('p', x)
    >>> Foo().apply({'perturbations': {}}, jnp.ones(2))
    Traceback (most recent call last):
    ...
    PerturbationNotFoundError: ...
    """

    def __init__(self, collection: str, name: str, path: str | None):
        super().__init__(
            f'Perturbation collection {collection} present, but missing perturbation '
            f'variable {name} (in {_where(path)}). Pass the "{collection}" collection that '
            '`init` returned, or leave the collection out to make `perturb` a no-op.'
        )


class CallCompactUnboundModuleError(LinenError):
    """A ``@compact`` method is called on a module that has no variables bound."""

    def __init__(self, module_cls: str = 'Module', method: str = '__call__'):
        super().__init__(
            "Can't call compact methods on unbound modules "
            f'({module_cls}.{method} has no variables). Use `module.init(key, ...)`, `module.apply(variables, ...)` '
            'or `module.bind(variables)`.'
        )


class CallSetupUnboundModuleError(LinenError):
    """``setup`` is triggered on an unbound module."""

    def __init__(self, module_cls: str = 'Module'):
        super().__init__(
            # Flax's text for this case is its compact-method one, kept for match=.
            "Can't call compact methods on unbound modules "
            f'(setup of {module_cls} runs only on a bound module). Bind it first with '
            '`module.bind(variables)`, or call it through `init`/`apply`.'
        )


class CallUnbindOnUnboundModuleError(LinenError):
    """``unbind`` is called on an unbound module."""

    def __init__(self):
        super().__init__(
            "Can't call `unbind()` on unbound modules (this one is not bound). Use "
            '`module.bind(variables)` first.'
        )


class CallShareScopeOnUnboundModuleError(LinenError):
    """``share_scope`` is called on an unbound module."""

    def __init__(self):
        super().__init__(
            "Can't call `share_scope` on unbound modules; call it inside `setup` or a "
            '`@compact` method.'
        )


class InvalidInstanceModuleError(LinenError):
    """A Module method is called on the class instead of an instance."""

    def __init__(self):
        super().__init__(
            'Can only call init, init_with_output or apply methods on an instance of the '
            'Module class, not the Module class itself. Make an instance first: '
            '`MyModule(...).init(...)`.'
        )


class IncorrectPostInitOverrideError(LinenError):
    """A subclass overrides ``__post_init__`` without calling ``super().__post_init__()``."""

    def __init__(self):
        super().__init__(
            'Overrode `.__post_init__()` without calling `super().__post_init__()`: add '
            'the call to your `__post_init__`, after the attributes it sets.'
        )


class DescriptorAttributeError(LinenError):
    """An attribute error raised inside a property or descriptor of a Module.

    >>> class Foo(nn.Module):
    ...     @property
    ...     def prop(self):
    ...         return self.missing  # AttributeError inside the getter
    ...
    ...     @nn.compact
    ...     def __call__(self):
    ...         return self.prop
    >>> Foo().init(jax.random.key(0))
    Traceback (most recent call last):
    ...
    DescriptorAttributeError: ...
    """

    def __init__(self, module_cls: str = '', descriptor: str = '', cause: str = ''):
        where = f' {module_cls}.{descriptor}' if module_cls else ''
        because = f' (AttributeError: {cause})' if cause else ''
        super().__init__(
            'Trying to access a property that is accessing a non-existent attribute. '
            f'The getter of{where or " a property or descriptor"} raised an AttributeError'
            f'{because}; fix the attribute it reads (see the chained exception).'
        )


class UnboundModuleError(LinenError, ValueError):
    """A method that needs variables or rngs is called on an unbound Module.

    Flax raises a plain ``ValueError`` with the same text first.

    >>> nn.Dense(3).variables
    Traceback (most recent call last):
    ...
    UnboundModuleError: ...
    """

    def __init__(self, flax_text: str, module_cls: str = ''):
        end = '' if flax_text.endswith('.') else '.'
        where = f' {module_cls} has no scope:' if module_cls else ''
        super().__init__(
            f'{flax_text}{end}{where} call it inside `init`/`apply`, or bind the Module with '
            '`module.bind(variables, rngs=...)`.'
        )


class MergeParamError(LinenError, ValueError):
    """``merge_param`` got the value in both places, or in neither.

    >>> from linen.module import merge_param
    >>> merge_param('use_running_average', None, None)  # set neither as field nor argument
    Traceback (most recent call last):
    ...
    MergeParamError: ...
    """


# ---------------------------------------------------------------------- transforms


class TransformTargetError(LinenError, TypeError):
    """A lifted transform is applied to something that is neither a Module class nor a method."""

    def __init__(self, target):
        super().__init__(
            'Linen transformations must be applied to Modules classes or functions taking '
            'a Module instance as the first argument. The provided target is not a Module '
            f'class or callable: {target!r}. Linen transforms apply to a Module class or a '
            'Module method; for plain functions use the JAX transform.'
        )


class TransformedMethodReturnValueError(LinenError):
    """A transformed method returned a Module."""

    def __init__(self, name: str):
        super().__init__(
            f'Transformed module method {name} cannot return Modules or Variables. '
            'Their scope ends with the transform: return arrays, and build submodules '
            'outside the transformed method.'
        )


# ------------------------------------------------------------------- serialization


class InvalidCheckpointError(LinenError, ValueError):
    """Bytes or a state dict that cannot be restored."""

    def __init__(self, msg: str):
        super().__init__(msg)


class TraverseInputTypeError(LinenError, TypeError):
    """A ``traverse_util`` function got something that is not a (Frozen)dict.

    >>> from linen.core import traverse_util
    >>> traverse_util.flatten_dict([1, 2])
    Traceback (most recent call last):
    ...
    TraverseInputTypeError: ...
    """

    def __init__(self, msg: str):
        super().__init__(msg)


class TraversalSetValuesCountError(LinenError, ValueError):
    """``ModelParamTraversal.set`` got more or fewer values than parameters it selects.

    >>> from linen.core.traverse_util import ModelParamTraversal
    >>> ModelParamTraversal(lambda p, _: True).set([], {'w': 1})
    Traceback (most recent call last):
    ...
    TraversalSetValuesCountError: ...
    """

    def __init__(self, msg: str):
        super().__init__(msg)


class TrainStateOptimizerError(LinenError, TypeError):
    """``TrainState.create`` got a ``tx`` that is not an optax-style transformation.

    >>> from linen.training.train_state import TrainState
    >>> TrainState.create(apply_fn=lambda v, x: x, params={}, tx=0.1)
    Traceback (most recent call last):
    ...
    TrainStateOptimizerError: ...
    """

    def __init__(self, msg: str):
        super().__init__(msg)


class LazyInitError(LinenError):
    """``lazy_init`` needed the value of an abstract input."""

    def __init__(self, partial_val=None, value=None):
        # ``partial_val``: the variables (``collection/path/name``) that need it;
        # ``value``: the first of them as an abstract value (anything with ``shape`` and
        # ``dtype``), shown as Flax shows its partial value (``float32[3]``).
        where = ''
        if isinstance(partial_val, (list, tuple)) and partial_val:
            where = f' (variables {", ".join(map(str, partial_val))})'
        shown = ''
        if value is not None and hasattr(value, 'shape') and hasattr(value, 'dtype'):
            shown = f' (shape: {value.dtype}[{",".join(map(str, value.shape))}])'
        self.partial_val = partial_val
        super().__init__(
            f'Lazy init encountered a value that could with the given inputs{shown}. It can '
            f'only be computed with concrete inputs{where}; pass concrete arrays (or '
            '`jax.ShapeDtypeStruct`s only where values are not needed).'
        )


class PartitioningUnspecifiedError(LinenError):
    """A transform needs ``metadata_params={PARTITION_NAME: ...}`` for boxed parameters."""

    def __init__(self, target=None):
        super().__init__(
            'Trying to transform a Partitioned variable but "partition_name" is not '
            'specified in metadata_params: pass `metadata_params={nn.PARTITION_NAME: "axis_name"}` to '
            'the lifted transform.'
        )


class LogicalAxisRulesError(LinenError, ValueError):
    """Logical axis names, rules and mesh do not fit together.

    Raised in strict mode (``logical_axis_rules(rules, strict=True)``, the flag
    ``linen_strict_logical_rules`` or ``LINEN_STRICT_LOGICAL_RULES=1``) and, as in
    Flax, always for a logical name used twice in one array and for a mesh axis the
    mesh lacks (Flax's message text first). Rules are checked where they are applied
    to a parameter, so the message names the parameter path (where known) and the
    axis.

    >>> with nn.logical_axis_rules([('embed', 'model')], strict=True):
    ...     nn.logical_to_mesh_axes(('embed', 'mlp'))  # 'mlp' has no rule
    Traceback (most recent call last):
    ...
    LogicalAxisRulesError: ...
    """

    def __init__(self, message: str):
        super().__init__(message)


# ------------------------------------------------------------------------- plugins


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


class ConfigError(LinenError, KeyError):
    """An unknown configuration flag, or a value of the wrong type."""

    def __init__(self, msg: str):
        super().__init__(msg)

    def __str__(self):
        return self.args[0]


# The public path of every error is linen.core.errors (Haiku's habit): tracebacks
# then name the module users import from.
for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type):
        _obj.__module__ = __name__
del _name, _obj
