import jax
import jax.numpy as jnp
import pytest

from linen.profiling import label_scope
from linen.profiling._hlo import module_path_from_op_name, parse_hlo_module, strip_metadata

# The label paths linen would have pushed for the programs these op_names come from.
LABELS = {
    ('MLP',),
    ('MLP', 'Dense_0'),
    ('MLP', 'Dense_1'),
    ('MLP', 'Block'),
    ('MLP', 'V'),
    ('MLP', 'Inner'),
    ('Dense_0',),
    ('Encoder.encode',),
    ('Encoder.encode', 'proj'),
}


@pytest.mark.parametrize(
    ('op_name', 'path'),
    [
        ('jit(apply)/MLP/Dense_0/dot_general', 'MLP/Dense_0'),
        ('jit(f)/Dense_0/tanh', 'Dense_0'),
        ('jit(f)/jvp(MLP)/Dense_0/dot_general', 'MLP/Dense_0'),
        ('jit(f)/transpose(jvp(MLP))/Dense_0/mul', 'MLP/Dense_0'),
        ('jit(f)/transpose(jvp(MLP))/jvp(MLP)/checkpoint/Dense_1/dot_general', 'MLP/Dense_1'),
        ('jit(f)/jvp(MLP)/while/body/closed_call/Block/tanh', 'MLP/Block'),
        # JAX 0.12 names a scan body eval_jaxpr; a frame no one has named yet works too.
        ('jit(f)/MLP/while/body/eval_jaxpr/Block/tanh', 'MLP/Block'),
        ('jit(f)/MLP/some_future_frame(x)/Block/tanh', 'MLP/Block'),
        ('jit(f)/jvp(MLP)/vmap(V)/dot_general', 'MLP/V'),
        ('jit(f)/MLP/jit(<lambda>)/Inner/add', 'MLP/Inner'),
        ('jit(f)/Encoder.encode/proj/dot_general', 'Encoder.encode/proj'),
        # A name linen never pushed is not a module, even where a label could sit.
        ('jit(f)/user_scope/MLP/Dense_0/add', 'MLP/Dense_0'),
        ('jit(f)/Block/add', ''),
        ('jit(f)/reduce_sum', ''),
        ('x', ''),
        ('', ''),
    ],
)
def test_module_path_from_op_name(op_name, path):
    assert module_path_from_op_name(op_name, LABELS) == path


def test_default_labels_are_the_ones_linen_pushed():
    with label_scope('Pushed_once'):
        with label_scope('Inner'):
            pass
    assert module_path_from_op_name('jit(f)/Pushed_once/Inner/add') == 'Pushed_once/Inner'
    assert module_path_from_op_name('jit(f)/Never_pushed/add') == ''


def _two_layer(x, w1, w2):
    with label_scope('Dense_0'):
        y = jnp.tanh(x @ w1)
    with label_scope('Dense_1'):
        return y @ w2


ARGS = (jnp.ones((4, 8)), jnp.ones((8, 16)), jnp.ones((16, 2)))


def test_parse_hlo_module_finds_entry_fusions_and_labels():
    text = jax.jit(_two_layer).lower(*ARGS).compile().as_text()
    module = parse_hlo_module(text)
    assert module.name == 'jit__two_layer'
    entry = module.computations[module.entry]
    assert entry.is_entry
    opcodes = [instruction.opcode for instruction in entry.instructions.values()]
    assert opcodes.count('parameter') == 3
    paths = {module_path_from_op_name(op) for op in module.op_names().values()}
    assert {'Dense_0', 'Dense_1'} <= paths
    for instruction in entry.instructions.values():
        for called in instruction.called:
            assert called in module.computations
        for operand in instruction.operands:
            assert operand in entry.instructions


def test_parse_reads_tuple_shapes_and_trip_counts():
    def f(x):
        return jax.lax.fori_loop(0, 7, lambda i, c: c * 2.0, x)

    module = parse_hlo_module(jax.jit(f).lower(jnp.ones(3)).compile().as_text())
    loops = [
        instruction
        for computation in module.computations.values()
        for instruction in computation.instructions.values()
        if instruction.opcode == 'while'
    ]
    assert loops, 'expected a while loop in the optimized HLO'
    assert loops[0].shape.startswith('(')
    assert loops[0].trip_count == 7


def test_strip_metadata_removes_labels_only():
    plain = jax.jit(lambda x, w1, w2: jnp.tanh(x @ w1) @ w2).lower(*ARGS).compile().as_text()
    labelled = jax.jit(_two_layer).lower(*ARGS).compile().as_text()
    assert 'Dense_0' in labelled
    assert 'Dense_0' not in strip_metadata(labelled)
    assert 'metadata=' not in strip_metadata(labelled)
    # The module name differs with the function name; the instructions do not.
    body = lambda text: strip_metadata(text).split('\n', 1)[1]
    assert body(plain) == body(labelled)
