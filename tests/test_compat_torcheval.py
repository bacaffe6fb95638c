"""jaxrank.compat.torcheval against torcheval 0.0.7 (and, for retrieval_recall, which 0.0.7
lacks, against torchmetrics' recall on positive scores, the seed's worked examples and 0/0)."""

import re

import numpy as np
import pytest
import torch
import torchmetrics.functional.retrieval as tmf
from torcheval.metrics.functional import hit_rate, reciprocal_rank, retrieval_precision

from jaxrank.compat import torcheval as te

SIZES = (1, 6)


def tasks(seed, n, num_tasks=3):
    """Distinct float32 scores; one task with no relevant item, one with all relevant."""
    rng = np.random.default_rng(seed)
    scores = np.stack([rng.permutation(4 * n)[:n] for _ in range(num_tasks)]).astype(np.float32) / (4 * n)
    target = rng.integers(0, 2, (num_tasks, n))
    target[0] = 0
    target[-1] = 1
    return scores, target


def close(ours, theirs):
    np.testing.assert_allclose(np.asarray(ours), theirs.numpy().astype(np.float64), atol=1e-6, rtol=0)


@pytest.mark.parametrize("n", SIZES)
def test_retrieval_precision_equals_torcheval(n):
    scores, target = tasks(n, n)
    for k, limit in [(None, False), (2, True), (n + 2, False), (n + 2, True)]:
        theirs = retrieval_precision(torch.from_numpy(scores), torch.from_numpy(target), k, limit, num_tasks=3)
        close(te.retrieval_precision(scores, target, k, limit, num_tasks=3), theirs)
        theirs = retrieval_precision(torch.from_numpy(scores[1]), torch.from_numpy(target[1]), k, limit)
        close(te.retrieval_precision(scores[1], target[1], k, limit), theirs)


@pytest.mark.parametrize("n", SIZES)
def test_retrieval_recall_equals_torchmetrics_recall_and_is_nan_without_relevant(n):
    scores, target = tasks(n + 10, n)
    for k in (None, 2):
        ours = np.asarray(te.retrieval_recall(scores, target, k, num_tasks=3))
        assert np.isnan(ours[0])  # torcheval: 0 relevant items retrieved / 0 relevant items
        for row in (1, 2):  # torchmetrics agrees where scores are positive and a relevant item exists
            if target[row].sum() == 0:
                assert np.isnan(ours[row])
                continue
            close(
                ours[row],
                tmf.retrieval_recall(torch.from_numpy(scores[row] + 1), torch.from_numpy(target[row]), top_k=k),
            )


def test_retrieval_recall_seed_examples():
    scores, target = [0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2], [0, 0, 1, 1, 1, 0, 1]
    assert float(te.retrieval_recall(scores, target)) == 1.0
    assert float(te.retrieval_recall(scores, target, k=2)) == 0.25


@pytest.mark.parametrize("ties", [False, True])
def test_hit_rate_and_reciprocal_rank_equal_torcheval(ties):
    rng = np.random.default_rng(7)
    scores = (rng.integers(0, 3, (40, 6)) if ties else rng.random((40, 6))).astype(np.float32)
    target = rng.integers(0, 6, 40)
    for k in (None, 1, 3, 6, 9):
        close(te.hit_rate(scores, target, k=k), hit_rate(torch.from_numpy(scores), torch.from_numpy(target), k=k))
        close(
            te.reciprocal_rank(scores, target, k=k),
            reciprocal_rank(torch.from_numpy(scores), torch.from_numpy(target), k=k),
        )


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: te.retrieval_recall([0.1, 0.2], [1, 0], k=0), "k must be a positive integer"),
        (lambda: te.retrieval_recall([0.1, 0.2], [1, 0], limit_k_to_size=True), "limit_k_to_size"),
        (lambda: te.retrieval_recall([0.1, 0.2], [1], k=1), "same shape"),
        (lambda: te.retrieval_recall([[0.1, 0.2]], [[1, 0]]), "one dimensional"),
        (lambda: te.retrieval_precision([0.1, 0.2], [1, 0], num_tasks=2), "2 rows"),
        (lambda: te.hit_rate([[0.1, 0.2]], [[1]]), "target should be a one-dimensional"),
        (lambda: te.hit_rate([0.1, 0.2], [1]), "input should be a two-dimensional"),
        (lambda: te.reciprocal_rank([[0.1, 0.2]], [1, 0]), "same minibatch"),
        (lambda: te.hit_rate([[0.1, 0.2]], [1], k=0), "k should be None or positive"),
    ],
)
def test_bad_input_raises_as_torcheval(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def _message(call, *args, **kwargs) -> str:
    with pytest.raises(ValueError) as error:
        call(*args, **kwargs)
    return str(error.value)


@pytest.mark.parametrize(
    "name, args, kwargs",
    [
        ("retrieval_precision", ([[1.0, 2.0], [1.0, 2.0]], [[0, 0, 0], [0, 0, 0]]), dict()),
        ("retrieval_precision", ([[[1.0], [1.0], [1.0]]], [[[1], [1], [1]]]), dict(k=1, num_tasks=3)),
        ("retrieval_precision", ([[[1.0], [1.0], [1.0]]], [[[1], [1], [1]]]), dict(k=1)),
        ("hit_rate", ([[0.1, 0.2]], [[1]]), dict()),
        ("reciprocal_rank", ([0.1, 0.2], [1]), dict()),
    ],
)
def test_error_text_names_shapes_as_the_callers_library(name, args, kwargs):
    """torch tensors in: torcheval's message, word for word (``torch.Size([1, 3, 1])``);
    numpy arrays in: numpy's shapes (``(1, 3, 1)``)."""
    import torcheval.metrics.functional as tef

    tensors = [torch.tensor(a) for a in args]
    theirs = _message(getattr(tef, name), *tensors, **kwargs)
    assert _message(getattr(te, name), *tensors, **kwargs) == theirs
    as_tuples = re.sub(r"torch\.Size\(\[([0-9, ]*)\]\)", lambda m: str(tuple(map(int, m[1].split(", ")))), theirs)
    assert _message(getattr(te, name), *map(np.asarray, args), **kwargs) == as_tuples


def test_minibatch_error_names_torch_shapes():
    # torcheval raises this one with two arguments (a tuple's text); ours is its sentence
    message = _message(te.hit_rate, torch.zeros(2, 3), torch.zeros(3, dtype=torch.long))
    assert message == (
        "`input` and `target` should have the same minibatch dimension, "
        "got shapes torch.Size([2, 3]) and torch.Size([3]), respectively."
    )
