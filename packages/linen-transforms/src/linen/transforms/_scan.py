"""Lifted ``scan`` over scopes.

``fn(scope, carry, *xs) -> (carry, ys)`` runs once per step. Per collection:
``variable_broadcast`` collections are shared by every step (initialised once,
before the loop), ``variable_carry`` collections are threaded from step to step,
``variable_axes`` collections are stacked along an axis (one slice per step).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from linen.core import config, in_filter, intersect_filters, subtract_filters, union_filters
from linen.core.lifting import Filter
from linen.transforms import _pack
from linen.transforms._axis_markers import SplitAxes
from linen.transforms.errors import (
    InAxesListError,
    ScanBroadcastAxisError,
    ScanBroadcastOutputError,
    ScanBroadcastVariableError,
    ScanCarryCreationError,
    ScanCollectionError,
    ScanLengthError,
)


class _Broadcast:
    """``in_axes`` marker: pass the argument unchanged to every step."""

    def __repr__(self) -> str:
        return 'broadcast'


broadcast = _Broadcast()


class Groups(NamedTuple):
    """A scope's collections by scan rule (each a ``{collection: tree}`` dict)."""

    broadcast: dict
    carry: dict
    axes: tuple  # one dict per variable_axes filter, in its order
    rest: dict  # named by no rule: read by every step, like broadcast

    @classmethod
    def of(cls, grouped: tuple, n_axes: int) -> Groups:
        """From :func:`_pack.group_variables` with filters ``(broadcast, carry, *axes, ...)``;
        groups after the axis ones (collections marked ``Out``, on the way in) are dropped."""
        return cls(grouped[0], grouped[1], tuple(grouped[2 : 2 + n_axes]), grouped[-1])


def _moveaxis_in(x: Any, axis: int) -> Any:
    return jax.tree_util.tree_map(lambda a: jnp.moveaxis(a, axis, 0) if axis != 0 else a, x)


def _moveaxis_out(x: Any, axis: int) -> Any:
    return jax.tree_util.tree_map(lambda a: jnp.moveaxis(a, 0, axis) if axis != 0 else a, x)


def _per_arg(spec: Any, n: int) -> tuple:
    if isinstance(spec, list):
        raise InAxesListError('scan', spec)
    if isinstance(spec, tuple):
        if len(spec) != n:
            raise ScanLengthError(f'in_axes has {len(spec)} entries for {n} scanned arguments')
        return tuple(spec)
    return (spec,) * n


def _flatten_nested(xs: tuple, spec: tuple) -> tuple:
    """``(xs, spec, treedef)``: where an entry of ``in_axes`` is itself a tree of axes
    (a prefix of its argument's tree, as Flax allows), the arguments as their leaves,
    each with its axis, and the tree to rebuild them; else unchanged, ``treedef`` None."""
    if all(isinstance(s, int) or s is broadcast for s in spec):
        return xs, spec, None
    axes = jax.tree_util.tree_map(
        lambda ax, x: jax.tree_util.tree_map(lambda _: ax, x), tuple(spec), tuple(xs)
    )
    flat_xs, treedef = jax.tree_util.tree_flatten(tuple(xs))
    return tuple(flat_xs), tuple(jax.tree_util.tree_leaves(axes)), treedef


def _scanned_sizes(xs: tuple, axes: tuple) -> list[int]:
    """The length of each scanned leaf of the arguments along its axis, in pytree order."""
    return [
        jnp.shape(leaf)[ax]
        for x, ax in zip(xs, axes)
        if ax is not broadcast
        for leaf in jax.tree_util.tree_leaves(x)
    ]


def _scan_length(sizes: list[int], length: int | None) -> int:
    """The number of steps: ``length``, or else the first scanned leaf's (as Flax)."""
    if length is not None:
        return length
    if not sizes:
        raise ScanLengthError('length should be specified manually.')
    return sizes[0]


def _length_error(length: int | None, ins: _Inputs, n: int, sizes: list[int]) -> ScanLengthError:
    """JAX's ``lax.scan`` text over what Flax scans: the scanned variable collections,
    the split rng keys (``n`` each), then the arguments."""
    everything = [jnp.shape(leaf)[0] for leaf in jax.tree_util.tree_leaves(ins.axis_vars)]
    everything += [n] * sum(len(sp) for sp in ins.split)
    everything += sizes
    if length is not None:
        return ScanLengthError(
            f'scan got `length` argument of {length} which disagrees with leading axis '
            f'sizes {everything}.'
        )
    return ScanLengthError(
        'scan got values with different leading axis sizes: '
        f'{", ".join(str(s) for s in everything)}.'
    )


def scan(
    fn: Callable,
    variable_axes: Mapping[Filter, int] | None = None,
    variable_broadcast: Filter = False,
    variable_carry: Filter = False,
    split_rngs: Mapping[Filter, bool] | None = None,
    in_axes: Any = 0,
    out_axes: Any = 0,
    length: int | None = None,
    reverse: bool = False,
    unroll: int = 1,
    data_transform: Callable | None = None,
    metadata_params: Mapping[Any, Any] | None = None,
    check_constancy_invariants: bool = True,
) -> Callable:
    """``lax.scan`` of ``fn(scope, carry, *xs) -> (carry, ys)`` with per-collection rules.

    ``check_constancy_invariants=False`` skips the run before the loop (Flax's
    meaning): broadcast collections are not created, and nothing is checked.
    """
    return _Scan(
        fn,
        variable_axes,
        variable_broadcast,
        variable_carry,
        split_rngs,
        in_axes,
        out_axes,
        length,
        reverse,
        unroll,
        data_transform,
        metadata_params,
        check_constancy_invariants,
    ).call


class _Inputs(NamedTuple):
    """The lifted scopes' variables by scan rule and their rng keys, one entry per scope."""

    bcast_vars: list  # dicts, filled in by the run before the loop at init
    carry_vars: tuple
    axis_vars: tuple  # per scope, one group per variable_axes filter, scanned axis first
    rest_vars: list
    split: list  # rng keys split across steps
    fixed_keys: list  # rng keys every step shares
    paths: list


def _first_slice(a, ax: int):
    """Slice 0 of ``a`` along ``ax``: the first step's input to the step run before the loop.

    An empty axis (a scan of zero steps) gives zeros of a slice's shape: the loop runs
    no step, and that step's values serve only its structure, as Flax traces the body
    abstractly there.
    """
    a = jnp.asarray(a)
    ax %= a.ndim
    if a.shape[ax] == 0:
        return jnp.zeros(a.shape[:ax] + a.shape[ax + 1 :], a.dtype)
    return jnp.take(a, 0, axis=ax)


class _Scan:
    """One lifted ``scan``: its options, resolved once, and ``call``, the lifted function."""

    def __init__(
        self,
        fn: Callable,
        variable_axes: Mapping[Filter, int] | None,
        variable_broadcast: Filter,
        variable_carry: Filter,
        split_rngs: Mapping[Filter, bool] | None,
        in_axes: Any,
        out_axes: Any,
        length: int | None,
        reverse: bool,
        unroll: int,
        data_transform: Callable | None,
        metadata_params: Mapping[Any, Any] | None,
        check_constancy_invariants: bool,
    ):
        self.fn = fn
        self.variable_broadcast = variable_broadcast
        self.in_axes = in_axes
        self.out_axes = out_axes
        # Outputs with out_axes nn.broadcast are loop-invariant: they come from the
        # step run before the loop (as Flax's broadcast pass), not from the loop.
        self.invariant_out = out_axes is broadcast or any(
            ax is broadcast for ax in jax.tree_util.tree_leaves(out_axes)
        )
        self.length = length
        self.reverse = reverse
        self.unroll = unroll
        self.data_transform = data_transform
        self.check_constancy_invariants = check_constancy_invariants
        self.directions = directions = SplitAxes(variable_axes or {})
        split_rngs = dict(split_rngs or {})
        self.in_axis_values = tuple(directions.inputs.values())
        self.axis_values = tuple(directions.outputs.values())
        # Group order: broadcast, carry, each axis filter, the rest (broadcast too).
        # Collections marked `Out` are grouped on the way in only to be left out.
        self.n_in_axes = len(directions.inputs)
        self.n_out_axes = len(directions.outputs)
        self.gather_filters = (
            (variable_broadcast, variable_carry) + tuple(directions.inputs) + directions.out_only
        )
        self.filters = (variable_broadcast, variable_carry) + tuple(directions.outputs)
        self.read_only = functools.reduce(union_filters, directions.in_only, False)
        # What a step may write: the collections a rule names (as in Flax, any other
        # is read-only inside; `linen_strict_scan_collections` keeps them writable
        # and refuses a step that writes one).
        self.covered = functools.reduce(union_filters, self.filters, False)
        self.split_rngs = split_rngs
        self.metadata_params = dict(metadata_params or {})
        self.broadcast_axes = [f for f, ax in (variable_axes or {}).items() if ax is broadcast]

    def call(self, scope_or_scopes, carry, *xs, **kwargs):
        """The lifted function: split the scopes' variables and rngs by rule, run the
        body once before the loop, loop with ``lax.scan`` and write the results back."""
        if self.broadcast_axes:  # at the call, as Flax's assertion
            raise ScanBroadcastAxisError(self.broadcast_axes)
        kwargs = _pack.drop_kwargs('scan', kwargs)
        # A pytree of scopes (tuple, list, dict) is lifted together (Module arguments and
        # fields, as in Flax); each follows the same collection rules.
        tree = _pack.ScopeTree(scope_or_scopes)
        scopes = tuple(tree.scopes)
        in_spec = _per_arg(self.in_axes, len(xs))
        xs, in_spec, xs_tree = _flatten_nested(xs, in_spec)
        sizes = _scanned_sizes(xs, in_spec)
        n = _scan_length(sizes, self.length)
        ins = self._split_scopes(scopes)
        if any(s != n for s in sizes):
            raise _length_error(self.length, ins, n, sizes)
        mutable = [self._inner_mutable(s.mutable) for s in scopes]
        run_step = _step_runner(self.fn, tree, scopes, ins, mutable, kwargs, xs_tree)
        invariant = self.invariant_out
        ys_first = self._run_first_step(run_step, scopes, ins, carry, xs, in_spec, invariant)
        carry_vars, carry, axis_out, ys = self._loop(
            run_step, ins, carry, xs, in_spec, n, self.out_axes if invariant else None
        )
        if invariant:
            ys = _map_out_axes(
                lambda ax, y, y0: y0 if ax is broadcast else _moveaxis_out(y, ax),
                self.out_axes,
                ys,
                ys_first,
            )
        else:
            ys = _map_out_axes(lambda ax, y: _moveaxis_out(y, ax), self.out_axes, ys)
        self._write_back(scopes, ins.bcast_vars, carry_vars, axis_out)
        return carry, ys

    def _inner_mutable(self, outer: Filter) -> Filter:
        """What a step may write of what the caller made mutable: collections marked
        `In` are read-only inside, and so (unless strict) are those no rule names."""
        mutable = outer
        if not config.linen_strict_scan_collections:
            mutable = intersect_filters(mutable, self.covered)
        if self.directions.in_only:
            mutable = subtract_filters(mutable, self.read_only)
        return mutable

    def _split_scopes(self, scopes: tuple) -> _Inputs:
        """Each scope's variables grouped by rule (axis groups with their scanned axis
        moved first and taken out of their metadata), and its rng keys, split or fixed."""
        bcast_vars, carry_vars, axis_vars, rest_vars = [], [], [], []
        split, fixed_keys, paths = [], [], []
        for scope in scopes:
            groups = Groups.of(
                _pack.group_variables(_pack.gather_variables(scope), self.gather_filters),
                self.n_in_axes,
            )
            bcast_vars.append(dict(groups.broadcast))
            carry_vars.append(groups.carry)
            rest_vars.append(groups.rest)
            axis_vars.append(
                tuple(
                    # Boxes are told about the axis even without metadata_params, so a
                    # Partitioned box raises PartitioningUnspecifiedError (as in Flax)
                    # instead of silently keeping names one short of its value's rank.
                    _moveaxis_in(_pack.remove_axis(g, ax, self.metadata_params), ax)
                    for g, ax in zip(groups.axes, self.in_axis_values)
                )
            )
            keys, scope_paths = _pack.rng_keys(scope)
            sp, shared = _pack.split_and_shared(keys, self.split_rngs)
            split.append(sp)
            fixed_keys.append(shared)
            paths.append(scope_paths)
        return _Inputs(
            bcast_vars, tuple(carry_vars), tuple(axis_vars), rest_vars, split, fixed_keys, paths
        )

    def _run_first_step(
        self, run_step, scopes: tuple, ins: _Inputs, carry, xs, in_spec, invariant: bool
    ) -> Any:
        """Run the body once before the loop, on the first step's inputs, unless
        ``check_constancy_invariants`` is off and no output is loop-invariant.

        For real when broadcast collections must be created (init), so the loop can
        read them (they go into ``ins.bcast_vars``), or when ``invariant`` (an
        ``out_axes`` entry is ``nn.broadcast``): then its outputs are returned, and
        those must not depend on the carry or the scanned inputs. Abstractly
        otherwise. Either way its rng draws count, as in Flax: inside the loop a
        scope's first make_rng is its second. A step that writes a collection no
        rule names, or creates a carry collection, is refused.
        """
        first = tuple(
            x
            if ax is broadcast
            else jax.tree_util.tree_map(lambda a, ax=ax: _first_slice(a, ax), x)
            for x, ax in zip(xs, in_spec)
        )
        variables = _first_step_variables(ins)
        written: list[tuple[str, str]] = []
        created: list[tuple[str, str]] = []

        def first_step(v, c, f, keys=None):
            keys = [dict(sp) for sp in ins.split] if keys is None else keys
            inner, c, ys = run_step(v, keys, c, f)
            for scope, i, rest, cv in zip(scopes, inner, ins.rest_vars, ins.carry_vars):
                out = Groups.of(_pack.inner_mutated(i, self.filters), self.n_out_axes)
                written.extend(
                    ('/'.join(map(str, scope.path)), col) for col in _restructured(out.rest, rest)
                )
                created.extend(
                    ('/'.join(map(str, scope.path)), col) for col in _restructured(out.carry, cv)
                )
            return inner, c, ys

        init_bcast = self.check_constancy_invariants and any(
            any(in_filter(s.mutable, c) for c in _broadcast_cols(self.variable_broadcast))
            for s in scopes
        )
        ys = None
        if init_bcast:
            writes, ys = self._first_step_over_one(
                first_step, ins, carry, first, in_spec, invariant
            )
            for b, w in zip(ins.bcast_vars, writes):
                b.update(w)
        elif invariant:
            _, _, ys = first_step(variables, carry, first)
        if invariant:
            _refuse_dependent_outputs(first_step, variables, carry, first, in_spec, self.out_axes)
        elif not init_bcast and self.check_constancy_invariants:
            _probe_abstractly(first_step, variables, carry, first, in_spec)
        _refuse_misplaced(written, created)
        return ys

    def _first_step_over_one(
        self, first_step, ins: _Inputs, carry, first: tuple, in_spec: tuple, with_ys: bool
    ) -> tuple[list, Any]:
        """Run the first step for real, under ``jax.vmap`` over a batch of one of what
        changes from step to step (the carry, the scanned arguments, the carry and axis
        collections, the split rng keys), with ``out_axes=None`` for what it writes to
        the broadcast collections: JAX refuses that for a value that depends on a
        mapped input, which is Flax's "data dependency on the scan body". A value that
        depends on none of them is computed as without the vmap.

        Returns each scope's broadcast writes, and the step's outputs if ``with_ys``.
        Raises ``ScanBroadcastVariableError`` naming the collections whose writes depend.
        """
        scanned, run = _over_scanned(first_step, first, in_spec)
        axis_slices = _first_axis_slices(ins)
        keys = [dict(sp) for sp in ins.split]
        bcast_filter = (self.variable_broadcast,)

        def step(carry_vars, axis_slices, c, scanned, keys, only=None):
            variables = _step_variables(ins, carry_vars, axis_slices)
            inner, _, ys = run(variables, c, scanned, keys=keys)
            writes = [_pack.inner_mutated(i, bcast_filter)[0] for i in inner]
            if only is not None:
                writes = [{k: w[k] for k in w if k == only} for w in writes]
            return writes, (ys if with_ys else None)

        looped = (list(ins.carry_vars), axis_slices, carry, scanned, keys)
        one = jax.tree_util.tree_map(lambda a: jnp.asarray(a)[None], looped)
        try:
            writes, ys = jax.vmap(step, out_axes=(None, 0))(*one)
        except ValueError as e:
            if not _mapped_where_unmapped(e):
                raise
            raise ScanBroadcastVariableError(_dependent_writes(step, one)) from None
        return writes, jax.tree_util.tree_map(lambda a: a[0], ys)

    def _loop(self, run_step, ins: _Inputs, carry, xs, in_spec, n: int, invariant_axes=None):
        """The ``lax.scan`` over ``n`` steps.

        Returns ``(carry collections, carry, axis collections, ys)`` as the loop ends;
        with ``invariant_axes`` (the ``out_axes``), the outputs they mark
        ``nn.broadcast`` are left out of the loop's (``None`` in ``ys``).
        """
        step_keys = tuple(_pack.split_keys(sp, n) for sp in ins.split)
        scanned_xs = tuple(
            None if ax is broadcast else _moveaxis_in(x, ax) for x, ax in zip(xs, in_spec)
        )
        bcast_xs = tuple(x if ax is broadcast else None for x, ax in zip(xs, in_spec))
        (carry_vars, carry), (axis_out, ys) = lax.scan(
            self._body(run_step, ins, bcast_xs, invariant_axes),
            (ins.carry_vars, carry),
            (ins.axis_vars, step_keys, scanned_xs),
            # As in Flax, a length is passed only if given: JAX then reports scanned
            # variables that disagree with the arguments in Flax's words.
            length=self.length,
            reverse=self.reverse,
            unroll=self.unroll,
        )
        return carry_vars, carry, axis_out, ys

    def _body(self, run_step, ins: _Inputs, bcast_xs: tuple, invariant_axes=None) -> Callable:
        """The loop body: one step's variables and keys in, its carry and slices out."""
        bcast_vars, rest_vars = ins.bcast_vars, ins.rest_vars
        data_transform, filters, n_out_axes = self.data_transform, self.filters, self.n_out_axes

        def body(state, step):
            carry_vars, c = state
            axis_slices, keys_i, x_slices = step
            variables, keys_list = [], []
            for b, r, cv, axes, k in zip(bcast_vars, rest_vars, carry_vars, axis_slices, keys_i):
                v = {**b, **r, **cv}
                for g in axes:
                    v.update(g)
                if data_transform is not None:
                    # e.g. sharding annotations on the per-step variables and keys
                    v, k = data_transform(v, k)
                variables.append(v)
                keys_list.append(k)
            x_args = tuple(b if s is None else s for b, s in zip(bcast_xs, x_slices))
            inner, c, ys = run_step(variables, keys_list, c, x_args)
            if invariant_axes is not None:
                ys = _map_out_axes(lambda ax, y: None if ax is broadcast else y, invariant_axes, ys)
            outs = [Groups.of(_pack.inner_mutated(i, filters), n_out_axes) for i in inner]
            new_carry_vars = tuple(out.carry for out in outs)
            new_axis = tuple(out.axes for out in outs)
            return (new_carry_vars, c), (new_axis, ys)

        return body

    def _write_back(self, scopes: tuple, bcast_vars: list, carry_vars: tuple, axis_out: tuple):
        """Hand each scope the broadcast collections it may change, the final carry
        collections, and the axis collections stacked along their axis."""
        for scope, b, cv, axes in zip(scopes, bcast_vars, carry_vars, axis_out):
            axes = tuple(
                _pack.add_axis(_moveaxis_out(g, ax), ax, self.metadata_params)
                for g, ax in zip(axes, self.axis_values)
            )
            groups_out = ({c: v for c, v in b.items() if in_filter(scope.mutable, c)}, cv)
            _pack.write_back(scope, groups_out + axes)


def _step_runner(
    fn: Callable,
    tree: _pack.ScopeTree,
    scopes: tuple,
    ins: _Inputs,
    mutable: list,
    kwargs,
    xs_tree: Any = None,
) -> Callable:
    """``run_step(variables, step_keys, carry, x_args) -> (inner scopes, carry, ys)``:
    ``fn`` on scopes made from one step's variables and split keys."""
    fixed_keys, paths = ins.fixed_keys, ins.paths

    def run_step(variables, step_keys, c, x_args):
        inner = [
            _pack.make_inner_scope(s, v, _pack.streams({**fk, **sk}, p), mutable=m)
            for s, v, fk, sk, p, m in zip(scopes, variables, fixed_keys, step_keys, paths, mutable)
        ]
        arg = tree.unflatten(inner)
        if xs_tree is not None:  # nested in_axes: the arguments were passed as leaves
            x_args = jax.tree_util.tree_unflatten(xs_tree, x_args)
        c, ys = fn(arg, c, *x_args, **kwargs)
        return inner, c, ys

    return run_step


def _dependent_writes(step: Callable, one: tuple) -> list[str]:
    """The broadcast collections whose writes depend on the mapped inputs of ``step``
    (abstract runs, on the error path only)."""
    spec = jax.eval_shape(jax.vmap(step), *one)[0]
    names = sorted({c for w in spec for c in w})
    dependent = []
    for name in names:
        try:
            jax.eval_shape(jax.vmap(functools.partial(step, only=name), out_axes=(None, 0)), *one)
        except ValueError as e:
            if not _mapped_where_unmapped(e):
                raise
            dependent.append(name)
    return dependent or names


def _mapped_where_unmapped(e: ValueError) -> bool:
    """Whether ``e`` is JAX refusing ``out_axes=None`` for an output of ``jax.vmap`` that
    depends on a mapped input (its message names ``out_axes`` at both JAX ends): how
    the scan checks tell a value that varies per step from one that does not."""
    return 'out_axes' in str(e)


def _first_axis_slices(ins: _Inputs) -> list[dict]:
    """Each scope's axis collections at index 0 (the first step's slices)."""
    return [
        {
            c: t
            for g in axes
            for c, t in jax.tree_util.tree_map(lambda a: _first_slice(a, 0), g).items()
        }
        for axes in ins.axis_vars
    ]


def _step_variables(ins: _Inputs, carry_vars, axis_slices: list[dict]) -> list:
    """Each scope's variables for one step: its broadcast, carry, other and axis ones."""
    return [
        {**b, **cv, **r, **ax}
        for b, cv, r, ax in zip(ins.bcast_vars, carry_vars, ins.rest_vars, axis_slices)
    ]


def _first_step_variables(ins: _Inputs) -> list:
    """Each scope's variables for the first step: every group, axis groups at index 0."""
    return _step_variables(ins, ins.carry_vars, _first_axis_slices(ins))


def _refuse_misplaced(written: list, created: list) -> None:
    """Raise for the first scope whose step wrote a collection no rule names
    (``written``) or created a carry collection (``created``): (path, collection) pairs."""
    if written:
        path = written[0][0]
        raise ScanCollectionError(sorted({col for p, col in written if p == path}), path)
    if created:
        path = created[0][0]
        raise ScanCarryCreationError(sorted({col for p, col in created if p == path}), path)


def _restructured(out: dict, before: dict) -> list:
    """The collections of ``out`` whose tree structure differs from ``before``'s."""
    return [
        col
        for col, tree in out.items()
        if jax.tree_util.tree_structure(tree) != jax.tree_util.tree_structure(before.get(col, {}))
    ]


def _over_scanned(first_step: Callable, first: tuple, in_spec: tuple) -> tuple:
    """``(scanned, step)``: the first step's scanned arguments alone (``None`` for the
    broadcast ones), and ``step(v, c, scanned, **kw)`` running ``first_step`` with the
    broadcast arguments as the values they are (a ``deterministic`` flag must reach the
    body as a Python bool), as they do inside the loop."""
    bcast = tuple(x if ax is broadcast else None for x, ax in zip(first, in_spec))
    scanned = tuple(None if ax is broadcast else x for x, ax in zip(first, in_spec))

    def step(v, c, scanned_args, **kwargs):
        merged = tuple(x if s is None else s for x, s in zip(bcast, scanned_args))
        return first_step(v, c, merged, **kwargs)

    return scanned, step


def _probe_abstractly(first_step: Callable, variables, carry, first: tuple, in_spec: tuple):
    """Run ``first_step`` under ``jax.eval_shape``, tracing only the scanned arguments."""
    scanned, step = _over_scanned(first_step, first, in_spec)
    jax.eval_shape(lambda v, c, s: step(v, c, s)[1:], variables, carry, scanned)


def _broadcast_cols(variable_broadcast: Filter):
    """Collection names to test for 'broadcast and mutable' (finite stand-ins for filters)."""
    if isinstance(variable_broadcast, str):
        return [variable_broadcast]
    if isinstance(variable_broadcast, (list, tuple, set, frozenset)):
        return list(variable_broadcast)
    if variable_broadcast is True:
        return ['params']
    return []


def _map_out_axes(f: Callable, out_axes: Any, ys: Any, *more: Any) -> Any:
    """``f(axis, outputs, *more)`` at each leaf of ``out_axes`` (an int or
    ``nn.broadcast``) with the outputs' subtree there, and ``more``'s, which have the
    outputs' structure down to those leaves."""
    if isinstance(out_axes, int) or out_axes is broadcast:
        return f(out_axes, ys, *more)
    if (
        isinstance(out_axes, (tuple, list))
        and isinstance(ys, (tuple, list))
        and len(out_axes) == len(ys)
    ):
        return type(ys)(_map_out_axes(f, *parts) for parts in zip(out_axes, ys, *more))
    # As in Flax, `out_axes` is a prefix of the outputs' tree (else JAX's ValueError).
    return jax.tree_util.tree_map(f, out_axes, ys, *more)


def _refuse_dependent_outputs(
    first_step: Callable, variables, carry, first: tuple, in_spec: tuple, out_axes: Any
) -> None:
    """Raise ``ScanBroadcastOutputError`` when an output marked ``nn.broadcast``
    depends on the carry or the scanned inputs: under ``jax.vmap`` over a batch of
    one of those, such an output is mapped, which ``out_axes=None`` refuses."""
    scanned_first, step = _over_scanned(first_step, first, in_spec)

    def invariant_outputs(c, scanned):
        ys = step(variables, c, scanned)[2]
        return _map_out_axes(lambda ax, y: y if ax is broadcast else None, out_axes, ys)

    def batch_of_one(tree):
        return jax.tree_util.tree_map(
            lambda a: jax.ShapeDtypeStruct((1, *jnp.shape(a)), jnp.result_type(a)), tree
        )

    try:
        jax.eval_shape(
            jax.vmap(invariant_outputs, out_axes=None),
            batch_of_one(carry),
            batch_of_one(scanned_first),
        )
    except ValueError as e:
        if not _mapped_where_unmapped(e):
            raise
        raise ScanBroadcastOutputError() from None
