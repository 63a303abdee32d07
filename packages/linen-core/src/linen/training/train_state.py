"""A train state as in ``flax.training.train_state`` (the module path matches Flax's).

>>> import jax.numpy as jnp
>>> import optax
>>> state = TrainState.create(apply_fn=None, params={'w': jnp.ones(2)}, tx=optax.sgd(0.5))
>>> state = state.apply_gradients(grads={'w': jnp.ones(2)})
>>> int(state.step), state.params['w'].tolist()
(1, [0.5, 0.5])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from linen.core import struct
from linen.core.errors import TrainStateOptimizerError

__all__ = ['TrainState']


def _apply_updates(params: Any, updates: Any) -> Any:
    # The update is added in the promoted dtype and cast back to the parameter's, so
    # bfloat16 parameters stay bfloat16 (optax.apply_updates does the same; not
    # importing optax keeps linen-core free of it).
    def add(p, u):
        if p is None:
            return None
        return jnp.asarray(p + u).astype(jnp.asarray(p).dtype)

    return jax.tree_util.tree_map(add, params, updates, is_leaf=lambda x: x is None)


class TrainState(struct.PyTreeNode):
    """Step, parameters, optimizer and optimizer state of one training run, as a pytree.

    Subclass it to carry more (``batch_stats: Any = None``, a dropout key). It is a
    frozen dataclass: :meth:`replace` gives a modified copy, and
    ``linen.core.serialization`` (``to_bytes``/``from_bytes``/``to_state_dict``) and
    orbax-checkpoint save and restore it like any pytree.

    Attributes:
        step: how many times :meth:`apply_gradients` ran.
        apply_fn: usually ``model.apply``; static (not a pytree leaf).
        params: the parameters the optimizer updates.
        tx: an optax ``GradientTransformation``; static.
        opt_state: the state of ``tx``.
    """

    step: int | jax.Array
    apply_fn: Callable = struct.field(pytree_node=False)
    params: Any = struct.field(pytree_node=True)
    tx: Any = struct.field(pytree_node=False)
    opt_state: Any = struct.field(pytree_node=True)

    def apply_gradients(self, *, grads: Any, **kwargs) -> TrainState:
        """One optimizer step: ``tx.update`` with ``grads``, then the updates added.

        Args:
            grads: gradients with the structure of ``params``.
            **kwargs: other fields to replace at the same time (``batch_stats=...``).

        Returns:
            A new state with ``step + 1``, the new parameters and optimizer state.
        """
        updates, new_opt_state = self.tx.update(grads, self.opt_state, self.params)
        return self.replace(
            step=self.step + 1,
            params=_apply_updates(self.params, updates),
            opt_state=new_opt_state,
            **kwargs,
        )

    @classmethod
    def create(cls, *, apply_fn: Callable, params: Any, tx: Any, **kwargs) -> TrainState:
        """A state at step 0 with ``tx.init(params)`` as the optimizer state.

        Args:
            apply_fn: the function the train step calls, usually ``model.apply``.
            params: the initial parameters (``variables['params']``).
            tx: an optax ``GradientTransformation`` (anything with ``init``/``update``).
            **kwargs: the fields a subclass adds.

        Raises:
            TrainStateOptimizerError: ``tx`` has no ``init`` (also an ``AttributeError``,
                as Flax's ``tx.init`` raises; a ``tx`` without ``update`` fails, as in
                Flax, at ``apply_gradients``).
        """
        if not callable(getattr(tx, 'init', None)):
            raise TrainStateOptimizerError(
                f'TrainState.create(tx=...) needs an optax GradientTransformation (with init '
                f'and update), got {type(tx).__name__}: {tx!r}. Pass e.g. tx=optax.adam(1e-3) '
                '(pip install "linen-core[training]" brings optax).'
            )
        return cls(
            step=0, apply_fn=apply_fn, params=params, tx=tx, opt_state=tx.init(params), **kwargs
        )
