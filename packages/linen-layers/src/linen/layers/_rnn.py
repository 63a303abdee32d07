"""RNN, which scans a recurrent cell over the time axis, and Bidirectional, which runs two.

``RNN`` lifts the cell with ``linen.transforms.scan``: parameters are broadcast (shared by
every step) and the carry threads through the loop. The cells, and the errors raised here,
live in ``_recurrent``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp

from linen.core.frozen_dict import FrozenDict
from linen.layers._recurrent import (
    Array,
    Carry,
    PRNGKey,
    RNNCellBase,
    _where,
)
from linen.layers.errors import RNNInputShapeError
from linen.module import Module


def flip_sequences(inputs, seq_lengths, num_batch_dims: int, time_major: bool):
    """Reverses each sequence's first ``seq_lengths`` steps along the time axis.

    Step ``t`` of sequence ``b`` reads step ``(seq_lengths[b] - 1 - t) mod T``: the valid
    part is reversed in place and the padding (reversed as well) stays at the end, so a
    second flip restores the input. Without ``seq_lengths`` the whole axis is flipped.
    """
    time_axis = 0 if time_major else num_batch_dims

    def flip(x):
        if seq_lengths is None:
            return jnp.flip(x, axis=time_axis)
        steps = x.shape[time_axis]
        lengths = jnp.asarray(seq_lengths)
        # idx has the batch shape plus the time axis, at the position time has in x.
        if time_major:
            idx = lengths[None] - 1 - jnp.arange(steps).reshape((steps,) + (1,) * lengths.ndim)
        else:
            idx = lengths[..., None] - 1 - jnp.arange(steps).reshape((1,) * lengths.ndim + (steps,))
        idx = idx % steps
        idx = idx.reshape(idx.shape + (1,) * (x.ndim - idx.ndim))
        return jnp.take_along_axis(x, idx, axis=time_axis)

    return jax.tree_util.tree_map(flip, inputs)


def _select_last_carry(carries, seq_lengths, num_batch_dims: int):
    """Each sequence's carry after its last valid step; ``carries`` is time-stacked."""
    last = jnp.asarray(seq_lengths) - 1

    def pick(x):
        if num_batch_dims == 1:
            # Flax's indexing, so that lengths of another shape broadcast as there.
            return x[last, jnp.arange(x.shape[1])]
        idx = last.reshape((1, *last.shape) + (1,) * (x.ndim - 1 - last.ndim))
        return jnp.take_along_axis(x, idx, axis=0)[0]

    return jax.tree_util.tree_map(pick, carries)


def _promote_carry(carry, input_dtype):
    """Widens a float carry to the inputs' float dtype (e.g. float64 inputs)."""
    if not jnp.issubdtype(input_dtype, jnp.floating):
        return carry

    def widen(c):
        dtype = jnp.promote_types(c.dtype, input_dtype)
        return c if dtype == c.dtype else c.astype(dtype)

    return jax.tree_util.tree_map(widen, carry)


def _match_dtypes(new_carry, carry):
    """Casts a step's carry back to the incoming carry's dtypes, as ``lax.scan`` needs."""
    return jax.tree_util.tree_map(
        lambda new, old: new if new.dtype == old.dtype else new.astype(old.dtype),
        new_carry,
        carry,
    )


def _first_leaf(tree):
    return jax.tree_util.tree_leaves(tree)[0]


def _concatenate(a, b):
    return jnp.concatenate([a, b], axis=-1)


class RNN(Module):
    """Runs a cell over the time axis of its inputs (a lifted ``scan``).

    The cell's parameters live under ``cell`` and are shared by all steps
    (``variable_broadcast='params'``). Without ``initial_carry`` the carry comes from
    ``cell.initialize_carry(init_key or random.key(0), one_step_input_shape)``.

    Attributes:
      cell: an :class:`RNNCellBase` instance.
      time_major: inputs are ``[time, batch..., features...]`` instead of
        ``[batch..., time, features...]``.
      return_carry: return ``(final_carry, outputs)`` instead of ``outputs``.
      reverse: run from the last step to the first (honouring ``seq_lengths``: padding
        stays at the end).
      keep_order: with ``reverse``, flip the outputs back to the input's order.
      unroll: how many steps to unroll in each iteration of the loop.
      variable_axes, variable_broadcast, variable_carry, split_rngs: passed to
        :func:`linen.transforms.scan`.

    Where Flax's ``RNN`` stops with a scan carry type error, this one adapts: the carry it
    builds itself is widened to the inputs' float dtype (float64 inputs get a float64
    carry), and a step whose new carry has another dtype than the incoming one (a cell
    with ``dtype=jnp.bfloat16`` fed a float32 carry) is cast back to the incoming dtype.

    >>> from linen.layers import LSTMCell
    >>> layer = RNN(LSTMCell(features=4))
    >>> x = jnp.ones((2, 5, 3))
    >>> layer.apply(layer.init(jax.random.key(0), x), x).shape
    (2, 5, 4)
    """

    cell: RNNCellBase
    time_major: bool = False
    return_carry: bool = False
    reverse: bool = False
    keep_order: bool = False
    unroll: int = 1
    variable_axes: Mapping[Any, Any] = FrozenDict()
    variable_broadcast: Any = 'params'
    variable_carry: Any = False
    split_rngs: Mapping[Any, bool] = FrozenDict({'params': False})

    def __call__(
        self,
        inputs,
        *,
        initial_carry: Carry | None = None,
        init_key: PRNGKey | None = None,
        seq_lengths: Array | None = None,
        return_carry: bool | None = None,
        time_major: bool | None = None,
        reverse: bool | None = None,
        keep_order: bool | None = None,
    ):
        """Scans the cell over time.

        Args:
          inputs: ``[batch..., time, features...]`` (or time-major).
          initial_carry: the carry at the first step.
          init_key: key for ``initialize_carry`` when ``initial_carry`` is not given.
          seq_lengths: ``[batch...]`` integer lengths; the returned carry is the one after
            each sequence's last valid step, and ``reverse`` flips only the valid steps.
          return_carry, time_major, reverse, keep_order: override the attributes.

        Returns:
          ``outputs`` (time axis as in the inputs), or ``(carry, outputs)``.
        """
        from linen.transforms import scan

        return_carry = self.return_carry if return_carry is None else return_carry
        time_major = self.time_major if time_major is None else time_major
        reverse = self.reverse if reverse is None else reverse
        keep_order = self.keep_order if keep_order is None else keep_order

        shape = _first_leaf(inputs).shape
        feature_axes = self.cell.num_feature_axes
        if len(shape) < feature_axes + 1:
            raise RNNInputShapeError(
                _where(self),
                f"inputs of shape {shape} have no time axis before the cell's "
                f'{feature_axes} feature axes',
            )
        if time_major:
            time_axis = 0
            batch_dims = shape[1 : len(shape) - feature_axes]
        else:
            time_axis = len(shape) - feature_axes - 1
            batch_dims = shape[:time_axis]
        # As in Flax, seq_lengths is not checked against the batch shape: it is used as
        # given (to pick the carry, and by the flips of a reverse run).

        if reverse:
            inputs = flip_sequences(inputs, seq_lengths, len(batch_dims), time_major)

        carry = initial_carry
        if carry is None:
            if init_key is None:
                init_key = jax.random.key(0)
            step_shape = shape[:time_axis] + shape[time_axis + 1 :]
            carry = _promote_carry(
                self.cell.initialize_carry(init_key, step_shape), _first_leaf(inputs).dtype
            )

        # With seq_lengths the carry after the last valid step is needed, not the final
        # one, so every step's carry is stacked as an extra output.
        keep_carries = seq_lengths is not None and return_carry

        def scan_fn(cell, carry, x):
            new_carry, y = cell(carry, x)
            new_carry = _match_dtypes(new_carry, carry)
            return new_carry, ((new_carry, y) if keep_carries else y)

        scanned = scan(
            scan_fn,
            in_axes=time_axis,
            out_axes=(0, time_axis) if keep_carries else time_axis,
            unroll=self.unroll,
            variable_axes=self.variable_axes,
            variable_broadcast=self.variable_broadcast,
            variable_carry=self.variable_carry,
            split_rngs=self.split_rngs,
        )
        carry, outputs = scanned(self.cell, carry, inputs)
        if keep_carries:
            carries, outputs = outputs
            carry = _select_last_carry(carries, seq_lengths, len(batch_dims))

        if reverse and keep_order:
            outputs = flip_sequences(outputs, seq_lengths, len(batch_dims), time_major)
        return (carry, outputs) if return_carry else outputs


class Bidirectional(Module):
    """Runs one RNN forward and one backward over the inputs and merges their outputs.

    The backward RNN runs with ``reverse=True, keep_order=True``, so both outputs are in
    the input's order before ``merge_fn`` (default: concatenate the last axis).

    Attributes:
      forward_rnn: an :class:`RNN` (or compatible) run forward.
      backward_rnn: an :class:`RNN` run backward.
      merge_fn: combines the two outputs.
      time_major: as for :class:`RNN`.
      return_carry: return ``((forward_carry, backward_carry), outputs)``.

    >>> from linen.layers import GRUCell, LSTMCell
    >>> layer = Bidirectional(RNN(LSTMCell(4)), RNN(GRUCell(4)))
    >>> x = jnp.ones((2, 5, 3))
    >>> layer.apply(layer.init(jax.random.key(0), x), x).shape
    (2, 5, 8)
    """

    forward_rnn: Any
    backward_rnn: Any
    merge_fn: Callable[[Array, Array], Array] = _concatenate
    time_major: bool = False
    return_carry: bool = False

    def __call__(
        self,
        inputs,
        *,
        initial_carry: Carry | None = None,
        init_key: PRNGKey | None = None,
        seq_lengths: Array | None = None,
        return_carry: bool | None = None,
        time_major: bool | None = None,
        reverse: bool | None = None,
        keep_order: bool | None = None,
    ):
        """Runs both directions; ``reverse`` and ``keep_order`` are accepted and ignored.

        Args:
          inputs: as for :class:`RNN`.
          initial_carry: ``(forward_carry, backward_carry)``.
          init_key: split in two for the two RNNs' ``initialize_carry``.
          seq_lengths: ``[batch...]`` lengths, passed to both RNNs.
          return_carry, time_major: override the attributes.
        """
        del reverse, keep_order  # the directions are fixed
        return_carry = self.return_carry if return_carry is None else return_carry
        time_major = self.time_major if time_major is None else time_major
        carry_fw, carry_bw = (None, None) if initial_carry is None else initial_carry
        key_fw, key_bw = (None, None) if init_key is None else jax.random.split(init_key)
        carry_fw, out_fw = self.forward_rnn(
            inputs,
            initial_carry=carry_fw,
            init_key=key_fw,
            seq_lengths=seq_lengths,
            return_carry=True,
            time_major=time_major,
            reverse=False,
        )
        carry_bw, out_bw = self.backward_rnn(
            inputs,
            initial_carry=carry_bw,
            init_key=key_bw,
            seq_lengths=seq_lengths,
            return_carry=True,
            time_major=time_major,
            reverse=True,
            keep_order=True,
        )
        outputs = jax.tree_util.tree_map(self.merge_fn, out_fw, out_bw)
        carry = (carry_fw, carry_bw)
        return (carry, outputs) if return_carry else outputs
