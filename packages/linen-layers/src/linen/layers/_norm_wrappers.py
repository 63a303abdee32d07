"""SpectralNorm and WeightNorm: wrappers that normalize another layer's parameters.

Both rewrite the wrapped layer's parameters on the way in through
``linen.transforms.map_variables``; their own state is named after the wrapped
variable's path (``'Dense_0/kernel/u'``), as in Flax, so checkpoints carry over.
The statistics layers (LayerNorm, BatchNorm, ...) and the errors, including
``SpectralNormNonMatrixError``, live in ``_normalization``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping

import jax
import jax.numpy as jnp
from jax import lax

from linen.layers import initializers
from linen.layers._dtypes import canonicalize_dtype
from linen.layers._norm_stats import Array, Axes, Dtype, Initializer, canonicalize_axes, layer_where
from linen.layers._normalization import SpectralNormNonMatrixError
from linen.module import Module, compact

__all__ = [
    'SpectralNorm',
    'WeightNorm',
]


def _l2_normalize(x: Array, axis=None, eps: float = 1e-12) -> Array:
    return x * lax.rsqrt(jnp.sum(x * x, axis=axis, keepdims=True) + eps)


def _key_name(key) -> str:
    # The spelling of ``jax.tree_util.keystr(..., simple=True)`` for one key.
    for attr in ('key', 'name', 'idx'):
        if hasattr(key, attr):
            return str(getattr(key, attr))
    return str(key)


def _map_params(variables: Mapping, fn: Callable[[tuple[str, ...], Array], Array]) -> dict:
    """Applies ``fn(path, leaf)`` to the ``params`` leaves of ``{collection: tree}``.

    Leaves are visited in JAX's flatten order (sorted dict keys), so the rng draws
    of the wrapper's own variables come in Flax's order. A boxed parameter
    (``nn.Partitioned`` and other metadata boxes) is opened as JAX opens it: the
    leaf is its value, its path ends in the box's field (``kernel/value``), and the
    box is kept around the result.
    """

    def one(keypath, leaf):
        return fn(tuple(_key_name(k) for k in keypath), leaf)

    return {
        col: jax.tree_util.tree_map_with_path(one, tree) if col == 'params' else tree
        for col, tree in variables.items()
    }


def _map_variables():
    from linen.transforms import map_variables

    return map_variables


class SpectralNorm(Module):
    """Spectral normalization (Miyato et al., 2018) of a wrapped layer's weight matrices.

    Every parameter of ``layer_instance`` with rank >= 2 is divided by its
    largest singular value, estimated by ``n_steps`` of power iteration from a
    vector ``u`` kept in ``collection_name`` (``batch_stats``) as
    ``'<layer>/<param>/u'`` next to the estimate ``'<layer>/<param>/sigma'``.
    Higher-rank kernels are treated as ``(-1, last dimension)`` matrices.

    Attributes:
      layer_instance: the layer whose parameters are normalized.
      n_steps: power-iteration steps per call (0 leaves the parameters as they are).
      epsilon: keeps the vector normalization away from dividing by zero.
      dtype: dtype of the normalized parameters (default: inferred).
      param_dtype: dtype of ``u`` and ``sigma``.
      error_on_non_matrix: raise on parameters of rank > 2 instead of reshaping.
      collection_name: where ``u`` and ``sigma`` live.

    Call with ``update_stats=True`` in training (``collection_name`` must then be
    mutable) and ``update_stats=False`` in evaluation.
    """

    layer_instance: Module
    n_steps: int = 1
    epsilon: float = 1e-12
    dtype: Dtype | None = None
    param_dtype: Dtype = jnp.float32
    error_on_non_matrix: bool = False
    collection_name: str = 'batch_stats'

    @compact
    def __call__(self, *args, update_stats: bool, **kwargs):
        """Calls the wrapped layer with spectrally normalized parameters."""

        def forward(layer):
            return layer(*args, **kwargs)

        def normalize(variables):
            return _map_params(
                variables, lambda path, v: self._spectral_normalize(path, v, update_stats)
            )

        return _map_variables()(
            forward, trans_in_fn=normalize, init=self.is_initializing(), mutable=True
        )(self.layer_instance)

    def _spectral_normalize(self, path: tuple[str, ...], value: Array, update_stats: bool):
        if value.ndim <= 1 or self.n_steps < 1:
            return value
        name = '/'.join((self.layer_instance.name, *path))
        if value.ndim > 2:
            if self.error_on_non_matrix:
                raise SpectralNormNonMatrixError(layer_where(self), name, value.shape)
        shape = value.shape
        matrix = value.reshape(-1, shape[-1]) if value.ndim > 2 else value
        u_shape = (1, shape[-1])
        u_var = self.variable(
            self.collection_name, name + '/u',
            lambda: jax.random.normal(self.make_rng('params'), u_shape, self.param_dtype),
        )  # fmt: skip
        sigma_var = self.variable(
            self.collection_name, name + '/sigma', jnp.ones, (), self.param_dtype
        )
        u = u_var.value
        for _ in range(self.n_steps):
            v = _l2_normalize(u @ matrix.T, eps=self.epsilon)
            u = _l2_normalize(v @ matrix, eps=self.epsilon)
        # The singular vectors are an estimate to carry over, not something to train.
        u = lax.stop_gradient(u)
        v = lax.stop_gradient(v)
        sigma = (v @ matrix @ u.T)[0, 0]
        normalized = (matrix / jnp.where(sigma != 0, sigma, 1)).reshape(shape)
        if update_stats:
            u_var.value = u
            sigma_var.value = sigma
        dtype = canonicalize_dtype(value, u, v, sigma, dtype=self.dtype)
        return normalized if normalized.dtype == dtype else normalized.astype(dtype)


class WeightNorm(Module):
    """Weight normalization (Salimans and Kingma, 2016) of a wrapped layer's parameters.

    Each parameter whose path (``'<layer>/<param>'``) contains one of the strings in
    ``variable_filter`` is replaced by ``scale * w / ||w||``, the norm taken over
    every axis but ``feature_axes``; ``scale`` is a parameter of this module named
    ``'<layer>/<param>/scale'`` with the shape of those feature axes.

    Attributes:
      layer_instance: the layer whose parameters are normalized.
      epsilon: keeps the normalization away from dividing by zero.
      dtype: dtype of the normalized parameters (default: inferred).
      param_dtype: dtype of ``scale``.
      use_scale: learn a ``scale`` (otherwise the parameters get unit norm).
      scale_init: initializer of ``scale``.
      feature_axes: axes that keep their own norm (``None``: one norm for the
        whole parameter, scalar ``scale``).
      variable_filter: substrings selecting the parameters to normalize (empty:
        all of them).
    """

    layer_instance: Module
    epsilon: float = 1e-12
    dtype: Dtype | None = None
    param_dtype: Dtype = jnp.float32
    use_scale: bool = True
    scale_init: Initializer = initializers.ones
    feature_axes: Axes | None = -1
    variable_filter: Iterable[str] | None = dataclasses.field(default_factory=lambda: {'kernel'})

    @compact
    def __call__(self, *args, **kwargs):
        """Calls the wrapped layer with weight-normalized parameters."""

        def forward(layer):
            return layer(*args, **kwargs)

        def normalize(variables):
            return _map_params(variables, self._weight_normalize)

        # Immutable, as in Flax: the wrapped layer makes its variables in init but
        # changes none in apply (its sows and captured intermediates are dropped, a
        # state update is refused), whatever apply's mutable= says.
        return _map_variables()(forward, trans_in_fn=normalize, init=self.is_initializing())(
            self.layer_instance
        )

    def _weight_normalize(self, path: tuple[str, ...], value: Array) -> Array:
        name = '/'.join((self.layer_instance.name, *path))
        if self.variable_filter and not any(f in name for f in self.variable_filter):
            return value
        if self.feature_axes is None:
            feature_axes = ()
        else:
            feature_axes = canonicalize_axes(
                self, 'feature_axes', self.feature_axes, value.shape,
                f'The feature axes apply to parameter "{name}"; pass axes within its '
                'rank, or feature_axes=None for one norm over the whole parameter.',
            )  # fmt: skip
        reduction_axes = tuple(i for i in range(value.ndim) if i not in feature_axes)
        normalized = _l2_normalize(value, axis=reduction_axes, eps=self.epsilon)
        args = [value]
        if self.use_scale:
            scale_shape = tuple(value.shape[ax] for ax in feature_axes)
            scale = self.param(name + '/scale', self.scale_init, scale_shape, self.param_dtype)
            broadcast_shape = [1] * value.ndim
            for ax in feature_axes:
                broadcast_shape[ax] = value.shape[ax]
            normalized = normalized * scale.reshape(broadcast_shape)
            args.append(scale)
        dtype = canonicalize_dtype(*args, dtype=self.dtype)
        return normalized if normalized.dtype == dtype else normalized.astype(dtype)
