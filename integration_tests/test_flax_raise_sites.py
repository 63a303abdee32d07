"""Flax as the oracle at the edges of the module and transform checks.

Found by a sweep of every ``raise`` in linen-module and linen-transforms: programs Flax
runs that linen refused (a subclass annotating ``name``, ``nn.scan`` axes given as a
tree, ``methods=`` beside a function target), and errors that were not the builtin
Flax raises for the same program. Each program is written against an ``nn`` namespace
and run with ``flax.linen`` and ``linen.nn``.
"""

from __future__ import annotations

import typing

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import linen.nn as linen_nn
from integration_tests.oracle import assert_same_bits
from linen.core import errors as linen_errors
from linen.transforms import errors as linen_transform_errors

pytestmark = pytest.mark.flax
flax_nn = pytest.importorskip('flax.linen')

KEY = jax.random.key(0)


def _raised(program, nn) -> BaseException:
    with pytest.raises(Exception) as info:
        program(nn)
    return info.value


# ------------------------------------------------------------ programs Flax runs


def _annotated_name(annotation):
    def program(nn):
        class Layer(nn.Module):
            __annotations__ = {'name': annotation, 'features': int}
            name = None
            features = 2

            @nn.compact
            def __call__(self, x):
                return nn.Dense(self.features)(x)

        class Model(nn.Module):
            @nn.compact
            def __call__(self, x):
                return Layer(3)(x) + Layer(3, name='named')(x)

        return Model().init(KEY, jnp.ones((1, 2)))

    return program


def _scan_with_tree_in_axes(nn):
    class Cell(nn.Module):
        @nn.compact
        def __call__(self, c, xs):
            c = nn.Dense(2)(c) + xs['a'] * xs['b']
            return c, xs['a']

    scan = nn.scan(
        Cell,
        variable_broadcast='params',
        split_rngs={'params': False},
        in_axes=({'a': 0, 'b': nn.broadcast},),
    )
    xs = {'a': jnp.arange(6.0).reshape(3, 2), 'b': jnp.full((2,), 2.0)}
    return scan().init_with_output(KEY, jnp.ones(2), xs)


def _scan_with_tree_out_axes(nn):
    class Cell(nn.Module):
        @nn.compact
        def __call__(self, c, x):
            return c + x, (x, {'a': 2.0 * x})

    return nn.scan(Cell, out_axes=(0, {'a': 1}))().apply({}, jnp.zeros(2), jnp.ones((3, 2)))


def _function_target_with_methods(transform):
    def program(nn):
        def body(module, x):
            return nn.Dense(2)(x)

        kwargs = {
            'vmap': dict(variable_axes={'params': 0}, split_rngs={'params': True}),
            'remat': dict(),
        }[transform]
        lifted = getattr(nn, transform)(body, methods={'__call__': {}}, **kwargs)

        class Model(nn.Module):
            @nn.compact
            def __call__(self, x):
                return lifted(self, x)

        return Model().init_with_output(KEY, jnp.ones((3, 2)))

    return program


def _jit_with_shape_dependent_rng_use(nn):
    # The rng values differ under Flax's nn.jit (docs/differences.md), so the
    # comparison is of what runs: every shape, the outputs' shapes, the variables.
    class Rows(nn.Module):
        @nn.compact
        def __call__(self, x):
            y = nn.Dense(2)(x)
            for i in range(x.shape[0]):
                y = y.at[i].multiply(nn.Dropout(0.5, deterministic=False)(y[i]))
            return y

    model = nn.jit(Rows)()
    variables = model.init({'params': KEY, 'dropout': KEY}, jnp.ones((1, 3)))
    rngs = {'dropout': jax.random.key(1)}
    outs = [model.apply(variables, jnp.ones((n, 3)), rngs=rngs) for n in (2, 4, 2, 1)]
    return jax.tree_util.tree_map(jnp.shape, (variables, outs))


def _unbound_non_compact(transform):
    # Flax runs these transforms on a method that is not compact of an unbound module
    # (nothing to lift); a Python list records the traces.
    def program(nn):
        traced = []

        class Block(nn.Module):
            scale: float = 2.0

            def __call__(self, x):
                traced.append(x.shape)
                return x * self.scale * x.shape[0]

            def left(self, x):
                traced.append('left')
                return x * self.scale

            def right(self, x):
                traced.append('right')
                return x - self.scale

        x = jnp.arange(6.0).reshape(3, 2)
        if transform == 'remat':
            y = nn.remat(Block)()(x)
        elif transform == 'vmap':
            y = nn.vmap(Block, in_axes=0, out_axes=1)()(x)
        elif transform == 'cond':
            y = jax.jit(lambda p, x: nn.cond(p, Block.left, Block.right, Block(), x))(False, x)
        else:
            y = nn.switch(1, [Block.left, Block.right], Block(), x)
        return y, [str(t) for t in traced]

    return program


def _module_among_primals(transform, called_before=True):
    """A bound Module among a lifted autodiff transform's primals: Flax lifts it for
    ``grad``/``value_and_grad`` and refuses it for ``jvp``/``vjp``."""

    def program(nn):
        class Other(nn.Module):
            @nn.compact
            def __call__(self, x):
                return nn.Dense(2)(x)

        class Model(nn.Module):
            @nn.compact
            def __call__(self, x):
                other = Other()
                if called_before:
                    other(x)

                def f(mdl, m, x):
                    return m(x) * mdl.param('w', nn.initializers.ones, (2,))

                if transform == 'jvp':
                    return nn.jvp(f, self, (other, x), (other, x), {})
                if transform == 'vjp':
                    return nn.vjp(f, self, other, x)

                def loss(mdl, m, x):
                    y = f(mdl, m, x)
                    return jnp.sum(y**2), y

                (value, aux), _ = nn.value_and_grad(loss, self, other, x, has_aux=True)
                return value, aux, nn.grad(lambda mdl, m, x: loss(mdl, m, x)[0], self, other, x)

        if transform in ('jvp', 'vjp'):
            return Model().init(KEY, jnp.ones(2))
        out, variables = Model().init_with_output(KEY, jnp.ones(2))
        again = Model().apply(variables, jnp.arange(2.0))
        # The module's place in the gradients is a placeholder with no leaves (Flax's
        # InstancePlaceholder, linen's Slot): the leaves are compared.
        return jax.tree_util.tree_leaves((out, again)), variables

    return program


RUNS = {
    **{f'unbound_{t}': _unbound_non_compact(t) for t in ('remat', 'vmap', 'cond', 'switch')},
    'grad_module_primal': _module_among_primals('grad'),
    'grad_module_primal_creating_params': _module_among_primals('grad', called_before=False),
    'jit_shape_dependent_rng_use': _jit_with_shape_dependent_rng_use,
    'name_annotated_str': _annotated_name(str),
    'name_annotated_str_text': _annotated_name('str'),
    'name_annotated_optional': _annotated_name(typing.Optional[str]),  # noqa: UP045
    'name_annotated_union': _annotated_name(str | None),
    'scan_in_axes_tree': _scan_with_tree_in_axes,
    'scan_out_axes_tree': _scan_with_tree_out_axes,
    'vmap_function_with_methods': _function_target_with_methods('vmap'),
    'remat_function_with_methods': _function_target_with_methods('remat'),
}


@pytest.mark.parametrize('case', list(RUNS))
def test_runs_as_on_flax(case):
    assert_same_bits(RUNS[case](linen_nn), RUNS[case](flax_nn))


def test_name_annotated_otherwise_is_still_reserved():
    program = _annotated_name(int)
    theirs, ours = _raised(program, flax_nn), _raised(program, linen_nn)
    assert type(theirs).__name__ == type(ours).__name__ == 'ReservedModuleAttributeError'


# ----------------------------------------------------- errors that are Flax's builtin


def _unbound_compact(nn):
    class Block(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(2)(x)

    return nn.vmap(Block, variable_axes={'params': 0}, split_rngs={'params': True})()(
        jnp.ones((3, 2))
    )


def _grad_of_a_vector(transform):
    def program(nn):
        class Model(nn.Module):
            @nn.compact
            def __call__(self, x):
                def body(module, x):
                    return module.param('w', nn.initializers.ones, (2,)) * x

                return getattr(nn, transform)(body, self, x)

        return Model().init(KEY, jnp.ones(2))

    return program


def _methods_as_a_string(transform):
    def program(nn):
        class Block(nn.Module):
            @nn.compact
            def __call__(self, x):
                return nn.Dense(2)(x)

        kwargs = {'vmap': dict(variable_axes={'params': 0}, split_rngs={'params': True})}
        lifted = getattr(nn, transform)(Block, methods='__call__', **kwargs.get(transform, {}))
        return lifted().init(KEY, jnp.ones((3, 2)))

    return program


def _control_flow_branch(kind):
    def program(nn):
        class Block(nn.Module):
            @nn.compact
            def __call__(self, x):
                return x

        class Model(nn.Module):
            @nn.compact
            def __call__(self, x):
                identity = lambda mdl, c: c
                if kind == 'cond_class':
                    return nn.cond(True, Block, identity, self, x)
                if kind == 'cond_number':
                    return nn.cond(True, identity, 3, self, x)
                if kind == 'switch_class':
                    return nn.switch(0, [identity, Block], self, x)
                return nn.while_loop(lambda mdl, c: False, Block, self, x)

        return Model().init(KEY, jnp.ones(2))

    return program


def _reduce_axes(transform):
    def program(nn):
        class Model(nn.Module):
            @nn.compact
            def __call__(self, x):
                def f(mdl, x):
                    return jnp.sum(mdl.param('w', nn.initializers.ones, (2,)) * x)

                return getattr(nn, transform)(f, self, x, reduce_axes=('batch',))

        return Model().init(KEY, jnp.ones(2))

    return program


BUILTINS = {
    **{
        f'reduce_axes_{t}': (_reduce_axes(t), linen_transform_errors.ReduceAxesArgumentError)
        for t in ('grad', 'value_and_grad', 'vjp')
    },
    'module_among_jvp_primals': (
        _module_among_primals('jvp'),
        linen_transform_errors.ModuleArgumentUnsupportedError,
    ),
    'module_among_vjp_primals': (
        _module_among_primals('vjp'),
        linen_transform_errors.ModuleArgumentUnsupportedError,
    ),
    'methods_as_a_string_jit': (
        _methods_as_a_string('jit'),
        linen_transform_errors.TransformArgumentError,
    ),
    'methods_as_a_string_vmap': (
        _methods_as_a_string('vmap'),
        linen_transform_errors.TransformArgumentError,
    ),
    **{
        f'control_flow_{kind}': (
            _control_flow_branch(kind),
            linen_transform_errors.TransformArgumentError,
        )
        for kind in ('cond_class', 'cond_number', 'switch_class', 'while_loop_class')
    },
    # Flax's nn.grad refuses a non-scalar value; linen differentiated its sum, silently.
    'grad_of_a_vector': (_grad_of_a_vector('grad'), linen_transform_errors.TransformArgumentError),
    'value_and_grad_of_a_vector': (
        _grad_of_a_vector('value_and_grad'),
        linen_transform_errors.TransformArgumentError,
    ),
    'parent_of_another_type': (
        lambda nn: nn.Dense(2, parent=3),
        linen_errors.ModuleParentTypeError,
    ),
    'param_on_unbound_module': (
        lambda nn: nn.Dense(2).param('w', lambda key: 1.0),
        linen_errors.UnboundModuleError,
    ),
    'lifted_compact_method_unbound': (_unbound_compact, linen_errors.CallCompactUnboundModuleError),
    'functional_apply_of_none': (
        lambda nn: nn.apply(lambda module, x: x, None)({}, jnp.ones(2)),
        linen_errors.InvalidInstanceModuleError,
    ),
    'functional_init_of_a_class': (
        lambda nn: nn.init(lambda module, x: x, nn.Dense)(KEY, jnp.ones(2)),
        linen_errors.InvalidInstanceModuleError,
    ),
}


@pytest.mark.parametrize('case', list(BUILTINS))
def test_error_is_the_builtin_flax_raises(case):
    program, linen_class = BUILTINS[case]
    theirs, ours = _raised(program, flax_nn), _raised(program, linen_nn)
    assert type(theirs).__module__ == 'builtins', theirs
    assert type(ours) is linen_class
    assert isinstance(ours, type(theirs)), (type(ours).__mro__, theirs)


@pytest.mark.parametrize('transform', ['vjp', 'value_and_grad'])
def test_functional_lift_refuses_reduce_axes_as_flax(transform):
    from flax.core import init as flax_init
    from flax.core import lift as flax_lift

    from linen.core import init as linen_init
    from linen.transforms import lift as linen_lift

    def program(lift, init):
        def f(scope, x):
            return jnp.sum(scope.param('w', lambda key, shape: jnp.ones(shape), (2,)) * x)

        def outer(scope, x):
            return getattr(lift, transform)(f, scope, x, reduce_axes=('batch',))

        return init(outer)(KEY, jnp.ones(2))

    theirs = _raised(lambda _: program(flax_lift, flax_init), None)
    ours = _raised(lambda _: program(linen_lift, linen_init), None)
    assert type(theirs) is NotImplementedError
    assert isinstance(ours, linen_transform_errors.ReduceAxesArgumentError)
    assert str(ours).startswith(str(theirs))


def test_functional_value_and_grad_of_a_vector_differentiates_its_sum_as_flax():
    # Flax's core lift.value_and_grad (under nn.grad's check) takes ones as cotangent.
    from flax.core import init as flax_init
    from flax.core import lift as flax_lift

    from linen.core import init as linen_init
    from linen.transforms import lift as linen_lift

    def model(lift):
        def fn(scope, x):
            return lift.value_and_grad(lambda scope, x: x * x, scope, x)

        return fn

    x = jnp.arange(3.0)
    ours = linen_init(model(linen_lift))(KEY, x)
    theirs = flax_init(model(flax_lift))(KEY, x)
    assert_same_bits(ours[0], theirs[0])
    np.testing.assert_array_equal(np.asarray(ours[0][1][0]), 2.0 * np.arange(3.0))
