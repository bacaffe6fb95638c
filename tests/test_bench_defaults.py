"""benchmarks/bench_defaults.py --cv: every query judges once; the table it prints."""

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_defaults  # noqa: E402
import train_ltr  # noqa: E402


def _documents(*splits) -> list:
    """Every document of flat splits as (label, features...), sorted: a multiset (two
    documents of this data set can share a feature vector, so not a set)."""
    rows = np.concatenate([np.column_stack([s[1], s[0]]) for s in splits])
    return sorted(map(tuple, rows))


def test_cross_validation_folds_hold_out_every_query_exactly_once(shared_data):
    folder = shared_data / "lambdarank"
    folds = [train_ltr.load_fold(folder, fold=f, folds=5, raw=True) for f in range(5)]
    everything = _documents(*(te for _, _, te in folds))
    assert sum(len(te[2]) for _, _, te in folds) == 251  # rank.train's 201 queries + rank.test's 50
    assert len(everything) == 3005 + 768
    for tr, va, te in folds:
        assert va is None and len(tr[2]) + len(te[2]) == 251
        assert _documents(tr, te) == everything  # the held-out fold is exactly what is not trained on


def test_nested_validation_comes_from_the_training_folds_only(shared_data):
    folder = shared_data / "lambdarank"
    tr, va, te = train_ltr.load_fold(folder, fold=2, folds=5, valid_fraction=0.25, raw=True)
    _, _, plain_te = train_ltr.load_fold(folder, fold=2, folds=5, raw=True)
    assert len(va[2]) == round(0.25 * (len(tr[2]) + len(va[2])))
    assert _documents(te) == _documents(plain_te)  # the held-out fold is untouched
    plain_tr, _, _ = train_ltr.load_fold(folder, fold=2, folds=5, raw=True)
    assert _documents(tr, va) == _documents(plain_tr)  # validation queries come out of the training folds


@pytest.mark.parametrize("transform", ["quantile", "standard"])
def test_fold_features_are_transformed_with_training_statistics(shared_data, transform):
    data = train_ltr.load_fold(shared_data / "lambdarank", fold=1, folds=5, transform=transform)
    train_x = data.train.x[data.train.where]
    if transform == "standard":  # the training documents' own mean and std: 0 and 1 (or constant)
        np.testing.assert_allclose(train_x.mean(0), 0.0, atol=1e-4)
        assert np.all((np.abs(train_x.std(0) - 1) < 1e-3) | (train_x.std(0) < 1e-6))
    test_x = data.test.x[data.test.where]
    assert np.isfinite(test_x).all() and test_x.shape[-1] == train_x.shape[-1]


@pytest.mark.usefixtures("quick_compiles")  # two training steps: compiling, not running, is the cost
def test_cv_prints_a_table_per_recipe_with_lightgbm_and_paired_differences(shared_data, capsys):
    bench_defaults.main(
        [
            "--cv", "2", "--steps", "2", "--seeds", "1", "--recipe", "both",
            "--rankers", "default", "laplace()", "approx()",
            "--data", str(shared_data / "lambdarank"),
        ]
    )  # fmt: skip
    out = capsys.readouterr().out
    for recipe in bench_defaults.RECIPES:
        assert f"recipe `{recipe}`" in out
    assert out.count("| LightGBM LambdaRank") == 2
    assert out.count("(251 judged queries)") == 2
    rows = [line for line in out.splitlines() if line.startswith("| `metric_loss default")]
    assert len(rows) == 2 and all(line.count(" p ") == 2 for line in rows)  # vs LightGBM and vs approx()
    # metric_loss's default is laplace(): trained once, the same per-query values
    twins = [line for line in out.splitlines() if line.startswith("| `laplace()`")]
    assert [r.split("|")[2:] for r in rows] == [r.split("|")[2:] for r in twins]


def test_an_expression_names_a_loss_over_jaxrank_losses():
    import jax.numpy as jnp

    from jaxrank import losses

    scores, labels, where = jnp.array([[0.3, 1.2, -0.4]]), jnp.array([[0, 2, 1]]), jnp.array([[True, True, False]])
    objective = bench_defaults.make_objective("lambda s, y, w: softmax_cross_entropy(s, y, where=w)")
    np.testing.assert_allclose(
        objective(scores, labels, where), losses.softmax_cross_entropy(scores, labels, where=where)
    )
    assert bench_defaults.training_key("default") == bench_defaults.training_key("laplace()")
    assert bench_defaults.training_key("laplace()") != bench_defaults.training_key("approx()")
