"""Errors of the Module lifecycle: naming, setup and ``@compact``, binding, ``apply``.

Public as :mod:`linen.core.errors`, which re-exports every class.
"""

from __future__ import annotations

from linen.core._errors_base import LinenError, _flax_path, _where


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


class UnhashableModuleError(LinenError, TypeError):
    """``hash`` of a Module that holds an unhashable attribute; Flax's text first.

    A Module hashes the tuple of its fields, so each must be hashable: pass a
    tuple for a list, a ``FrozenDict`` for a dict. A Module class whose body
    defines ``__eq__`` without ``__hash__`` is unhashable, as any Python class
    (and a Flax Module) is.

    >>> class Stack(nn.Module):
    ...     widths: list
    >>> hash(Stack([2, 3]))
    Traceback (most recent call last):
    ...
    UnhashableModuleError: Failed to hash Flax Module.  The module probably contains unhashable attributes.  Module=Stack(
        # attributes
        widths = [2, 3]
    ) Field `widths` holds an unhashable list.
    """

    def __init__(self, module_repr: str, detail: str = ''):
        super().__init__(
            'Failed to hash Flax Module.  The module probably contains unhashable '
            f'attributes.  Module={module_repr}' + (f' {detail}' if detail else '')
        )


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


class CallCompactUnboundModuleError(LinenError, ValueError, AssertionError):
    """A ``@compact`` method is called on a module that has no variables bound.

    Where Flax raises a builtin instead (a lifted transform or a ``compact_name_scope``
    method of an unbound module: ``ValueError``; ``nn.jit`` of a compact method:
    ``AssertionError``), this error is that builtin too.
    """

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


class InvalidInstanceModuleError(LinenError, AttributeError, TypeError):
    """A Module method is called on the class instead of an instance.

    Flax's functional ``nn.apply``/``nn.init``/``nn.init_with_output`` raise
    ``AttributeError`` (module None) or ``TypeError`` (a class) there: this error is both.
    """

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


class UnboundModuleError(LinenError, ValueError, AssertionError):
    """A method that needs variables or rngs is called on an unbound Module.

    Flax raises a plain ``ValueError`` with the same text first (an ``AssertionError``
    for ``param`` and ``variable``).

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


class ModuleParentTypeError(LinenError, ValueError):
    """``parent=`` is neither a Module, a Scope nor None (Flax raises ``ValueError``)."""

    def __init__(self, module_cls: str, parent_type: str):
        super().__init__(
            f'parent must be None, Module or Scope: {module_cls}(parent=...) must be a '
            f'Module, a Scope or None; got {parent_type}.'
        )
