"""Differences already recorded in FINDINGS.md, in one place.

A difference the fuzzer finds is *known* when a finding here has its stage and kind
and the program has every feature the finding lists; known differences do not fail
the CI slice and get no new reproducer. Each finding names its reproducers, which
``test_reproducers.py`` marks ``xfail(strict=True)`` until the fix lands: when it
does, the reproducer passes, the strict xfail fails, and the entry is removed here
(and marked fixed in FINDINGS.md).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import jax

from integration_tests.fuzz.compare import Difference
from integration_tests.fuzz.grammar import RECURRENT


@dataclass(frozen=True)
class KnownFinding:
    id: str  # the heading in FINDINGS.md (F<n>), or D<n> for a documented difference
    title: str
    stages: tuple[str, ...] | None  # None: any stage
    kinds: tuple[str, ...]
    # A program shows it only when it has all of these; None: the generator never
    # writes such a program (a hand-written reproducer shows it).
    features: frozenset[str] | None
    reproducers: tuple[str, ...] = ()
    # ... and at least one of these, when given.
    any_of: frozenset[str] = frozenset()
    # Where Flax itself changed between the versions the two JAX ends install: the
    # finding shows only where this probe of the installed Flax says so.
    only_if: Callable[[], bool] | None = None
    # Only where Flax raised, with this text in its message (for a documented case of
    # linen running what Flax refuses: a program raising for another reason differs).
    flax_says: str = ''
    # JAX flags that must be on for the finding to show (`jax_disable_jit`): a campaign
    # run without them never matches it. Its reproducers set them themselves.
    settings: frozenset[str] = frozenset()

    def applies(self) -> bool:
        return self.only_if is None or self.only_if()

    def matches(self, diff: Difference, features: set[str]) -> bool:
        if self.features is None or not self.features <= features:
            return False
        if not self.applies():
            return False
        if not all(getattr(jax.config, flag) for flag in self.settings):
            return False
        if self.any_of and not self.any_of & features:
            return False
        if self.flax_says and self.flax_says not in _flax_message(diff):
            return False
        return diff.kind in self.kinds and (self.stages is None or diff.stage in self.stages)


def _flax_message(diff: Difference) -> str:
    """Flax's side of a difference in raising ('' where Flax did not raise)."""
    if diff.kind == 'raises':
        return diff.detail if diff.detail.startswith('only Flax raises') else ''
    if diff.kind == 'error-type':
        return diff.detail.split(' | ', 1)[0]
    return ''


@functools.cache
def flax_lazy_init_picks_a_cond_branch() -> bool:
    """Whether the installed Flax's ``lazy_init`` returns variables made under an
    ``nn.cond`` whose predicate reads an abstract input.

    Flax 0.12.12 with JAX 0.12 returns the false branch's variables, as linen does;
    Flax 0.12.8 with JAX 0.10 raises ``LazyInitError`` there.
    """
    import flax.linen as fnn
    import jax
    import jax.numpy as jnp
    from flax import errors as flax_errors

    class Branches(fnn.Module):
        @fnn.compact
        def __call__(self, x):
            dense = lambda module, x: fnn.Dense(2, name='branch')(x)
            return fnn.cond(jnp.sum(x) > 0, dense, dense, self, x)

    try:
        Branches().lazy_init(jax.random.key(0), jax.ShapeDtypeStruct((3,), jnp.float32))
    except flax_errors.LazyInitError:
        return False
    return True


@functools.cache
def flax_lazy_init_refuses_custom_vjp() -> bool:
    """Whether the installed Flax's ``lazy_init`` raises for a ``Dense`` made under
    ``nn.custom_vjp`` (Flax 0.12.8, the JAX 0.10 end; 0.12.9 and later return
    ``init``'s variables, as linen does)."""
    import flax.linen as fnn
    import jax
    import jax.numpy as jnp
    from flax import errors as flax_errors

    class Custom(fnn.Module):
        @fnn.compact
        def __call__(self, x):
            def fn(module, x):
                return module(x)

            def fwd(module, x):
                return fnn.vjp(fn, module, x)

            custom = fnn.custom_vjp(fn, forward_fn=fwd, backward_fn=lambda vjp, t: vjp(t))
            return custom(fnn.Dense(2), x)

    try:
        Custom().lazy_init(jax.random.key(0), jax.ShapeDtypeStruct((3,), jnp.float32))
    except flax_errors.LazyInitError:
        return True
    return False


def flax_lazy_init_refuses_a_cond_branch() -> bool:
    """The installed Flax raises there (0.12.8, the JAX 0.10 end): linen does not."""
    return not flax_lazy_init_picks_a_cond_branch()


@functools.cache
def flax_lazy_init_rounds_unlike_its_init() -> bool:
    """Whether the installed Flax's ``lazy_init`` of a scanned, rematerialized ``Dense``
    gives other kernel values than its own ``init`` with the same keys.

    With JAX 0.10 and XLA's backend optimization level 0 (the suite's setting) it does,
    by 1 ulp; linen's ``lazy_init`` returns ``init``'s values. Under JAX 0.12, or XLA's
    default level, the two agree in both libraries.
    """
    import flax.linen as fnn
    import jax
    import jax.numpy as jnp
    import numpy as np

    class Cell(fnn.Module):
        @fnn.compact
        def __call__(self, c, x):
            h = fnn.remat(fnn.Dense)(3)(c + x)
            return h, h

    class Scanned(fnn.Module):
        @fnn.compact
        def __call__(self, x):
            scan = fnn.scan(Cell, variable_axes={'params': 0}, split_rngs={'params': True})
            return scan()(jnp.zeros(x.shape[1:], x.dtype), x)[1]

    x = jnp.ones((2, 3))
    full = Scanned().init(jax.random.key(0), x)
    lazy = Scanned().lazy_init(jax.random.key(0), jax.ShapeDtypeStruct(x.shape, x.dtype))
    leaves = zip(jax.tree_util.tree_leaves(full), jax.tree_util.tree_leaves(lazy))
    return not all(np.array_equal(a, b) for a, b in leaves)


_LIFTED_STAGES = ('apply', 'jit_apply', 'grad', 'method', 'bind')

KNOWN: tuple[KnownFinding, ...] = (
    KnownFinding(
        'D2',
        'Flax 0.12.8 (the JAX 0.10 end) raises LazyInitError when variables are created in '
        'an nn.cond (or nn.switch) branch chosen by an abstract input; linen, as Flax 0.12.9 '
        'and later, returns the branch zeros choose (docs/differences.md)',
        ('lazy_init',),
        ('raises',),
        frozenset(),
        # _6: under jax.disable_jit, branches making different variables (F32's program):
        # Flax 0.12.8 traces both and raises lax.cond's TypeError.
        ('lazy_init_raises_1', 'lazy_init_raises_6'),
        any_of=frozenset({'lift.cond', 'lift.switch'}),
        only_if=flax_lazy_init_refuses_a_cond_branch,
    ),
    KnownFinding(
        'D2',
        'Flax 0.12.8 (the JAX 0.10 end) raises LazyInitError for variables made under '
        'nn.custom_vjp, which do not depend on the input; linen, as Flax 0.12.9 and later, '
        "returns init's variables (docs/differences.md)",
        ('lazy_init',),
        ('raises',),
        frozenset({'lift.custom_vjp'}),
        (),
        only_if=flax_lazy_init_refuses_custom_vjp,
        flax_says='Lazy init encountered a value',
    ),
    KnownFinding(
        'D3',
        "nn.RNN widens the carry it builds to float64 inputs and casts a step's carry back "
        "to the incoming dtype, where Flax's scan stops with a carry TypeError "
        '(docs/differences.md, "Accepted by linen, refused by Flax")',
        None,
        ('raises', 'error-type'),
        frozenset(),
        ('init_raises_7',),
        any_of=frozenset(f'layer.{name}' for name in RECURRENT),
        flax_says='carry input and carry output must have equal types',
    ),
    KnownFinding(
        'D4',
        "under JAX's key reuse checker, Flax raises KeyReuseError for an nn.cond or "
        'nn.switch under nn.vmap (the batched condition runs both branches, each using the '
        "scope's keys in Flax); linen runs branches that draw no key "
        '(docs/differences.md, "Accepted by linen, refused by Flax")',
        None,
        ('raises',),
        frozenset({'lift.vmap'}),
        ('init_raises_9',),
        any_of=frozenset({'lift.cond', 'lift.switch'}),
        flax_says='KeyReuseError',
    ),
    KnownFinding(
        'D5',
        "nn.custom_vjp called a second time under the user's own jax.grad inside a module: "
        "Flax's init hands back leaked tracers as parameters (its stage fails converting "
        'them), linen hands back arrays (docs/differences.md, "Accepted by linen, refused '
        'by Flax")',
        None,
        ('raises',),
        frozenset({'combine.penalty', 'lift.custom_vjp'}),
        ('init_raises_10',),
        flax_says='Tracer',
    ),
    KnownFinding(
        'D8',
        'nn.custom_vjp over a setup-style module, under an outer nn.grad or '
        "nn.value_and_grad: Flax's custom_vjp refuses what its own nn.vjp hands back "
        '(TypeError: the parameter gradients come wrapped in a tuple), linen runs and '
        'gives the values Flax gives for the compact form (docs/differences.md, '
        '"Accepted by linen, refused by Flax")',
        None,
        ('raises',),
        # (the grammar's nn.value_and_grad is lift.grad with value=True)
        frozenset({'lift.custom_vjp', 'custom.setup', 'lift.grad'}),
        ('init_raises_11',),
        flax_says='Custom VJP bwd rule must produce an output with the same container',
    ),
    KnownFinding(
        'D9',
        "under jax.disable_jit, Flax's nn.scan lets the first step create a variable in a "
        'variable_carry collection (lax.scan then runs as a Python loop that checks no '
        'carry structure) and runs; linen raises ScanCarryCreationError, as both libraries '
        'refuse it (a TypeError) with jit on (docs/differences.md, "Smaller differences"; '
        'first seen beside F32, left as it was, then documented)',
        ('init', 'eval_shape', 'lazy_init'),
        ('raises', 'error-type'),
        frozenset({'lift.scan', 'lift.scan.carry_state=True'}),
        ('init_raises_12',),
        settings=frozenset({'jax_disable_jit'}),
    ),
    KnownFinding(
        'D6',
        'nn.jit runs its Python body where linen traces (once per distinct program, one '
        'abstract trace to learn rng paths), not where Flax does: an nn.intercept_methods '
        'interceptor sees the calls inside another number of times, and Flax can reuse a '
        'trace made before capture_intermediates was asked (missing the captures inside) '
        '(docs/differences.md, the jit row of the compatibility table)',
        ('intercept', 'capture'),
        ('structure', 'values'),
        frozenset({'lift.jit'}),
        (),
    ),
    KnownFinding(
        'D7',
        "Flax's SpectralNorm called a second time in an apply that captures intermediates "
        "fails mapping the first call's captured tuple (AttributeError: 'SequenceKey'); "
        'linen runs it (docs/differences.md, "Accepted by linen, refused by Flax")',
        ('capture',),
        ('raises', 'error-type'),
        frozenset({'layer.SpectralNorm'}),
        ('capture_raises_1',),
        # JAX 0.10 names the class 'SequenceKey', JAX 0.12 'jaxlib._jax.pytree.SequenceKey'
        flax_says="SequenceKey' object has no attribute 'key'",
    ),
    KnownFinding(
        'D1',
        'nn.jit keeps the parameters a key gives (docs/differences.md, "nn.jit keeps the '
        'parameters a key gives"); Flax changes them',
        None,
        ('values', 'values-ulp'),
        frozenset({'lift.jit'}),
        (),
    ),
    KnownFinding(
        'F13',
        'nn.jit of a Module with a setup-style submodule field it never calls: Flax '
        "creates the field's variables (its setup runs), linen does not",
        None,
        ('structure',),
        frozenset({'lift.jit'}),
        ('init_structure_1',),
        any_of=frozenset({'clone.setup', 'clone.compact', 'clone.copy'}),
    ),
    KnownFinding(
        'F16',
        'ScopeCollectionNotFound inside nn.map_variables names the scope by its module path '
        "('/c0/body/Map_variablesBatchNorm_0') where Flax names the lifted scopes "
        "('/while_loop(c0)/remat(body)/map_variables(Map_variablesBatchNorm_0)')",
        None,
        ('error-message',),
        frozenset(),
        ('apply_error_message_1', 'init_error_message_1'),
        # SpectralNorm and WeightNorm wrap their layer in nn.map_variables; a lifted
        # transform's variables= filter hides a collection from its body
        any_of=frozenset(
            {'lift.map_variables', 'layer.SpectralNorm', 'layer.WeightNorm'}
            | {
                f'lift.{kind}.filters={value}'
                for kind in ('jit', 'remat', 'cond', 'switch', 'jvp', 'vjp', 'grad')
                for value in (True, 'narrow')
            }
        ),
    ),
    KnownFinding(
        'F19',
        "a warning raised while tracing under nn.jit (SelfAttention's DeprecationWarning) "
        "comes in the stages where linen's nn.jit traces, which need not be Flax's "
        '(docs/differences.md, the `jit` row); whether it shows depends on earlier traces',
        None,
        ('warnings',),
        frozenset({'lift.jit'}),
        (),
    ),
    KnownFinding(
        'F20',
        'lazy_init of a layer under nn.scan (rematerialized, or wrapped in WeightNorm): '
        "Flax's kernel is 1 ulp off its own init's under JAX 0.10; linen's equals init's",
        ('lazy_init',),
        ('values-ulp',),
        frozenset({'lift.scan'}),
        ('lazy_init_values_ulp_1',),
        only_if=flax_lazy_init_rounds_unlike_its_init,
    ),
)


# Problems of the plugin-set fuzzer (plugin_sets.py tags them) -> their finding.
PLUGIN_PROBLEMS: dict[str, str] = {}


def known_finding(diff: Difference, features: set[str]) -> KnownFinding | None:
    for finding in KNOWN:
        if finding.matches(diff, features):
            return finding
    return None


def open_reproducers() -> dict[str, KnownFinding]:
    """Reproducer name -> the open finding it reproduces."""
    return {name: f for f in KNOWN if f.applies() for name in f.reproducers}


__all__ = ['KNOWN', 'PLUGIN_PROBLEMS', 'KnownFinding', 'known_finding', 'open_reproducers']
