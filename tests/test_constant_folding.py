"""Labels closed over by a jitted function are constants of its program; XLA folds what is
computed from constants at compile time (a sort of the labels for the ideal DCG took minutes
at [1024, 1024]). Every metric and loss must compile the same program whether its labels,
mask and judgments are arguments or closed over: the same operations, none folded away.

Compiled with every XLA pass (constant folding is one of them), not under quick_compiles."""

import collections
import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrank
from jaxrank import losses

B, N = 8, 48


def _data():
    rng = np.random.default_rng(0)
    scores = rng.standard_normal((B, N)).astype(np.float32)
    labels = rng.integers(0, 3, (B, N))
    where = np.arange(N) < rng.integers(N // 2, N + 1, B)[:, None]
    judgments = rng.integers(0, 3, (B, N + 7))
    return scores, labels, where, judgments


CASES = {
    "ndcg@10": lambda s, y, w, j: jaxrank.ndcg(s, y, k=10, where=w),
    "ndcg with judgments": lambda s, y, w, j: jaxrank.ndcg(s, y, where=w, judgments=j),
    "average_precision": lambda s, y, w, j: jaxrank.average_precision(s, y, where=w, judgments=j),
    "metric_loss (default) gradient": lambda s, y, w, j: jax.grad(
        lambda x: losses.metric_loss(x, y, where=w, k=10).sum()
    )(s),
    "lambda_loss gradient": lambda s, y, w, j: jax.grad(lambda x: losses.lambda_loss(x, y, where=w).sum())(s),
    "listmle": lambda s, y, w, j: losses.listmle(s, y, where=w),
}


def _operations(fn, *args) -> collections.Counter:
    """The compiled program's operations by kind, less the ones that hold data (an argument
    or a constant: the labels are one or the other) and layout copies."""
    hlo = jax.jit(fn).lower(*args).compile().as_text()
    found = collections.Counter(re.findall(r"= \S+ ([a-z][a-z\-]*)\(", hlo))
    for kind in ("parameter", "constant", "copy", "bitcast"):
        found.pop(kind, None)
    return found


@pytest.mark.parametrize("case", list(CASES))
def test_closed_over_labels_compile_the_program_of_labels_given_as_arguments(case):
    metric = CASES[case]
    scores, labels, where, judgments = _data()
    as_arguments = _operations(metric, scores, labels, where, judgments)
    closed = _operations(lambda s: metric(s, labels, where, judgments), scores)
    as_lists = _operations(lambda s: metric(s, labels.tolist(), where.tolist(), judgments.tolist()), scores)
    assert closed == as_arguments  # folded: on the code before the barrier, a third of them went
    assert as_lists == as_arguments


def test_closed_over_labels_give_the_values_of_labels_given_as_arguments():
    scores, labels, where, judgments = _data()
    for case, metric in CASES.items():
        want = jax.jit(metric)(scores, labels, where, judgments)
        got = jax.jit(functools.partial(lambda s: metric(s, labels, where, judgments)))(scores)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, err_msg=case)
    # outside a trace the labels are used as they are
    assert float(jaxrank.ndcg(jnp.asarray(scores), labels, k=10).sum()) > 0
