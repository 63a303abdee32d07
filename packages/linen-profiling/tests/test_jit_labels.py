"""Labels under ``nn.jit``: instances of one class compile once and keep their own rows."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

lm = pytest.importorskip('linen.module')
lt = pytest.importorskip('linen.transforms')

from linen.core import _bus  # noqa: E402
from linen.core.hookspecs import hookimpl  # noqa: E402
from linen.profiling import module_costs, named_call, override_named_call  # noqa: E402
from linen.profiling._state import _switch  # noqa: E402

# JAX reports each XLA compilation under this event name (jax 0.10 and 0.12 alike).
COMPILE_EVENT = '/jax/core/compile/backend_compile_duration'
TRACES: list[str] = []


@pytest.fixture(autouse=True)
def labels_follow_config(restore_profile_flag):
    token = _switch.set(None)
    lm.invalidate_method_wrappers()
    TRACES.clear()
    yield
    _switch.reset(token)
    lm.invalidate_method_wrappers(everywhere=True)


class Proj(lm.Module):
    features: int

    @lm.compact
    def __call__(self, x):
        kernel = self.param('kernel', jax.nn.initializers.ones, (x.shape[-1], self.features))
        return x @ kernel


class Block(lm.Module):
    features: int

    @lm.compact
    def __call__(self, x):
        TRACES.append(self.name)  # once per trace of the block
        return Proj(self.features, name='proj')(jnp.tanh(x))


class Tower(lm.Module):
    features: int = 4
    depth: int = 10

    @lm.compact
    def __call__(self, x):
        for _ in range(self.depth):
            x = lt.jit(Block)(self.features)(x)
        return x


class Compiles:
    """Counts XLA compilations through the public ``jax.monitoring`` listener API."""

    def __enter__(self):
        self.count = 0
        jax.monitoring.register_event_duration_secs_listener(self._listen)
        return self

    def _listen(self, event, duration, **kwargs):
        if event == COMPILE_EVENT:
            self.count += 1

    def __exit__(self, *exc):
        jax.monitoring.unregister_event_duration_listener(self._listen)


X = jnp.ones((2, 4))


@pytest.mark.parametrize('labels_on, features', [(True, 4), (False, 5)])
def test_ten_instances_of_one_class_trace_and_compile_once(labels_on, features):
    x = jnp.ones((2, features))  # every block keeps the width: one shape for all
    tower = Tower(features=features)
    variables = tower.init(jax.random.key(0), x)
    # What a first apply compiles once per process (eager ops, initializer shapes),
    # with the other labelling state: nn.jit keys on it, so this leaves its cache cold.
    with override_named_call(not labels_on):
        Tower(features=features, depth=1).apply(variables, x)
    TRACES.clear()
    with override_named_call(labels_on), Compiles() as compiles:
        y = tower.apply(variables, x)
    assert len(TRACES) == 1
    assert compiles.count == 1
    # the one compiled function gave every instance its own parameters' result
    expected = x
    for i in range(10):
        expected = jnp.tanh(expected) @ variables['params'][f'JitBlock_{i}']['proj']['kernel']
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6)


def test_every_instance_has_its_own_row_with_its_flops():
    x = jnp.ones((2, 6))  # a width no other test uses: nn.jit's cache starts cold
    tower = Tower(features=6)
    variables = tower.init(jax.random.key(0), x)
    costs = module_costs(lambda v, x: tower.apply(v, x), variables, x)
    assert set(TRACES) == {'JitBlock_0'}  # the other nine reuse its compiled function
    matmul = 2 * 2 * 6 * 6  # (2, 6) @ (6, 6): a multiply and an add per term
    for i in range(10):
        block = costs[f'Tower/JitBlock_{i}']
        assert costs[f'Tower/JitBlock_{i}/proj'].flops == matmul
        assert block.inclusive_flops == matmul + block.flops
        assert block.transcendentals == 2 * 6  # its own tanh
    assert costs['Tower'].inclusive_flops == pytest.approx(costs.flops)


class Encoder(lm.Module):
    @named_call
    def __call__(self, x):
        TRACES.append(self.name)
        return jnp.sin(x)


class TwoEncoders(lm.Module):
    @lm.compact
    def __call__(self, x):
        return lt.jit(Encoder)(name='b')(lt.jit(Encoder)(name='a')(x))


def test_a_named_call_method_is_labelled_once_per_instance_outside_the_jit():
    model = TwoEncoders()
    variables = model.init(jax.random.key(0), X)
    TRACES.clear()
    text = jax.jit(model.apply).lower(variables, X).compile().as_text()
    assert len(TRACES) == 1
    assert 'op_name="jit(apply)/TwoEncoders/a/jit(run)/sin"' in text
    assert 'op_name="jit(apply)/TwoEncoders/b/jit(run)/sin"' in text


class UpperCaseNames:
    @hookimpl(tryfirst=True)
    def linen_profiling_name(self, module, method_name, method):
        return (module.name or type(module).__name__).upper()


def test_a_user_naming_rule_keeps_one_compiled_function_per_instance():
    # A rule may read anything of the instance, so each instance traces with its own labels.
    name = _bus.register(UpperCaseNames(), name='test-upper-jit')
    try:
        tower = Tower(depth=2)
        variables = tower.init(jax.random.key(0), X)
        TRACES.clear()
        costs = module_costs(lambda v, x: tower.apply(v, x), variables, X)
    finally:
        _bus.unregister(name)
    assert len(TRACES) == 2
    assert costs['TOWER/JITBLOCK_1/PROJ'].flops == 2 * 2 * 4 * 4


class _Payload:
    pass


def _renamed(name, payload):
    """A function made per call, closing over ``payload``, renamed to ``name``."""

    def forward(dense, y):
        assert payload is not None
        return dense(y) * 2.0

    forward.__name__ = name
    return forward


def test_functions_made_per_call_get_their_own_labels_and_are_not_kept():
    # A lifted transform of a function runs it as a method of the module it is given:
    # the label is '<instance>.<function name>', as in Flax. Made per call, such a
    # function (one code object here, two names) must get its own name's label, and
    # nothing may keep it, or what it closes over, once the call is over.
    import gc
    import weakref

    held = [_Payload()]  # emptied below: only the per-call functions refer to it then
    alive = weakref.ref(held[0])

    class Model(lm.Module):
        @lm.compact
        def __call__(self, x):
            dense = Proj(3)
            for name in ('encode', 'decode'):
                x = lt.map_variables(
                    _renamed(name, held[0]), 'params', init=self.is_initializing()
                )(dense, x)
            return x

    x = jnp.ones((2, 3))
    variables = Model().init(jax.random.key(0), x)
    with override_named_call(True):
        text = jax.jit(Model().apply).lower(variables, x).as_text(debug_info=True)
    assert 'jit(apply)/Model/Proj_0.encode/mul' in text
    assert 'jit(apply)/Model/Proj_0.decode/mul' in text
    held.clear()
    gc.collect()
    assert alive() is None
