"""Errors of scopes, variables, collection filters, rngs and ``lazy_init``.

Public as :mod:`linen.core.errors`, which re-exports every class.
"""

from __future__ import annotations

from typing import Any

from linen.core._errors_base import LinenError, _flax_path


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

    def __init__(self, col_name: str, var_name: str, scope_path: str, lifted: bool = False):
        self.col_name, self.var_name, self.scope_path = col_name, var_name, scope_path
        where = (
            ' Inside a lifted transform the transform must let the module see it too: '
            'name the collection in its `variables=` filter.'
            if lifted
            else ''
        )
        super().__init__(
            f'Tried to access "{var_name}" from collection "{col_name}" in '
            f'{_flax_path(scope_path)} but the collection is empty. Pass the '
            f'"{col_name}" collection returned by `init` to `apply`, or make it mutable '
            f'with `mutable=["{col_name}"]` so it can be created.{where}'
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

    def __init__(self, col: str, variable_name: str, scope_path: str, lifted: bool = False):
        self.col, self.variable_name, self.scope_path = col, variable_name, scope_path
        where = (
            ' Inside a lifted transform the transform must let it change too: '
            '`nn.map_variables(..., mutable=True)`, the collection in a `variables=` filter '
            '(`nn.WeightNorm` lets its layer change none).'
            if lifted
            else ''
        )
        super().__init__(
            f'Cannot update variable "{variable_name}" in {_flax_path(scope_path)} because '
            f'collection "{col}" is immutable. Pass `mutable=["{col}"]` to `apply` '
            f'(it then returns `(output, updated_variables)`).{where}'
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


class LazyInitError(LinenError):
    """``lazy_init`` needed the value of an abstract input (flag ``linen_strict_lazy_init``).

    Without the flag, ``lazy_init`` computes such a variable as if the input were
    zeros, as Flax 0.12.9 and later do; Flax 0.12.8 raised this error.
    """

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
