"""jaxrank.compat.torchmetrics against torchmetrics itself (CPU torch)."""

import copy
import functools
import pickle

import numpy as np
import pytest
import torch
import torchmetrics.functional.retrieval as tmf
import torchmetrics.retrieval as tmr

from jaxrank.compat import torchmetrics as tm

TOL = 1e-6  # torchmetrics computes in float32

FUNCTIONS = {
    "retrieval_average_precision": [dict(), dict(top_k=1), dict(top_k=3), dict(top_k=40)],
    "retrieval_reciprocal_rank": [dict(), dict(top_k=2)],
    "retrieval_normalized_dcg": [dict(), dict(top_k=1), dict(top_k=3)],
    "retrieval_precision": [dict(), dict(top_k=3), dict(top_k=40), dict(top_k=40, adaptive_k=True)],
    "retrieval_recall": [dict(), dict(top_k=2)],
    "retrieval_hit_rate": [dict(), dict(top_k=2)],
    "retrieval_fall_out": [dict(), dict(top_k=2)],
    "retrieval_r_precision": [dict()],
    "retrieval_auroc": [dict(), dict(top_k=3), dict(max_fpr=0.5)],
    "retrieval_precision_recall_curve": [dict(), dict(max_k=3), dict(max_k=40), dict(max_k=40, adaptive_k=True)],
}


def as_numpy(x):
    if isinstance(x, tuple):
        return [as_numpy(v) for v in x]
    return np.asarray(x.numpy() if isinstance(x, torch.Tensor) else x, np.float64)


def assert_same(ours, theirs):
    for a, b in zip(np.atleast_1d(as_numpy(ours)), np.atleast_1d(as_numpy(theirs))):
        np.testing.assert_allclose(a, b, atol=TOL, rtol=0)


def lists(seed, sizes, graded=False, ties=False):
    """(preds, target) lists of every given size: scores of both signs (torchmetrics drops
    items scored <= 0 in some metrics), and lists without, with some and with only relevant items."""
    rng = np.random.default_rng(seed)
    out = []
    for n in sizes:
        for kind in ("random", "none", "all"):
            if ties:
                preds = rng.integers(-1, 3, n).astype(np.float32)
            else:
                preds = (rng.permutation(4 * n)[:n] / (2.0 * n) - 0.5).astype(np.float32)  # distinct
            target = rng.integers(0, 5 if graded else 2, n)
            target = {"random": target, "none": np.zeros(n, int), "all": np.maximum(target, 1)}[kind]
            out.append((preds, target))
    return out


def ours_and_theirs(name, kwargs, preds, target):
    theirs = getattr(tmf, name)(torch.from_numpy(preds), torch.from_numpy(target), **kwargs)
    return getattr(tm, name)(preds.astype(np.float64), target, **kwargs), theirs


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_functional_equals_torchmetrics(name):
    graded = name == "retrieval_normalized_dcg"
    for preds, target in lists(0, (1, 4, 13), graded=graded):
        for kwargs in FUNCTIONS[name]:
            ours, theirs = ours_and_theirs(name, kwargs, preds, target)
            assert_same(ours, theirs)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_functional_with_tied_scores(name):
    """torch orders tied scores as its sort happens to; ours keep input order. Breaking the
    ties in input order (signs kept) must give torchmetrics' value; nDCG and the ROC AUC of
    the whole list, which treat ties exactly, must agree on the tied scores themselves."""
    graded = name == "retrieval_normalized_dcg"
    for preds, target in lists(1, (4, 13), graded=graded, ties=True):
        untied = (preds - np.arange(preds.size) / (2.0 * preds.size)).astype(np.float32)
        for kwargs in FUNCTIONS[name]:
            exact_ties = name == "retrieval_normalized_dcg" or (name == "retrieval_auroc" and "top_k" not in kwargs)
            # Ties across the top_k cut of the AUROC: torch picks some of them, ours average every pick.
            mine = untied if name == "retrieval_auroc" and "top_k" in kwargs else preds
            ours = getattr(tm, name)(mine.astype(np.float64), target, **kwargs)
            theirs = getattr(tmf, name)(
                torch.from_numpy(preds if exact_ties else untied), torch.from_numpy(target), **kwargs
            )
            assert_same(ours, theirs)


def test_functional_flattens_like_torchmetrics():
    preds, target = lists(2, (12,))[0]
    ours, theirs = ours_and_theirs("retrieval_average_precision", {}, preds.reshape(3, 4), target.reshape(3, 4))
    assert_same(ours, theirs)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: tm.retrieval_precision([0.1, 0.2], [1]), "same shape"),
        (lambda: tm.retrieval_precision([], []), "non-empty"),
        (lambda: tm.retrieval_precision([1, 2], [1, 0]), "`preds` must be a tensor of floats"),
        (lambda: tm.retrieval_precision([0.1, 0.2], [2, 0]), "binary"),
        (lambda: tm.retrieval_precision([0.1, 0.2], [1, 0], top_k=0), "`top_k` has to be a positive integer"),
        (lambda: tm.retrieval_precision([0.1, 0.2], [1, 0], adaptive_k=1), "`adaptive_k` has to be a boolean"),
        (lambda: tm.retrieval_auroc([0.1, 0.2], [1, 0], max_fpr=2.0), "max_fpr"),
        (lambda: tm.retrieval_precision_recall_curve([0.1, 0.2], [1, 0], max_k=-1), "`max_k` has to be"),
        (lambda: tm.RetrievalMAP(empty_target_action="drop"), "empty_target_action"),
        (lambda: tm.RetrievalMAP(ignore_index=0.5), "ignore_index"),
        (lambda: tm.RetrievalMAP(aggregation="sum"), "aggregation"),
        (lambda: tm.RetrievalRecallAtFixedPrecision(min_precision=1), "min_precision"),
        (lambda: tm.RetrievalMAP().update([0.1], [1], None), "indexes"),
        (lambda: tm.RetrievalMAP().update([0.1], [1], [0.0]), "long integers"),
        (lambda: tm.RetrievalMAP(ignore_index=1).update([0.1], [1], [0]), "non-empty"),
        (lambda: tm.RetrievalMAP().update([0.1, 0.2], [2, 0], [0, 0]), "binary"),
        (lambda: tm.RetrievalMAP().update([1, 2], [1, 0], [0, 0]), "`preds` must be a tensor of floats"),
    ],
)
def test_bad_input_raises_as_torchmetrics(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# Classes -------------------------------------------------------------------------------------
CLASSES = [
    ("RetrievalMAP", dict(top_k=3)),
    ("RetrievalMRR", dict()),
    ("RetrievalNormalizedDCG", dict(top_k=4)),
    ("RetrievalPrecision", dict(top_k=5, adaptive_k=True)),
    ("RetrievalRecall", dict(top_k=2)),
    ("RetrievalHitRate", dict(top_k=2)),
    ("RetrievalFallOut", dict(top_k=3)),
    ("RetrievalRPrecision", dict()),
    ("RetrievalAUROC", dict(max_fpr=0.5)),
    ("RetrievalPrecisionRecallCurve", dict(max_k=6)),
    ("RetrievalRecallAtFixedPrecision", dict(min_precision=0.3, adaptive_k=True)),
]


def flat_queries(seed, graded=False, ignore=None):
    """Queries of every size 1..16 (several without a relevant item, some all relevant, one
    without a non-relevant one), shuffled together, cut into three update batches so that
    a query's items arrive in different calls."""
    rng = np.random.default_rng(seed)
    preds, target, indexes = [], [], []
    for q, (p, t) in enumerate(lists(seed, range(1, 17), graded=graded)):
        preds.append(p)
        target.append(t)
        indexes.append(np.full(p.size, 3 * q + 100))
    preds, target, indexes = map(np.concatenate, (preds, target, indexes))
    if ignore is not None:
        target = np.where(rng.random(target.size) < 0.15, ignore, target)
    order = rng.permutation(preds.size)
    cuts = np.sort(rng.choice(np.arange(1, preds.size), 2, replace=False))
    return [tuple(x[part] for x in (preds, target, indexes)) for part in np.split(order, cuts)]


def run_both(name, kwargs, batches):
    ours, theirs = getattr(tm, name)(**kwargs), getattr(tmr, name)(**kwargs)
    for p, t, i in batches:
        ours.update(p.astype(np.float64), t, indexes=i)
        theirs.update(torch.from_numpy(p), torch.from_numpy(t), indexes=torch.from_numpy(i))
    return ours, theirs


def spread(values, dim=None):  # a callable aggregation that works on torch and JAX arrays alike
    return values.max() - values.min() if dim is None else values.max(dim)[0] - values.min(dim)[0]


def spread_jax(values, dim=None):
    return values.max(axis=dim) - values.min(axis=dim)


@pytest.mark.parametrize("name, kwargs", CLASSES, ids=[c[0] for c in CLASSES])
def test_class_equals_torchmetrics(name, kwargs):
    graded = name == "RetrievalNormalizedDCG"
    batches = flat_queries(3, graded=graded)
    for action in ("neg", "pos", "skip"):
        for aggregation in ("mean", "median", "min", "max", "callable"):
            if name == "RetrievalRecallAtFixedPrecision" and aggregation == "callable":
                continue
            args = dict(kwargs, empty_target_action=action)
            ours, theirs = run_both(name, {**args, "aggregation": "mean"}, batches)
            ours.aggregation = spread_jax if aggregation == "callable" else aggregation
            theirs.aggregation = spread if aggregation == "callable" else aggregation
            assert_same(ours.compute(), theirs.compute())


@pytest.mark.parametrize("name", ["RetrievalMAP", "RetrievalFallOut", "RetrievalPrecisionRecallCurve"])
def test_class_error_action_raises_as_torchmetrics(name):
    batches = flat_queries(4)
    ours, theirs = run_both(name, dict(empty_target_action="error"), batches)
    with pytest.raises(ValueError) as expected:
        theirs.compute()
    with pytest.raises(ValueError, match=str(expected.value)[:40]):
        ours.compute()


def test_class_ignore_index_and_reset():
    batches = flat_queries(5, ignore=-100)
    ours, theirs = run_both("RetrievalNormalizedDCG", dict(ignore_index=-100, top_k=3), batches)
    assert_same(ours.compute(), theirs.compute())
    ours.reset()
    theirs.reset()
    p, t, i = batches[0]
    t = np.maximum(t, 0)
    assert_same(ours(p.astype(np.float64), t, i), theirs(torch.from_numpy(p), torch.from_numpy(t), torch.from_numpy(i)))
    assert_same(ours.compute(), theirs.compute())


def test_all_queries_skipped_gives_zero_as_torchmetrics():
    p, t, i = np.array([0.3, 0.1], np.float32), np.array([0, 0]), np.array([0, 1])
    ours, theirs = run_both("RetrievalMRR", dict(empty_target_action="skip"), [(p, t, i)])
    assert float(ours.compute()) == float(theirs.compute()) == 0.0


def test_precision_recall_curve_plot():
    import matplotlib

    matplotlib.use("Agg")
    ours, _ = run_both("RetrievalPrecisionRecallCurve", dict(max_k=4), flat_queries(6)[:1])
    fig, ax = ours.plot()
    x, y = ax.lines[0].get_data()
    precision, recall, _ = ours.compute()
    np.testing.assert_array_equal(x, precision)
    np.testing.assert_array_equal(y, recall)
    best = tm.RetrievalRecallAtFixedPrecision(min_precision=0.2)
    best.update(*flat_queries(6)[0])
    _, ax = best.plot()
    assert ax.lines[0].get_data()[1].tolist() == [float(best.compute()[0])]


def test_functional_under_jit_and_vmap_equals_eager():
    import jax

    preds, target = np.stack([p for p, _ in lists(8, (5,))]), np.stack([t for _, t in lists(8, (5,))])
    preds = preds.astype(np.float64)
    for fn in (tm.retrieval_normalized_dcg, tm.retrieval_average_precision):
        f = functools.partial(fn, top_k=3)
        eager = np.array([float(f(p, t)) for p, t in zip(preds, target)])
        np.testing.assert_allclose(jax.jit(jax.vmap(f))(preds, target), eager, atol=1e-12)


# Pickling, deep copies and what aggregation= receives ----------------------------------------
def test_classes_cover_the_module():
    assert {c[0] for c in CLASSES} == {n for n in dir(tm) if n.startswith("Retrieval")}


def torch_batches(batches):
    return [tuple(torch.from_numpy(x) for x in batch) for batch in batches]


@pytest.mark.parametrize("copier", ["pickle", "deepcopy"])
@pytest.mark.parametrize("name, kwargs", CLASSES, ids=[c[0] for c in CLASSES])
def test_class_pickles_and_deepcopies_with_its_state(name, kwargs, copier):
    """A checkpoint (pickle, torch.save) or a copy of a metric midway keeps its state: it
    computes what the original computed, and further updates give torchmetrics' value over
    every batch, without touching the original."""
    batches = torch_batches(flat_queries(9, graded=name == "RetrievalNormalizedDCG"))
    ours, theirs = getattr(tm, name)(**kwargs), getattr(tmr, name)(**kwargs)
    for p, t, i in batches[:2]:
        ours.update(p, t, indexes=i)
        theirs.update(p, t, indexes=i)
    before = as_numpy(ours.compute())
    copy_ = pickle.loads(pickle.dumps(ours)) if copier == "pickle" else copy.deepcopy(ours)
    assert type(copy_) is type(ours)
    for a, b in zip(np.atleast_1d(as_numpy(copy_.compute())), np.atleast_1d(before)):
        np.testing.assert_array_equal(a, b)
    p, t, i = batches[2]
    copy_.update(p, t, indexes=i)
    theirs.update(p, t, indexes=i)
    assert_same(copy_.compute(), theirs.compute())
    for a, b in zip(np.atleast_1d(as_numpy(ours.compute())), np.atleast_1d(before)):  # the original as it was
        np.testing.assert_array_equal(a, b)


def lower_quartile(values, dim=None):  # torch's API only (dim=, torch.quantile): fails on a JAX array
    return torch.quantile(values, 0.25) if dim is None else torch.quantile(values, 0.25, dim=dim)


@pytest.mark.parametrize("name", ["RetrievalMAP", "RetrievalPrecisionRecallCurve"])
def test_callable_aggregation_gets_a_torch_tensor_when_the_inputs_were(name):
    """torchmetrics hands a callable aggregation a tensor and ``dim`` (None, or 0 for a
    curve); with torch inputs ours does too, so a callable written for torch works."""
    ours, theirs = getattr(tm, name)(aggregation=lower_quartile), getattr(tmr, name)(aggregation=lower_quartile)
    for p, t, i in torch_batches(flat_queries(10)):
        ours.update(p, t, indexes=i)
        theirs.update(p, t, indexes=i)
    assert_same(ours.compute(), theirs.compute())


def test_callable_aggregation_gets_a_jax_array_for_other_inputs():
    import jax

    seen = []

    def record(values, dim=None):
        seen.append((type(values), dim))
        return values.mean(axis=dim)

    metric = tm.RetrievalMRR(aggregation=record)
    for p, t, i in flat_queries(11):
        metric.update(p, t, indexes=i)
    _, theirs = run_both("RetrievalMRR", {}, flat_queries(11))
    assert_same(metric.compute(), theirs.compute())
    assert len(seen) == 1 and issubclass(seen[0][0], jax.Array) and seen[0][1] is None
