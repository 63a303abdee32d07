"""Labels XLA dropped: from the unoptimized program's matmuls, then from neighbours.

The programs are written here in HLO text, so the cases hold on every XLA
version: a matmul rebuilt without its label (the kernel gradient's convolution
on CPU), a layout copy without one, and a remat recomputation merged with its
identical forward matmul that kept the recomputation's label (jaxlib 0.10).
"""

import pytest

from linen.profiling import label_scope
from linen.profiling._costs import costs_from_hlo_text

_DOT = 'lhs_contracting_dims={1}, rhs_contracting_dims={0}'
_GRAD = 'lhs_contracting_dims={0}, rhs_contracting_dims={0}'
FORWARD = 'jit(f)/jvp(Net)/up/dot_general'
RECOMPUTE = 'jit(f)/transpose(jvp(Net))/jvp(Net)/checkpoint/rematted_computation/up/dot_general'
BACKWARD = 'jit(f)/transpose(jvp(Net))/up/dot_general'

# Before optimization: the forward matmul, its recomputation, the kernel gradient.
LOWERED = f"""HloModule jit_f

ENTRY main.1 {{
  x.1 = f32[4,8]{{1,0}} parameter(0), metadata={{op_name="x"}}
  w.1 = f32[8,8]{{1,0}} parameter(1), metadata={{op_name="w"}}
  fwd.1 = f32[4,8]{{1,0}} dot(x.1, w.1), {_DOT}, metadata={{op_name="{FORWARD}"}}
  rec.1 = f32[4,8]{{1,0}} dot(x.1, w.1), {_DOT}, metadata={{op_name="{RECOMPUTE}"}}
  grad.1 = f32[8,8]{{1,0}} dot(x.1, rec.1), {_GRAD}, metadata={{op_name="{BACKWARD}"}}
  ROOT t.1 = (f32[4,8]{{1,0}}, f32[8,8]{{1,0}}) tuple(fwd.1, grad.1)
}}
"""

# After: one matmul for both (under the recomputation's label), the gradient
# rebuilt without a label, and a layout copy of it without one either.
OPTIMIZED = f"""HloModule jit_f, entry_computation_layout={{(f32[4,8]{{1,0}}, f32[8,8]{{1,0}})->(f32[4,8]{{1,0}}, f32[8,8]{{1,0}})}}

ENTRY %main (x: f32[4,8], w: f32[8,8]) -> (f32[4,8], f32[8,8]) {{
  %x = f32[4,8]{{1,0}} parameter(0), metadata={{op_name="x"}}
  %w = f32[8,8]{{1,0}} parameter(1), metadata={{op_name="w"}}
  %both = f32[4,8]{{1,0}} dot(%x, %w), {_DOT}, metadata={{op_name="{RECOMPUTE}"}}
  %grad = f32[8,8]{{1,0}} dot(%x, %both), {_GRAD}
  %copy = f32[8,8]{{0,1}} copy(%grad)
  ROOT %t = (f32[4,8]{{1,0}}, f32[8,8]{{0,1}}) tuple(%both, %copy)
}}
"""

MATMUL = 2 * 4 * 8 * 8  # both matmuls: 4x8 @ 8x8, and 8x4 @ 4x8


@pytest.fixture(autouse=True)
def _labels():
    with label_scope('Net'):
        with label_scope('up'):
            pass


def test_lost_labels_come_back_from_the_unoptimized_program():
    costs = costs_from_hlo_text(OPTIMIZED, lowered_text=LOWERED)
    up = costs['Net/up']
    # The merged matmul runs once: forward work, not recomputation.
    assert (up.forward_flops, up.backward_flops, up.recompute_flops) == (MATMUL, MATMUL, 0)
    assert costs.by_path().get('') is None  # nothing left outside the modules
    # The copy took the gradient's label (its operand): its bytes are backward.
    copy_bytes = 2 * 8 * 8 * 4
    grad_bytes = (4 * 8 + 4 * 8 + 8 * 8) * 4
    assert up.backward_bytes == grad_bytes + copy_bytes


def test_without_the_unoptimized_program_only_neighbours_lend_labels():
    costs = costs_from_hlo_text(OPTIMIZED)
    up = costs['Net/up']
    # What the optimized program alone says: the merged matmul is a
    # recomputation, and the unlabelled gradient takes the label of its nearest
    # labelled neighbour, that same matmul (its users have none). Worse, which
    # is why module_costs and profile pass the unoptimized program.
    assert (up.forward_flops, up.backward_flops, up.recompute_flops) == (0, 0, 2 * MATMUL)
