"""torcheval's ranking functions, value for value, over jaxrank's core.

``retrieval_recall`` and ``retrieval_precision`` take one list ``[n]`` or ``num_tasks`` of
them ``[num_tasks, n]``; ``hit_rate`` and ``reciprocal_rank`` take class scores ``[B, C]``
and the index of the true class ``[B]``. Conventions kept (``docs/compat/torcheval.md``):

* ``retrieval_recall`` divides by the relevant items of the list, so a list without one
  gives NaN (0/0), as torcheval's code does (trec_eval and torchmetrics give 0).
* ``retrieval_precision`` divides by ``k`` (``min(k, n)`` with ``limit_k_to_size``).
* ``hit_rate`` and ``reciprocal_rank`` rank the true class after the classes scored strictly
  higher only: a tie counts in its favour (:func:`jaxrank.hard` ``"optimistic"``).
* torcheval orders tied scores at the ``k`` cut as ``torch.topk`` happens to (unspecified);
  here ties keep input order (``hard("stable")``).
* Errors are torcheval's, shapes printed as the caller's library prints them
  (``torch.Size([1, 3, 1])`` for torch tensors, ``(1, 3, 1)`` for numpy or JAX arrays).

Example:
  >>> from jaxrank.compat.torcheval import retrieval_recall
  >>> float(retrieval_recall([0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2], [0, 0, 1, 1, 1, 0, 1], k=2))
  0.25
"""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp

from jaxrank import metrics
from jaxrank.compat._common import STABLE, as_array
from jaxrank.ranking import hard

Array = jax.Array

_OPTIMISTIC = hard("optimistic")


def _param_check(k: Optional[int], limit_k_to_size: bool) -> None:
    if k is not None and k <= 0:
        raise ValueError(f"k must be a positive integer, got k={k}.")
    if limit_k_to_size and k is None:
        raise ValueError("when limit_k_to_size is True, k must be a positive (>0) integer.")


def _shape(given, array: Array):
    """The shape as the caller's own library prints it: a torch tensor's ``torch.Size([1, 3])``,
    numpy's and JAX's ``(1, 3)``; a list's as its array's."""
    return getattr(given, "shape", array.shape)


def _lists(input, target, num_tasks: int) -> tuple[Array, Array]:
    given = input, target
    input, target = as_array(input), as_array(target)
    if input.shape != target.shape:
        raise ValueError(
            f"input and target must be of the same shape, got input.shape={_shape(given[0], input)} "
            f"and target.shape={_shape(given[1], target)}."
        )
    if num_tasks == 1:
        if input.ndim != 1:
            raise ValueError(
                f"input and target should be one dimensional tensors, got input and target dimensions={input.ndim}."
            )
    elif input.ndim != 2 or input.shape[0] != num_tasks:
        raise ValueError(
            f"input and target should be two dimensional tensors with {num_tasks} rows, "
            f"got input and target shape={_shape(given[0], input)}."
        )
    return input, target


def retrieval_recall(
    input, target, k: Optional[int] = None, limit_k_to_size: bool = False, num_tasks: int = 1
) -> Array:
    """Relevant items within the top ``k`` over all relevant items of the list, per task.

    .. math:: R@k = \\frac{\\sum_i y_i [r_i \\le k]}{\\sum_i y_i} \\quad (\\text{NaN when } \\sum_i y_i = 0)

    ``limit_k_to_size`` cannot change recall; it is checked as torcheval does.
    Shapes: ``[n] -> []`` or ``[num_tasks, n] -> [num_tasks]``.

    Example:
      >>> from jaxrank.compat.torcheval import retrieval_recall
      >>> retrieval_recall([[0.9, 0.1, 0.5], [0.3, 0.2, 0.1]], [[1, 1, 0], [0, 0, 0]], k=1, num_tasks=2).tolist()
      [0.5, nan]
    """
    _param_check(k, limit_k_to_size)
    input, target = _lists(input, target, num_tasks)
    hits = metrics.num_rel_ret(input, target, k=k, ranker=STABLE)
    return hits / jnp.sum(target, axis=-1)


def retrieval_precision(
    input, target, k: Optional[int] = None, limit_k_to_size: bool = False, num_tasks: int = 1
) -> Array:
    """Relevant items within the top ``k`` over ``k`` (``min(k, n)`` with
    ``limit_k_to_size``; ``n`` without ``k``), per task.

    Example:
      >>> from jaxrank.compat.torcheval import retrieval_precision
      >>> float(retrieval_precision([0.9, 0.1, 0.5], [1, 1, 0], k=4))
      0.5
      >>> round(float(retrieval_precision([0.9, 0.1, 0.5], [1, 1, 0], k=4, limit_k_to_size=True)), 4)
      0.6667
    """
    _param_check(k, limit_k_to_size)
    input, target = _lists(input, target, num_tasks)
    return metrics.precision(input, target, k=k, adaptive=limit_k_to_size, ranker=STABLE)


def _classes(input, target) -> tuple[Array, Array]:
    given = input, target
    input, target = as_array(input), as_array(target)
    shapes = _shape(given[0], input), _shape(given[1], target)
    if target.ndim != 1:
        raise ValueError(f"target should be a one-dimensional tensor, got shape {shapes[1]}.")
    if input.ndim != 2:
        raise ValueError(f"input should be a two-dimensional tensor, got shape {shapes[0]}.")
    if input.shape[0] != target.shape[0]:
        raise ValueError(
            "`input` and `target` should have the same minibatch dimension, "
            f"got shapes {shapes[0]} and {shapes[1]}, respectively."
        )
    return input, jax.nn.one_hot(target, input.shape[-1], dtype=input.dtype)


def hit_rate(input, target, *, k: Optional[int] = None) -> Array:
    """1 when the true class is within the top ``k`` (ties in its favour), per row: ``[B]``.

    Example:
      >>> from jaxrank.compat.torcheval import hit_rate
      >>> hit_rate([[0.3, 0.1, 0.6], [0.5, 0.2, 0.3]], [2, 1], k=2).tolist()
      [1.0, 0.0]
    """
    input, labels = _classes(input, target)
    if k is not None and k <= 0:
        raise ValueError(f"k should be None or positive, got {k}.")
    return metrics.success(input, labels, k=k, ranker=_OPTIMISTIC)


def reciprocal_rank(input, target, *, k: Optional[int] = None) -> Array:
    """:math:`1 / r` of the true class (ties in its favour), 0 beyond ``k``, per row: ``[B]``.

    Example:
      >>> from jaxrank.compat.torcheval import reciprocal_rank
      >>> [round(v, 4) for v in reciprocal_rank([[0.3, 0.1, 0.6], [0.5, 0.2, 0.3]], [0, 1]).tolist()]
      [0.5, 0.3333]
    """
    input, labels = _classes(input, target)
    return metrics.reciprocal_rank(input, labels, k=k, ranker=_OPTIMISTIC)
