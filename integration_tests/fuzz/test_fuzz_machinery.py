"""The fuzzer's own parts: they catch what they claim to catch.

A differential fuzzer that never reports anything looks the same as one that is
broken; these tests feed each part a known difference and check it is reported.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from integration_tests.fuzz import grammar, runner
from integration_tests.fuzz.compare import ErrorInfo, Outcome, canonical, compare_outcomes
from integration_tests.fuzz.program import Program, draw_program
from integration_tests.fuzz.shrink import shrink, simplicity


def _kinds(a, b, stage='init'):
    return [d.kind for d in compare_outcomes(stage, Outcome(canonical(a)), Outcome(canonical(b)))]


def test_one_ulp_is_a_difference():
    x = np.float32(1.0)
    assert _kinds({'w': jnp.ones(3)}, {'w': jnp.ones(3)}) == []
    assert _kinds({'w': jnp.ones(3)}, {'w': jnp.ones(3).at[1].set(np.nextafter(x, 2))}) == [
        'values-ulp'
    ]
    assert _kinds({'w': jnp.ones(3)}, {'w': jnp.zeros(3)}) == ['values']


def test_structure_shape_dtype_and_boxes_are_differences():
    import flax.core
    import flax.linen as fnn

    assert _kinds({'a': jnp.ones(2)}, {'b': jnp.ones(2)}) == ['structure'] * 3
    assert _kinds({'a': jnp.ones(2)}, {'a': jnp.ones(3)}) == ['shape-dtype']
    assert _kinds({'a': jnp.ones(2)}, {'a': jnp.ones(2, jnp.int32)}) == ['shape-dtype']
    assert _kinds({'a': 1}, flax.core.freeze({'a': 1})) == ['container-type']
    boxed = fnn.Partitioned(jnp.ones(2), names=('x',))
    assert sorted(_kinds({'a': boxed}, {'a': jnp.ones(2)})) == ['box', 'structure']
    other = fnn.Partitioned(jnp.ones(2), names=('y',))
    assert _kinds({'a': boxed}, {'a': other}) == ['box']
    keys = jax.random.key(0), jax.random.key(1)
    assert _kinds({'k': keys[0]}, {'k': keys[1]}) == ['values']


def test_errors_compare_by_class_family_and_first_sentence():
    import flax.errors

    flax_err = ErrorInfo.of(flax.errors.ScopeParamShapeError('w', '/x', (1,), (2,)))
    same = ErrorInfo(flax_err.name, ('Exception',), False, flax_err.message + ' More help.')
    other = ErrorInfo('ValueError', ('ValueError', 'Exception'), False, flax_err.message)
    reworded = ErrorInfo(flax_err.name, ('Exception',), False, 'Something else.')

    def kinds(a, b):
        return [d.kind for d in compare_outcomes('init', Outcome(error=a), Outcome(error=b))]

    assert kinds(flax_err, same) == []
    assert kinds(flax_err, other) == ['error-type']
    assert kinds(flax_err, reworded) == ['error-message']
    assert kinds(flax_err, None) == ['raises']
    builtin = ErrorInfo.of(TypeError('bad'))
    assert kinds(builtin, ErrorInfo('XError', ('TypeError', 'Exception'), False, 'x')) == []
    assert kinds(builtin, ErrorInfo('XError', ('ValueError', 'Exception'), False, 'x')) == [
        'error-type'
    ]


def _program(rng_seed: str) -> Program:
    return draw_program(random.Random(rng_seed), rng_seed)


def test_generated_programs_render_and_define_under_both_libraries():
    for i in range(30):
        program = _program(f'machinery:{i}')
        source = program.source()
        compile(source, 'generated', 'exec')
        assert runner.library_source(source, 'linen').count('import linen.nn as nn') == 1


def test_a_broken_linen_is_caught_and_shrunk(monkeypatch):
    # linen "breaks": its copy of the program initialises Dense kernels differently.
    original = runner.library_source

    def broken(source, library):
        out = original(source, library)
        if library == 'linen':
            out = out.replace(
                'nn.Dense(FEATURES', 'nn.Dense(FEATURES, kernel_init=nn.initializers.ones'
            )
        return out

    monkeypatch.setattr(runner, 'library_source', broken)
    inner = grammar.Container('compact', (grammar.Child(grammar.Leaf('LayerNorm')),
                                          grammar.Child(grammar.Leaf('Dense'))))  # fmt: skip
    program = Program(
        grammar.Container(
            'setup',
            (grammar.Child(inner, storage='list'), grammar.Child(grammar.Custom(('param', 'sow')))),
        ),  # fmt: skip
        rank=2,
    )
    diffs = runner.differences(program.source())
    assert ('init', 'values') in [d.signature() for d in diffs]
    small = shrink(program, ('init', 'values'), budget_s=120)
    assert simplicity(small) < simplicity(program)
    assert small.root == grammar.Leaf('Dense')


def test_known_findings_name_features_the_generator_writes():
    # A misspelt feature in known.py would make its finding match nothing, silently.
    from integration_tests.fuzz.campaign import program_for
    from integration_tests.fuzz.known import KNOWN

    # Drawing is cheap (about 0.1 ms a program); the rarest leaves (the rank-3-only
    # Bidirectional variants) need several thousand draws to show.
    seen: set[str] = set()
    for i in range(10000):
        seen |= program_for('vocabulary', i).features()
    for finding in KNOWN:
        named = set(finding.features or ()) | set(finding.any_of)
        assert named <= seen, f'{finding.id} names features never generated: {named - seen}'
        if finding.any_of:
            assert finding.any_of & seen


def test_a_finding_of_a_jax_setting_matches_only_under_it():
    # D9 shows only under jax.disable_jit; with jit on, the same difference is new.
    from integration_tests.fuzz.compare import Difference
    from integration_tests.fuzz.known import known_finding
    from integration_tests.oracle import jax_settings

    diff = Difference('init', 'raises', 'only linen raises ScanCarryCreationError: ...')
    features = {'lift.scan', 'lift.scan.carry_state=True', 'custom.variable'}
    with jax_settings({'jax_disable_jit': True}):
        found = known_finding(diff, features)
    assert found is not None and found.id == 'D9'
    with jax_settings({'jax_disable_jit': False}):
        assert known_finding(diff, features) is None


def _flax_init_error(program: Program) -> str | None:
    outcomes = runner.execute(program.source(), 'flax', ('init',))
    error = outcomes['init'].error
    return None if error is None else error.name


def test_branching_vmap_and_scan_variants_are_programs_flax_runs():
    # Each new variant of the lifted node is a valid Flax program, except a branch
    # making other variables than its siblings, which Flax refuses (a TypeError).
    from integration_tests.fuzz.lifted import Lifted

    Leaf = grammar.Leaf
    accepted = [
        Program(Lifted('switch', Leaf('Dense'), (('index', 'raw'),)), 2),
        Program(Lifted('switch', Leaf('BatchNormTrain'), (), Leaf('BatchNormEval')), 2),
        Program(Lifted('vmap', Leaf('BiCarryLSTM')), 3),
        Program(Lifted('vmap', Leaf('BatchNormAxisTwice'), (('axis_name', True),)), 2),
        Program(Lifted('scan', Leaf('Dense'), (('ids', 'attend'), ('cell', 'setup'))), 2),
    ]
    for program in accepted:
        assert _flax_init_error(program) is None, program.source()
    rejected = Program(Lifted('cond', Leaf('EmbedArgmax'), (), Leaf('EmbedClip')), 2)
    assert _flax_init_error(rejected) == 'TypeError'


def test_new_nodes_shrink_to_the_wrapped_node_and_plainer_variants():
    from integration_tests.fuzz.lifted import Lifted

    Leaf = grammar.Leaf
    switch = Lifted('switch', Leaf('EmbedClip'), (('index', 'raw'),), Leaf('EmbedSetup'))
    shrinks = list(switch.shrinks())
    assert Leaf('EmbedClip') in shrinks
    assert Lifted('switch', Leaf('EmbedClip'), (('index', 'raw'),)) in shrinks
    assert Lifted('cond', Leaf('EmbedClip'), (), Leaf('EmbedSetup')) in shrinks
    assert Lifted('switch', Leaf('EmbedArgmax'), (('index', 'raw'),), Leaf('EmbedSetup')) in shrinks
    axis = Lifted('vmap', Leaf('BatchNormAxisTwice'), (('axis_name', True),))
    assert Lifted('vmap', Leaf('BatchNormAxis'), (('axis_name', True),)) in list(axis.shrinks())
    assert Leaf('BatchNorm') in list(Leaf('BatchNormAxis').shrinks())
    scan = Lifted('scan', Leaf('Dense'), (('ids', 'attend'),))
    assert Lifted('scan', Leaf('Dense')) in list(scan.shrinks())


def test_axis_name_batch_norms_are_drawn_only_below_a_vmap_naming_the_axis():
    from integration_tests.fuzz.campaign import program_for
    from integration_tests.fuzz.lifted import Lifted

    def check(node: grammar.Node, named: bool) -> None:
        if isinstance(node, grammar.Leaf):
            assert named or node.layer not in grammar.AXIS_BATCH_NORMS
        if isinstance(node, Lifted) and node.kind == 'vmap':
            named = named or bool(node.options()['axis_name'])
        for kid in node.kids():
            check(kid, named)

    drawn = 0
    for i in range(600):
        program = program_for('axis-names', i)
        check(program.root, False)
        drawn += any(f.startswith('layer.BatchNormAxis') for f in program.features())
    assert drawn


def test_a_written_reproducer_holds_the_program_as_ruff_formats_it(tmp_path):
    from integration_tests.fuzz.reproduce import load, write_reproducer

    (diff,) = compare_outcomes(
        'init', Outcome(canonical({'w': jnp.ones(3)})), Outcome(canonical({'w': jnp.zeros(3)}))
    )
    source = 'a = """x"""\nb = \'\'\'y\'\'\'\nc = "\\\\n"\nd = 1\n'
    path = write_reproducer('init/values/x', diff, source, 'seed t, program 0', tmp_path)
    assert 'SOURCE = """\\\n' in path.read_text()  # the quotes `ruff format` writes
    assert load(path)['SOURCE'] == source


def test_a_reproducer_written_in_64_bit_mode_runs_in_it(tmp_path):
    from integration_tests.fuzz.reproduce import load, remaining, write_reproducer

    source = 'import jax.numpy as jnp\nX = jnp.zeros(2)\n'
    (diff,) = compare_outcomes(
        'init', Outcome(canonical({'w': jnp.ones(3)})), Outcome(canonical({'w': jnp.zeros(3)}))
    )
    plain = load(write_reproducer('init/values/x', diff, source, 'seed t', tmp_path))
    with jax.enable_x64(True):
        wide = load(write_reproducer('init/values/x', diff, source, 'seed t', tmp_path))
    assert 'SETTINGS' not in plain and wide['SETTINGS'] == {'jax_enable_x64': True}
    # D3's reproducer shows its difference only in that mode.
    seven = load(Path(__file__).parent / 'reproducers' / 'init_raises_7.py')
    assert remaining(seven)
    assert not remaining({**seven, 'SETTINGS': {}})


def test_dict_field_children_under_a_vmap_run_alike_in_flax_and_linen():
    """A container's ``fdict`` children sit in one dict field, which Module assignment
    freezes (in Flax and linen alike); under a lifted transform the grammar found F28."""
    from integration_tests.fuzz.lifted import Lifted

    Leaf = grammar.Leaf
    block = grammar.Container(
        'compact',
        (grammar.Child(Leaf('Dense'), storage='fdict'),
         grammar.Child(grammar.Custom(('variable',)), storage='fdict')),
    )  # fmt: skip
    program = Program(Lifted('vmap', block), 2)
    source = program.source()
    assert '    subs: dict' in source and "self.subs['k0']" in source
    assert {'children.fdict', 'lift.vmap'} <= program.features()
    assert runner.differences(source) == []


def test_lifted_derivatives_and_new_options_are_programs_both_libraries_run_alike():
    # Each lifted derivative and each option added with them renders a program Flax
    # runs, and linen's outcomes equal Flax's at every stage (D1 aside: nn.jit's keys).
    from integration_tests.fuzz.known import known_finding
    from integration_tests.fuzz.lifted import Lifted

    Leaf = grammar.Leaf
    programs = [
        Program(Lifted('jvp', Leaf('Dense'), (('var_tangents', True),)), 2),
        Program(Lifted('vjp', Leaf('LayerNorm'), (('sow_grads', True),)), 2),
        Program(Lifted('grad', Leaf('Dense'), (('value', True),)), 2),
        Program(Lifted('grad', Leaf('Dense')), 2),
        Program(Lifted('custom_vjp', Leaf('Dense'), (('scale', True),)), 2),
        Program(
            Lifted('remat', Leaf('Dense'), (('policy', 'nothing_saveable'), ('static_flag', True))),
            2,
        ),  # fmt: skip
        Program(Lifted('jit', Leaf('Dense'), (('static_flag', False),)), 2),
        Program(Lifted('scan', Leaf('Dense'), (('reverse', True), ('unroll', 2))), 2),
    ]
    for program in programs:
        source = program.source()
        assert _flax_init_error(program) is None, source
        unknown = [
            d for d in runner.differences(source) if known_finding(d, program.features()) is None
        ]
        assert not unknown, (unknown, source)
