"""The machinery behind :mod:`jaxrank.compat.torchmetrics`: torchmetrics' input checks
(with its messages), one compiled kernel per setting, the aggregation over queries, and
the ``RetrievalMetric`` state (``update``, ``compute``, ``reset``, ``forward``).

A kernel is a function ``(preds, target, where, **settings) -> values`` over padded
lists ``[..., n]``; :mod:`jaxrank.compat.torchmetrics` defines one per metric.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Literal, Optional, Union

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import _checks
from jaxrank.compat._common import as_array
from jaxrank.lists import group_by_query

Array = jax.Array
Aggregation = Union[Literal["mean", "median", "min", "max"], Callable]

_ACTIONS = ("error", "skip", "neg", "pos")


# Checks (torchmetrics' messages) -------------------------------------------------------------
def check_top_k(value, name: str = "top_k") -> Optional[int]:
    if value is not None and not (_checks.is_int(value) and value > 0):
        raise ValueError(f"`{name}` has to be a positive integer or None")
    return None if value is None else int(value)


def check_adaptive(adaptive_k) -> bool:
    if not isinstance(adaptive_k, bool):
        raise ValueError("`adaptive_k` has to be a boolean")
    return adaptive_k


def check_max_fpr(value) -> Optional[float]:
    if value is not None and not (isinstance(value, float) and 0 < value <= 1):
        raise ValueError(f"Arguments `max_fpr` should be a float in range (0, 1], but got: {value}")
    return value


# The static settings a kernel may take, each with its check.
_SETTINGS = {
    "top_k": check_top_k,
    "adaptive_k": check_adaptive,
    "max_fpr": check_max_fpr,
    "max_k": functools.partial(check_top_k, name="max_k"),
}


def _types(preds, target, allow_non_binary: bool) -> None:
    """torchmetrics' dtype and binary-target checks, on JAX or numpy arrays."""
    if not (
        target.dtype == bool or jnp.issubdtype(target.dtype, jnp.integer) or jnp.issubdtype(target.dtype, jnp.floating)
    ):
        raise ValueError("`target` must be a tensor of booleans, integers or floats")
    if not jnp.issubdtype(preds.dtype, jnp.floating):
        raise ValueError("`preds` must be a tensor of floats")
    if not allow_non_binary and not isinstance(target, jax.core.Tracer):
        if target.size and (float(target.max()) > 1 or float(target.min()) < 0):
            raise ValueError("`target` must contain `binary` values")


def functional_inputs(preds, target, allow_non_binary: bool = False) -> tuple[Array, Array]:
    """torchmetrics' functional inputs: one list of any shape, flattened."""
    preds, target = as_array(preds), as_array(target)
    if preds.shape != target.shape:
        raise ValueError("`preds` and `target` must be of the same shape")
    if preds.ndim == 0 or preds.size == 0:
        raise ValueError("`preds` and `target` must be non-empty and non-scalar tensors")
    _types(preds, target, allow_non_binary)
    return preds.ravel(), target.ravel()


@functools.cache
def compiled(kernel: Callable) -> Callable:
    """One compiled kernel per function, shape and static setting, shared by every call."""
    return jax.jit(kernel, static_argnames=[a for a in _SETTINGS if a in kernel.__code__.co_varnames])


def functional(kernel: Callable, preds, target, allow_non_binary: bool = False, **settings):
    """A functional metric: the inputs and the settings checked, then the kernel on one list."""
    preds, target = functional_inputs(preds, target, allow_non_binary)
    settings = {name: _SETTINGS[name](value) for name, value in settings.items()}
    return compiled(kernel)(preds, target, None, **settings)


# Aggregation over queries ----------------------------------------------------------------------
def _reduce(values: Array, aggregation: Aggregation, as_torch: bool = False) -> Array:
    """torchmetrics' ``_retrieval_aggregate`` over the first axis. A callable gets
    ``(values, dim=None)`` (``dim=0`` for a curve's ``[Q, k]``): a JAX array, or a CPU torch
    tensor when ``as_torch`` (the user's inputs were torch tensors); its result as a JAX array."""
    dim = None if values.ndim == 1 else 0
    if aggregation == "mean":
        return jnp.mean(values, axis=0)
    if aggregation == "median":  # torch.median: the lower of the two middle values
        return jnp.sort(values, axis=0)[(values.shape[0] - 1) // 2]
    if aggregation == "min":
        return jnp.min(values, axis=0)
    if aggregation == "max":
        return jnp.max(values, axis=0)
    if as_torch:
        return as_array(aggregation(sys.modules["torch"].from_numpy(np.array(values)), dim=dim))
    return as_array(aggregation(values, dim=dim))


def aggregate(
    values: Array, empty, action: str, aggregation: Aggregation, message: str, as_torch: bool = False
) -> Array:
    """The per-query ``values`` ``[Q, ...]`` over queries, the ``empty`` ones decided by ``action``
    (``as_torch``: a callable ``aggregation`` gets a torch tensor, see :func:`_reduce`)."""
    empty = np.asarray(empty)
    if action == "error" and empty.any():
        raise ValueError(message)
    if action == "skip":
        values = values[~empty]
    else:
        flags = jnp.asarray(empty).reshape(empty.shape + (1,) * (values.ndim - 1))
        values = jnp.where(flags, 1.0 if action == "pos" else 0.0, values)
    if values.shape[0] == 0:
        return jnp.zeros(values.shape[1:], values.dtype)
    return _reduce(values, aggregation, as_torch)


def _is_torch(x) -> bool:
    """Whether ``x`` is a torch tensor (torch is never imported here: if it is not loaded, no
    tensor of it exists)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def axes(ax):
    """``(figure, axes)``: new ones when ``ax`` is None (matplotlib is imported only here)."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ModuleNotFoundError("plot() needs matplotlib: pip install 'jaxrank[plot]'") from e
    return plt.subplots() if ax is None else (None, ax)


# The class interface ---------------------------------------------------------------------------
class RetrievalMetric:
    """torchmetrics' ``RetrievalMetric``: state, ``update``, ``compute``, ``reset``, ``forward``.

    A subclass binds its kernel (the per-query values of padded lists ``[Q, n]``) and
    settings with ``_bind``. The state is plain Python and NumPy (the kernel function by its
    name, the compiled program looked up when used), so a metric pickles and deep-copies with
    its state, as torchmetrics' do for checkpoints."""

    _kernel_fn: Callable
    _static: tuple[str, ...] = ()
    _allow_non_binary = False
    _empty_message = "`compute` method was provided with a query with no positive target."

    def __init__(
        self,
        empty_target_action: str = "neg",
        ignore_index: Optional[int] = None,
        aggregation: Aggregation = "mean",
    ) -> None:
        if empty_target_action not in _ACTIONS:
            raise ValueError(f"Argument `empty_target_action` received a wrong value `{empty_target_action}`.")
        if ignore_index is not None and not _checks.is_int(ignore_index):
            raise ValueError("Argument `ignore_index` must be an integer or None.")
        if not (aggregation in ("mean", "median", "min", "max") or callable(aggregation)):
            raise ValueError(
                "Argument `aggregation` must be one of `mean`, `median`, `min`, `max` or a custom callable function"
                f"which takes tensor of values, but got {aggregation}."
            )
        self.empty_target_action = empty_target_action
        self.ignore_index = ignore_index
        self.aggregation = aggregation
        self.reset()

    def reset(self) -> None:
        """Forget every ``update``."""
        self._preds: list[np.ndarray] = []
        self._target: list[np.ndarray] = []
        self._indexes: list[np.ndarray] = []
        self._torch = False  # whether an update was given torch tensors (what aggregation= gets)

    def update(self, preds, target, indexes) -> None:
        """Add items: ``preds``, ``target`` and integer query ``indexes`` of one shape (flattened)."""
        if indexes is None:
            raise ValueError("Argument `indexes` cannot be None")
        torch_inputs = _is_torch(preds)
        preds, target, indexes = (np.asarray(x) for x in (preds, target, indexes))
        if indexes.shape != preds.shape or preds.shape != target.shape:
            raise ValueError("`indexes`, `preds` and `target` must be of the same shape")
        if not np.issubdtype(indexes.dtype, np.integer):
            raise ValueError("`indexes` must be a tensor of long integers")
        if self.ignore_index is not None:
            keep = target != self.ignore_index
            preds, target, indexes = preds[keep], target[keep], indexes[keep]
        if indexes.ndim == 0 or indexes.size == 0:
            raise ValueError("`indexes`, `preds` and `target` must be non-empty and non-scalar tensors")
        _types(preds, target, self._allow_non_binary)  # numpy here: no device copy for a check
        self._preds.append(preds.ravel())
        self._target.append(target.ravel())
        self._indexes.append(indexes.ravel())
        self._torch = self._torch or torch_inputs

    def _bind(self, kernel: Callable, **settings) -> None:
        """Check the static settings and keep them as attributes, beside the kernel."""
        for name, value in settings.items():
            setattr(self, name, _SETTINGS[name](value))
        self._kernel_fn = kernel
        self._static = tuple(settings)

    @property
    def _kernel(self) -> Callable:
        """The compiled kernel with the static settings bound (a jitted function does not pickle)."""
        return functools.partial(compiled(self._kernel_fn), **{name: getattr(self, name) for name in self._static})

    def _grouped(self):
        if not self._preds:
            raise ValueError("compute() was called before any update()")
        return group_by_query(*(np.concatenate(x) for x in (self._preds, self._target, self._indexes)))

    def _empty(self, target: Array, where: Array) -> Array:
        return jnp.sum(jnp.where(where, target, 0), axis=-1) == 0

    def _aggregate(self, values: Array, empty: Array) -> Array:
        return aggregate(values, empty, self.empty_target_action, self.aggregation, self._empty_message, self._torch)

    def compute(self) -> Array:
        """The aggregate of the per-query values over every query seen."""
        g = self._grouped()
        return self._aggregate(self._kernel(g.preds, g.target, g.where), self._empty(g.target, g.where))

    def __call__(self, preds, target, indexes):
        """torchmetrics' ``forward``: update the state and return this batch's value alone."""
        batch = object.__new__(type(self))
        batch.__dict__.update(self.__dict__)
        batch.reset()
        batch.update(preds, target, indexes)
        self.update(preds, target, indexes)
        return batch.compute()

    forward = __call__


class TopK(RetrievalMetric):
    """A metric whose one setting is ``top_k``; a subclass sets ``_fn``, its kernel."""

    _fn: Callable

    def __init__(
        self,
        empty_target_action: str = "neg",
        ignore_index: Optional[int] = None,
        top_k: Optional[int] = None,
        aggregation: Aggregation = "mean",
    ) -> None:
        super().__init__(empty_target_action, ignore_index, aggregation)
        self._bind(type(self)._fn, top_k=top_k)
