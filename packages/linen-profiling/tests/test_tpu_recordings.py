"""Costs and traces of programs that ran on a TPU, whose HLO and traces differ from a CPU's.

The suite compiles for the CPU; these are recordings. The HLO texts below were printed
by ``jax.jit(f).lower(...).compile().as_text()`` on a TPU v5e (JAX 0.10.2, libtpu of that
release), trimmed of their file tables and backend configs. Two differences from a CPU program matter to ``module_costs``: a TPU ``while``
carries no ``known_trip_count`` (the count is read off the loop), and XLA keeps a
max-pool's gradient as one ``select-and-scatter`` (the CPU compiler expands it), whose
computations are named by ``select=`` and ``scatter=``.

``data/tpu_v5e_tanh_matmul.*`` is a profiler trace (``jax.profiler.trace``, three
calls) of ``jax.jit(lambda x: jnp.tanh(x @ x).sum())`` at ``x: f32[256, 256]`` on the
same machine, with that program's optimized HLO. A TPU trace names each op event
by its instruction's HLO text, carries no ``hlo_module`` stat, and puts the
program's runs on an ``XLA Modules`` line; asynchronous copies also get spans on
an ``Async XLA Ops`` line. ``data/tpu_v5e_linen_mlp.*`` is ``linen.profiling.profile``'s
trace (three steps) of ``jax.jit(model.apply)`` for a linen MLP, ``Dense(512,
name='hidden')``, relu, ``Dense(128, name='out')`` at ``x: f32[256, 256]``, with the
optimized and the lowered HLO of the program it ran.
"""

from pathlib import Path

import pytest

from linen.profiling import label_scope
from linen.profiling._costs import costs_from_hlo_text
from linen.profiling._hlo import parse_hlo_module, while_trip_count
from linen.profiling._trace import times_from_xspace
from linen.profiling.errors import ProfileNoDeviceOpsError

DATA = Path(__file__).parent / 'data'

# jax.lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 3, c[1] * 2), (1, x)), x: f32[3]
WHILE_FROM_1_BY_3_BELOW_10 = """\
%fused_computation.clone.1 (param_0.2: f32[3]) -> f32[3] {
  %param_0.2 = f32[3]{0:T(128)S(1)} parameter(0)
  %constant.10 = f32[]{:T(128)} constant(2)
  %broadcast.3 = f32[3]{0:T(128)} broadcast(%constant.10), dimensions={}
  ROOT %mul.3 = f32[3]{0:T(128)S(1)} multiply(%param_0.2, %broadcast.3), metadata={op_name="jit(<lambda>)/while/body/mul"}
}
%wide.region_0.1.sunk (wide.arg_tuple.0: (s32[], f32[3], s32[])) -> (s32[], f32[3], s32[]) {
  %constant.1..sunk = s32[]{:T(128)} constant(3)
  %wide.arg_tuple.0 = (s32[]{:T(128)}, f32[3]{0:T(128)S(1)}, s32[]{:T(128)}) parameter(0)
  %get-tuple-element.24 = s32[]{:T(128)} get-tuple-element(%wide.arg_tuple.0), index=0
  %add.2 = s32[]{:T(128)} add(%get-tuple-element.24, %constant.1..sunk), metadata={op_name="jit(<lambda>)/while/body/add"}
  %get-tuple-element.29 = s32[]{:T(128)} get-tuple-element(%wide.arg_tuple.0), index=2
  %get-tuple-element.25 = f32[3]{0:T(128)S(1)} get-tuple-element(%wide.arg_tuple.0), index=1
  %broadcast_multiply_fusion.2 = f32[3]{0:T(128)S(1)} fusion(%get-tuple-element.25), kind=kLoop, calls=%fused_computation.clone.1, metadata={op_name="jit(<lambda>)/while/body/mul"}
  ROOT %tuple.12 = (s32[]{:T(128)}, f32[3]{0:T(128)S(1)}, s32[]{:T(128)}) tuple(%add.2, %broadcast_multiply_fusion.2, %get-tuple-element.29)
}
%wide.region_1.2 (wide.arg_tuple.3: (s32[], f32[3], s32[])) -> pred[] {
  %constant.5 = s32[]{:T(128)} constant(10)
  %wide.arg_tuple.3 = (s32[]{:T(128)}, f32[3]{0:T(128)S(1)}, s32[]{:T(128)}) parameter(0)
  %get-tuple-element.10 = s32[]{:T(128)} get-tuple-element(%wide.arg_tuple.3), index=0
  ROOT %lt.0 = pred[]{:T(512)} compare(%get-tuple-element.10, %constant.5), direction=LT, metadata={op_name="jit(<lambda>)/while/cond/lt"}
}
ENTRY %main.3 (x.1: f32[3]) -> (s32[], f32[3]) {
  %constant.7 = s32[]{:T(128)} constant(1)
  %constant.1 = s32[]{:T(128)} constant(3)
  %x.1 = f32[3]{0:T(128)} parameter(0), metadata={op_name="x"}
  %copy-start.1 = (f32[3]{0:T(128)S(1)}, f32[3]{0:T(128)}, u32[]{:S(2)}) copy-start(%x.1)
  %copy.9 = s32[]{:T(128)} copy(%constant.7)
  %copy-done.1 = f32[3]{0:T(128)S(1)} copy-done(%copy-start.1)
  %tuple.13 = (s32[]{:T(128)}, f32[3]{0:T(128)S(1)}, s32[]{:T(128)}) tuple(%copy.9, %copy-done.1, %constant.1)
  %while = (s32[]{:T(128)}, f32[3]{0:T(128)S(1)}, s32[]{:T(128)}) while(%tuple.13), condition=%wide.region_1.2, body=%wide.region_0.1.sunk, metadata={op_name="jit(<lambda>)/while"}
  %get-tuple-element.18 = f32[3]{0:T(128)S(1)} get-tuple-element(%while), index=1
  %copy-start = (f32[3]{0:T(128)}, f32[3]{0:T(128)S(1)}, u32[]{:S(2)}) copy-start(%get-tuple-element.18)
  %get-tuple-element.17 = s32[]{:T(128)} get-tuple-element(%while), index=0
  %copy-done = f32[3]{0:T(128)} copy-done(%copy-start)
  ROOT %tuple.8 = (s32[]{:T(128)}, f32[3]{0:T(128)}) tuple(%get-tuple-element.17, %copy-done)
}
"""

# jax.lax.fori_loop(0, n, lambda i, c: c * 2.0, x) with n an argument.
FORI_TO_AN_ARGUMENT = """\
%fused_computation.clone.1 (param_0.2: f32[3]) -> f32[3] {
  %param_0.2 = f32[3]{0:T(128)S(1)} parameter(0)
  %constant.8 = f32[]{:T(128)} constant(2)
  %broadcast.3 = f32[3]{0:T(128)} broadcast(%constant.8), dimensions={}
  ROOT %mul.3 = f32[3]{0:T(128)S(1)} multiply(%param_0.2, %broadcast.3), metadata={op_name="jit(<lambda>)/while/body/mul"}
}
%wide.region_0.1.sunk (wide.arg_tuple.0: (s32[], f32[3], s32[], s32[])) -> (s32[], f32[3], s32[], s32[]) {
  %constant.1..sunk = s32[]{:T(128)} constant(1)
  %wide.arg_tuple.0 = (s32[]{:T(128)}, f32[3]{0:T(128)S(1)}, s32[]{:T(128)}, s32[]{:T(128)}) parameter(0)
  %get-tuple-element.36 = s32[]{:T(128)} get-tuple-element(%wide.arg_tuple.0), index=0
  %add.2 = s32[]{:T(128)} add(%get-tuple-element.36, %constant.1..sunk), metadata={op_name="jit(<lambda>)/while/body/add"}
  %get-tuple-element.42 = s32[]{:T(128)} get-tuple-element(%wide.arg_tuple.0), index=2
  %get-tuple-element.43 = s32[]{:T(128)} get-tuple-element(%wide.arg_tuple.0), index=3
  %get-tuple-element.37 = f32[3]{0:T(128)S(1)} get-tuple-element(%wide.arg_tuple.0), index=1
  %broadcast_multiply_fusion.2 = f32[3]{0:T(128)S(1)} fusion(%get-tuple-element.37), kind=kLoop, calls=%fused_computation.clone.1, metadata={op_name="jit(<lambda>)/while/body/mul"}
  ROOT %tuple.11 = (s32[]{:T(128)}, f32[3]{0:T(128)S(1)}, s32[]{:T(128)}, s32[]{:T(128)}) tuple(%add.2, %broadcast_multiply_fusion.2, %get-tuple-element.42, %get-tuple-element.43)
}
%wide.region_1.2 (wide.arg_tuple.3: (s32[], f32[3], s32[], s32[])) -> pred[] {
  %wide.arg_tuple.3 = (s32[]{:T(128)}, f32[3]{0:T(128)S(1)}, s32[]{:T(128)}, s32[]{:T(128)}) parameter(0)
  %get-tuple-element.16 = s32[]{:T(128)} get-tuple-element(%wide.arg_tuple.3), index=2
  %get-tuple-element.15 = s32[]{:T(128)} get-tuple-element(%wide.arg_tuple.3), index=0
  ROOT %lt.0 = pred[]{:T(512)} compare(%get-tuple-element.15, %get-tuple-element.16), direction=LT, metadata={op_name="jit(<lambda>)/while/cond/lt"}
}
ENTRY %main.3 (x.1: f32[3], n.1: s32[]) -> f32[3] {
  %constant.5 = s32[]{:T(128)} constant(0)
  %constant.1 = s32[]{:T(128)} constant(1)
  %n.1 = s32[]{:T(128)} parameter(1), metadata={op_name="n"}
  %x.1 = f32[3]{0:T(128)} parameter(0), metadata={op_name="x"}
  %copy-start.1 = (f32[3]{0:T(128)S(1)}, f32[3]{0:T(128)}, u32[]{:S(2)}) copy-start(%x.1)
  %copy.9 = s32[]{:T(128)} copy(%constant.5)
  %copy-done.1 = f32[3]{0:T(128)S(1)} copy-done(%copy-start.1)
  %tuple.13 = (s32[]{:T(128)}, f32[3]{0:T(128)S(1)}, s32[]{:T(128)}, s32[]{:T(128)}) tuple(%copy.9, %copy-done.1, %n.1, %constant.1)
  %while = (s32[]{:T(128)}, f32[3]{0:T(128)S(1)}, s32[]{:T(128)}, s32[]{:T(128)}) while(%tuple.13), condition=%wide.region_1.2, body=%wide.region_0.1.sunk, metadata={op_name="jit(<lambda>)/while"}
  %get-tuple-element.44 = f32[3]{0:T(128)S(1)} get-tuple-element(%while), index=1
  %copy-start = (f32[3]{0:T(128)}, f32[3]{0:T(128)S(1)}, u32[]{:S(2)}) copy-start(%get-tuple-element.44)
  ROOT %copy-done = f32[3]{0:T(128)} copy-done(%copy-start)
}
"""

# jax.grad(lambda x: nn.max_pool(x, (2, 2), (2, 2)).sum()) at x: f32[2, 8, 8, 4].
MAX_POOL_GRAD = """\
%region_0.1 (select_and_scatter.2: f32[], select_and_scatter.3: f32[]) -> pred[] {
  %select_and_scatter.3 = f32[]{:T(128)} parameter(1), metadata={op_name="select_and_scatter"}
  %select_and_scatter.2 = f32[]{:T(128)} parameter(0), metadata={op_name="select_and_scatter"}
  ROOT %ge.1 = pred[]{:T(512)} compare(%select_and_scatter.2, %select_and_scatter.3), direction=GE, metadata={op_name="jit(pool)/transpose(jvp())/ge"}
}
%region_1.2 (select_and_scatter.6: f32[], select_and_scatter.7: f32[]) -> f32[] {
  %select_and_scatter.7 = f32[]{:T(128)} parameter(1), metadata={op_name="select_and_scatter"}
  %select_and_scatter.6 = f32[]{:T(128)} parameter(0), metadata={op_name="select_and_scatter"}
  ROOT %add.1 = f32[]{:T(128)} add(%select_and_scatter.6, %select_and_scatter.7), metadata={op_name="jit(pool)/transpose(jvp())/add"}
}
ENTRY %main.3 (x.1: f32[2,8,8,4]) -> f32[2,8,8,4] {
  %constant.2 = f32[]{:T(128)} constant(0)
  %constant.3 = f32[]{:T(128)} constant(1)
  %x.1 = f32[2,8,8,4]{2,3,1,0:T(4,128)} parameter(0), metadata={op_name="x"}
  %copy = f32[2,8,8,4]{3,0,2,1:T(2,128)S(1)} copy(%x.1), metadata={op_name="x"}
  %broadcast_in_dim.1 = f32[2,4,4,4]{3,0,2,1:T(2,128)S(1)} broadcast(%constant.3), dimensions={}, metadata={op_name="jit(pool)/transpose(jvp())/broadcast_in_dim"}
  %select_and_scatter.9 = f32[2,8,8,4]{3,0,2,1:T(2,128)S(1)} select-and-scatter(%copy, %broadcast_in_dim.1, %constant.2), window={size=1x2x2x1 stride=1x2x2x1}, select=%region_0.1, scatter=%region_1.2, metadata={op_name="jit(pool)/transpose(jvp())/select_and_scatter"}
  ROOT %copy.1 = f32[2,8,8,4]{2,3,1,0:T(4,128)} copy(%select_and_scatter.9), metadata={op_name="jit(pool)/transpose(jvp())/select_and_scatter"}
}
"""


# A linen nn.scan of a Dense(16) cell over 9 steps (variable_broadcast='params'), at a
# (4, 16) carry: the body's counter goes through a copy (to the TPU's scalar memory)
# before it is incremented, and the Dense's dot became a convolution.
NN_SCAN_9_STEPS = """\
%bitcast_fusion.clone.1 (bitcast_input.5: f32[4,16]) -> f32[4,16] {
  %bitcast_input.5 = f32[4,16]{1,0:T(4,128)S(1)} parameter(0)
  ROOT %bitcast.8 = f32[4,16]{1,0:T(4,128)} bitcast(%bitcast_input.5)
}
%bitcast_fusion.1.clone.1 (bitcast_input.4: bf16[16,16]) -> bf16[16,16] {
  %bitcast_input.4 = bf16[16,16]{1,0:T(8,128)(2,1)S(1)} parameter(0)
  ROOT %bitcast.7 = bf16[16,16]{1,0:T(8,128)(2,1)} bitcast(%bitcast_input.4)
}
%fused_computation.clone.1 (param_0.8: f32[4,16], param_1.10: bf16[16,16], param_2.7: f32[9,4,16], param_3.4: s32[], param_4.4: f32[16]) -> f32[4,16] {
  %param_0.8 = f32[4,16]{1,0:T(4,128)S(1)} parameter(0)
  %fusion.4 = f32[4,16]{1,0:T(4,128)} fusion(%param_0.8), kind=kLoop, calls=%bitcast_fusion.clone.1
  %param_1.10 = bf16[16,16]{1,0:T(8,128)(2,1)S(1)} parameter(1)
  %fusion.5 = bf16[16,16]{1,0:T(8,128)(2,1)} fusion(%param_1.10), kind=kLoop, calls=%bitcast_fusion.1.clone.1
  %convolution.5 = f32[4,16]{1,0:T(4,128)} convolution(%fusion.4, %fusion.5), dim_labels=bf_io->bf, metadata={op_name="jit(<lambda>)/S/while/body/closed_call/ScanCell_0/Dense_0/dot_general"}
  %param_4.4 = f32[16]{0:T(128)S(1)} parameter(4)
  %add.22 = f32[4,16]{1,0:T(4,128)} broadcast(%param_4.4), dimensions={1}, metadata={op_name="jit(<lambda>)/S/while/body/closed_call/ScanCell_0/Dense_0/add"}
  %add.21 = f32[4,16]{1,0:T(4,128)} add(%convolution.5, %add.22), metadata={op_name="jit(<lambda>)/S/while/body/closed_call/ScanCell_0/Dense_0/add"}
  %param_2.7 = f32[9,4,16]{2,1,0:T(4,128)} parameter(2)
  %param_3.4 = s32[]{:T(128)S(6)} parameter(3)
  %constant.12 = s32[]{:T(128)} constant(0), metadata={op_name="jit(<lambda>)/S/while/body/jit(dynamic_index_in_dim)"}
  %dynamic_slice.4 = f32[1,4,16]{2,1,0:T(4,128)} dynamic-slice(%param_2.7, %param_3.4, %constant.12, %constant.12), dynamic_slice_sizes={1,4,16}, metadata={op_name="jit(<lambda>)/S/while/body/jit(dynamic_index_in_dim)/dynamic_slice"}
  %bitcast.9 = f32[4,16]{1,0:T(4,128)} bitcast(%dynamic_slice.4), metadata={op_name="jit(<lambda>)/S/while/body/jit(dynamic_index_in_dim)/squeeze"}
  ROOT %add.20 = f32[4,16]{1,0:T(4,128)S(1)} add(%add.21, %bitcast.9), metadata={op_name="jit(<lambda>)/S/while/body/closed_call/ScanCell_0/add"}
}
%wide.region_0.3.sunk (wide.arg_tuple.0: (s32[], f32[4,16], f32[9,4,16], bf16[16,16], f32[16], /*index=5*/s32[])) -> (s32[], f32[4,16], f32[9,4,16], bf16[16,16], f32[16], /*index=5*/s32[]) {
  %constant.5..sunk = s32[]{:T(128)} constant(1)
  %wide.arg_tuple.0 = (s32[]{:T(128)}, f32[4,16]{1,0:T(4,128)S(1)}, f32[9,4,16]{2,1,0:T(4,128)}, bf16[16,16]{1,0:T(8,128)(2,1)S(1)}, f32[16]{0:T(128)S(1)}, /*index=5*/s32[]{:T(128)}) parameter(0)
  %get-tuple-element.57 = s32[]{:T(128)} get-tuple-element(%wide.arg_tuple.0), index=0
  %copy.2 = s32[]{:T(128)S(6)} copy(%get-tuple-element.57)
  %add.23 = s32[]{:T(128)} add(%copy.2, %constant.5..sunk), metadata={op_name="jit(<lambda>)/S/while/body/add"}
  %get-tuple-element.68 = s32[]{:T(128)} get-tuple-element(%wide.arg_tuple.0), index=5
  %get-tuple-element.65 = f32[9,4,16]{2,1,0:T(4,128)} get-tuple-element(%wide.arg_tuple.0), index=2
  %get-tuple-element.66 = bf16[16,16]{1,0:T(8,128)(2,1)S(1)} get-tuple-element(%wide.arg_tuple.0), index=3
  %get-tuple-element.67 = f32[16]{0:T(128)S(1)} get-tuple-element(%wide.arg_tuple.0), index=4
  %get-tuple-element.58 = f32[4,16]{1,0:T(4,128)S(1)} get-tuple-element(%wide.arg_tuple.0), index=1
  %copy.11 = f32[4,16]{1,0:T(4,128)S(1)} copy(%get-tuple-element.58)
  %bitcast_add_fusion.2 = f32[4,16]{1,0:T(4,128)S(1)} fusion(%copy.11, %get-tuple-element.66, %get-tuple-element.65, %copy.2, %get-tuple-element.67), kind=kOutput, calls=%fused_computation.clone.1, metadata={op_name="jit(<lambda>)/S/while/body/closed_call/ScanCell_0/Dense_0/dot_general"}
  ROOT %tuple.11 = (s32[]{:T(128)}, f32[4,16]{1,0:T(4,128)S(1)}, f32[9,4,16]{2,1,0:T(4,128)}, bf16[16,16]{1,0:T(8,128)(2,1)S(1)}, f32[16]{0:T(128)S(1)}, /*index=5*/s32[]{:T(128)}) tuple(%add.23, %bitcast_add_fusion.2, %get-tuple-element.65, %get-tuple-element.66, %get-tuple-element.67, /*index=5*/%get-tuple-element.68)
}
%wide.region_1.4 (wide.arg_tuple.3: (s32[], f32[4,16], f32[9,4,16], bf16[16,16], f32[16], /*index=5*/s32[])) -> pred[] {
  %constant.9 = s32[]{:T(128)} constant(9)
  %wide.arg_tuple.3 = (s32[]{:T(128)}, f32[4,16]{1,0:T(4,128)S(1)}, f32[9,4,16]{2,1,0:T(4,128)}, bf16[16,16]{1,0:T(8,128)(2,1)S(1)}, f32[16]{0:T(128)S(1)}, /*index=5*/s32[]{:T(128)}) parameter(0)
  %get-tuple-element.25 = s32[]{:T(128)} get-tuple-element(%wide.arg_tuple.3), index=0
  ROOT %lt.0 = pred[]{:T(512)} compare(%get-tuple-element.25, %constant.9), direction=LT, metadata={op_name="jit(<lambda>)/S/while/cond/lt"}
}
ENTRY %main.5 (v__params____ScanCell_0____Dense_0____bias__.1: f32[16], v__params____ScanCell_0____Dense_0____kernel__.1: f32[16,16], c.1: f32[4,16], xs.1: f32[9,4,16]) -> f32[4,16] {
  %constant.7 = s32[]{:T(128)} constant(0)
  %constant.5 = s32[]{:T(128)} constant(1)
  %v__params____ScanCell_0____Dense_0____bias__.1 = f32[16]{0:T(128)} parameter(0), metadata={op_name="v[\'params\'][\'ScanCell_0\'][\'Dense_0\'][\'bias\']"}
  %v__params____ScanCell_0____Dense_0____kernel__.1 = f32[16,16]{1,0:T(8,128)} parameter(1), metadata={op_name="v[\'params\'][\'ScanCell_0\'][\'Dense_0\'][\'kernel\']"}
  %c.1 = f32[4,16]{1,0:T(4,128)} parameter(2), metadata={op_name="c"}
  %xs.1 = f32[9,4,16]{2,1,0:T(4,128)} parameter(3), metadata={op_name="xs"}
  %copy.10 = s32[]{:T(128)} copy(%constant.7)
  %copy-start.1 = (f32[4,16]{1,0:T(4,128)S(1)}, f32[4,16]{1,0:T(4,128)}, u32[]{:S(2)}) copy-start(%c.1)
  %copy-start.2 = (f32[16]{0:T(128)S(1)}, f32[16]{0:T(128)}, u32[]{:S(2)}) copy-start(%v__params____ScanCell_0____Dense_0____bias__.1)
  %convert.2 = bf16[16,16]{1,0:T(8,128)(2,1)S(1)} convert(%v__params____ScanCell_0____Dense_0____kernel__.1)
  %copy-done.1 = f32[4,16]{1,0:T(4,128)S(1)} copy-done(%copy-start.1)
  %copy-done.2 = f32[16]{0:T(128)S(1)} copy-done(%copy-start.2)
  %tuple.14 = (s32[]{:T(128)}, f32[4,16]{1,0:T(4,128)S(1)}, f32[9,4,16]{2,1,0:T(4,128)}, bf16[16,16]{1,0:T(8,128)(2,1)S(1)}, f32[16]{0:T(128)S(1)}, /*index=5*/s32[]{:T(128)}) tuple(%copy.10, %copy-done.1, %xs.1, %convert.2, %copy-done.2, /*index=5*/%constant.5)
  %while = (s32[]{:T(128)}, f32[4,16]{1,0:T(4,128)S(1)}, f32[9,4,16]{2,1,0:T(4,128)}, bf16[16,16]{1,0:T(8,128)(2,1)S(1)}, f32[16]{0:T(128)S(1)}, /*index=5*/s32[]{:T(128)}) while(%tuple.14), condition=%wide.region_1.4, body=%wide.region_0.3.sunk, metadata={op_name="jit(<lambda>)/S/while"}
  %get-tuple-element.69 = f32[4,16]{1,0:T(4,128)S(1)} get-tuple-element(%while), index=1
  %copy-start = (f32[4,16]{1,0:T(4,128)}, f32[4,16]{1,0:T(4,128)S(1)}, u32[]{:S(2)}) copy-start(%get-tuple-element.69)
  ROOT %copy-done = f32[4,16]{1,0:T(4,128)} copy-done(%copy-start)
}
"""


def _loop_trips(text):
    module = parse_hlo_module(text)
    entry = module.computations[module.entry]
    return while_trip_count(module, entry, entry.instructions['while'])


def test_a_tpu_loop_without_known_trip_count_is_counted_from_its_bounds():
    assert _loop_trips(WHILE_FROM_1_BY_3_BELOW_10) == 3  # c[0] = 1, 4, 7
    costs = costs_from_hlo_text(WHILE_FROM_1_BY_3_BELOW_10)
    by_name = {cost.instruction: cost for cost in costs.instructions}
    assert by_name['mul.3'].flops == 3 * 3  # f32[3] * 2, three iterations
    assert by_name['add.2'].flops == 3  # the counter's increment, once an iteration


@pytest.mark.parametrize(
    ('edit', 'trips'),
    [
        ({}, 3),
        ({'direction=LT': 'direction=LE'}, 4),  # 1, 4, 7, 10
        ({'constant(10)': 'constant(1)'}, 0),  # 1 < 1 never holds
        # 10 > c[0] is c[0] < 10.
        (
            {
                'compare(%get-tuple-element.10, %constant.5), direction=LT': 'compare(%constant.5, %get-tuple-element.10), direction=GT'
            },
            3,
        ),
        ({'direction=LT': 'direction=NE'}, 3),  # 1, 4, 7, then 10 stops it
        ({'direction=LT': 'direction=NE', 'constant(10)': 'constant(12)'}, None),  # never 12
        ({'direction=LT': 'direction=NE', 'constant(10)': 'constant(13)'}, 4),  # ..., 10, then 13
        # Counting down: c[0] = 7, 4, 1 while c[0] > 0.
        (
            {
                'add(%get-tuple-element.24': 'subtract(%get-tuple-element.24',
                'constant(10)': 'constant(0)',
                'direction=LT': 'direction=GT',
                '%constant.7 = s32[]{:T(128)} constant(1)': '%constant.7 = s32[]{:T(128)} constant(7)',
            },
            3,
        ),
        # A step that is not a constant: unknown.
        (
            {
                'add(%get-tuple-element.24, %constant.1..sunk)': 'add(%get-tuple-element.24, %get-tuple-element.29)'
            },
            None,
        ),
    ],
)
def test_counted_loop_bounds(edit, trips):
    text = WHILE_FROM_1_BY_3_BELOW_10
    for old, new in edit.items():
        assert old in text
        text = text.replace(old, new)
    assert _loop_trips(text) == trips


def test_a_counter_moved_through_a_copy_is_still_counted():
    assert _loop_trips(NN_SCAN_9_STEPS) == 9
    by_name = {cost.instruction: cost for cost in costs_from_hlo_text(NN_SCAN_9_STEPS).instructions}
    assert by_name['convolution.5'].flops == 9 * 2 * 4 * 16 * 16  # (4, 16) @ (16, 16), 9 times


def test_a_loop_bound_that_is_data_stays_unknown_and_counts_once():
    assert _loop_trips(FORI_TO_AN_ARGUMENT) is None
    by_name = {
        cost.instruction: cost for cost in costs_from_hlo_text(FORI_TO_AN_ARGUMENT).instructions
    }
    assert by_name['mul.3'].flops == 3


def test_select_and_scatter_costs_its_select_and_scatter_computations():
    costs = costs_from_hlo_text(MAX_POOL_GRAD)
    # XLA's rule: per source element, taps - 1 selections (a compare, one FLOP) and
    # one scatter (an add): 2*4*4*4 sources, 2x2 windows. The TPU's own
    # cost_analysis() gave 512 for this program too.
    sources, taps = 2 * 4 * 4 * 4, 2 * 2
    assert costs.flops == sources * (taps - 1) + sources == 512
    assert costs.uncosted == ()


def _tanh_matmul_trace():
    data = (DATA / 'tpu_v5e_tanh_matmul.xplane.pb').read_bytes()
    return data, (DATA / 'tpu_v5e_tanh_matmul.hlo.txt').read_text()


def test_a_tpu_trace_gives_its_ops_and_their_program():
    data, hlo = _tanh_matmul_trace()
    # Warnings are errors here: an op the HLO lacks would fail the test.
    times = times_from_xspace(data, 'jit__lambda', steps=3, hlo_text=hlo)
    # The recording's XLA Ops durations (ps) of the three runs: copy-start,
    # copy-done, fusion; the Async XLA Ops spans of the copies (27.5 ns each)
    # overlap them and are not op time.
    runs = [(13_750, 3_750, 645_156), (14_922, 3_750, 646_328), (14_922, 3_750, 646_250)]
    assert times.total_seconds == pytest.approx(sum(map(sum, runs)) * 1e-12, rel=1e-12)
    assert times.unmatched_ops == ()
    assert [row.path for row in times.rows] == ['']  # nothing here is a module's


def test_a_tpu_trace_of_another_program_says_which_programs_ran():
    data, hlo = _tanh_matmul_trace()
    with pytest.raises(ProfileNoDeviceOpsError, match='jit__lambda'):
        times_from_xspace(data, 'jit_other', steps=3, hlo_text=hlo)


def test_a_tpu_trace_of_a_linen_model_gives_time_per_module():
    # The labels a linen MLP pushes when it is traced, pushed here by hand.
    with label_scope('MLP'):
        for name in ('hidden', 'out'):
            with label_scope(name):
                pass
    times = times_from_xspace(
        (DATA / 'tpu_v5e_linen_mlp.xplane.pb').read_bytes(),
        'jit_apply',
        steps=3,
        hlo_text=(DATA / 'tpu_v5e_linen_mlp.hlo.txt').read_text(),
        lowered_hlo_text=(DATA / 'tpu_v5e_linen_mlp.lowered.txt').read_text(),
    )
    assert times.unmatched_ops == ()
    assert {row.path for row in times.rows} >= {'MLP', 'MLP/hidden', 'MLP/out'}
    # Both matmuls keep the TPU's matrix unit busy, so time follows FLOPs:
    # hidden's (256, 256) @ (256, 512) is twice out's (256, 512) @ (512, 128).
    ratio = times['MLP/hidden'].seconds / times['MLP/out'].seconds
    assert 1.5 < ratio < 2.5
    assert times['MLP'].inclusive_seconds == pytest.approx(times.total_seconds)
