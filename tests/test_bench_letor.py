"""benchmarks/bench_letor.py: LETOR's folds, LETOR's nDCG, the peer losses against their
reference code, and the --quick path end to end."""

import math
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import _peer_losses  # noqa: E402
import bench_letor  # noqa: E402


def _write_letor(folder: Path, rng, blocks: int = 5, per_block: int = 4, features: int = 5) -> int:
    """A small MQ2008-shaped Fold1: train.txt holds 3 blocks, vali.txt and test.txt one each;
    qids sorted and contiguous, lines as LETOR writes them (``#docid = ...`` comments)."""
    folder.mkdir()
    qid = 10000
    files = {"train": 3 * per_block, "vali": per_block, "test": per_block}
    for name, queries in files.items():
        lines = []
        for _ in range(queries):
            qid += int(rng.integers(1, 4))
            for doc in range(int(rng.integers(3, 13))):
                label = int(rng.choice(3, p=[0.6, 0.3, 0.1]))
                values = " ".join(f"{j + 1}:{v:.6f}" for j, v in enumerate(rng.random(features) + 0.3 * label))
                lines.append(f"{label} qid:{qid} {values} #docid = GX{qid}-{doc} inc = 1 prob = 0.5")
        (folder / f"{name}.txt").write_text("\n".join(lines) + "\n")
    return sum(files.values())


def test_letor_folds_rotate_the_five_blocks_and_judge_every_query_once(tmp_path):
    total = _write_letor(tmp_path / "mq", np.random.default_rng(0))
    pool, blocks = bench_letor.letor_blocks(tmp_path / "mq")
    assert [len(b) for b in blocks] == [4, 4, 4, 4, 4] and pool.group_sizes.size == total
    train, valid, test = bench_letor.letor_fold(blocks, 1)  # Fold1: the files as distributed
    assert train.tolist() == list(range(12)) and valid.tolist() == list(range(12, 16))
    assert test.tolist() == list(range(16, 20))
    judged = []
    for fold in range(1, 6):
        train, valid, test = bench_letor.letor_fold(blocks, fold)
        assert len(set(train) | set(valid) | set(test)) == total  # disjoint, and every query used
        assert test.tolist() == blocks[(fold + 3) % 5].tolist()
        judged += test.tolist()
    assert sorted(judged) == list(range(total))


def test_letor_ndcg_follows_eval_score_4_0():
    # ten documents, grades in file order; the first two tie, so file order decides (doc 0 first)
    labels = [2, 0, 1, 0, 0, 0, 0, 0, 0, 0]
    scores = [1.0, 1.0, 0.5, 0.4, 0.3, 0.2, 0.1, 0.0, -0.1, -0.2]
    # DCG@10 = 3 (grade 2, position 1) + 0 + 1 / log2(3); ideal = 3 + 1 (position 2: discount 1)
    assert bench_letor.letor_ndcg(scores, labels, 10) == pytest.approx((3 + 1 / math.log2(3)) / 4, abs=1e-12)
    # the tie the other way round: doc 1 (grade 0) first only when it comes first in the file
    swapped = bench_letor.letor_ndcg(scores[1::-1] + scores[2:], [0, 2] + labels[2:], 10)
    assert swapped == pytest.approx((0 + 3 + 1 / math.log2(3)) / 4, abs=1e-12)
    assert bench_letor.letor_ndcg(scores, [0] * 10, 10) == 0.0  # no relevant document: 0
    assert bench_letor.letor_ndcg(scores[:5], labels[:5], 10) == 0.0  # fewer than 10 documents: 0
    assert bench_letor.letor_ndcg(scores[:5], labels[:5], 3) == pytest.approx((3 + 1 / math.log2(3)) / 4)


# allRank 1.4.3 (torch 2.13, float32 inputs), allrank/models/losses: neuralNDCG(y_pred, y_true,
# temperature=T) and listNet(y_pred, y_true) with their other defaults; labels -1 are padding.
ALLRANK = {
    "a": (
        [[0.3, -1.2, 2.0, 0.7]],
        [[1.0, 0.0, 2.0, 0.0]],
        {1.0: -0.918164074420929, 0.1: -0.9645884037017822},
        1.1561310291290283,
        [[-0.1023988, -0.0553467, 0.0581636, 0.0995819]],
    ),
    "b": (
        [[0.5, 0.1, -0.4, 1.5, 0.0], [2.0, -1.0, 0.3, 0.0, 0.0]],
        [[0.0, 2.0, 1.0, 0.0, 1.0], [1.0, 0.0, 0.0, -1.0, -1.0]],
        {1.0: -0.7675356864929199, 0.1: -0.7768203020095825},
        1.6402294635772705,
        [[0.058838, -0.1871517, -0.0540417, 0.217888, -0.0355326], [0.1176307, -0.0857727, -0.0318581, 0.0, 0.0]],
    ),
    "c": (
        [[0.2, 0.4, -0.1], [1.0, 0.5, 0.0]],
        [[0.0, 0.0, 0.0], [0.0, 1.0, 2.0]],
        {1.0: -0.6735603213310242, 0.1: -0.5880413055419922},
        1.2935737371444702,
        [[0.0021256, 0.0394967, -0.0416223], [0.2082249, 0.0312337, -0.2394586]],
    ),
}
# allRank's gradient of neuralNDCG at temperature 1 (d loss / d y_pred), same runs
ALLRANK_NEURAL_GRAD = {
    "a": [[-0.0160534, 0.0026098, -0.0503343, 0.0637779]],
    "b": [[0.0341506, -0.0552984, 0.0061702, 0.0065309, 0.0084466], [-0.0225913, -0.0015936, 0.0241849, 0.0, 0.0]],
    "c": [[0.0, 0.0, 0.0], [0.0622578, 0.0113071, -0.073565]],
}


def _hard_ndcg_exp(scores, labels):
    """Brute force: nDCG of the list sorted by score (gain 2^y - 1, log2 discount)."""
    gains = 2.0 ** np.asarray(labels) - 1
    discount = 1 / np.log2(np.arange(len(gains)) + 2)
    ideal = np.sum(np.sort(gains)[::-1] * discount)
    return np.sum(gains[np.argsort(-np.asarray(scores))] * discount) / ideal if ideal > 0 else None


def _neuralsort_loops(s, tau):
    """NeuralSort's relaxed permutation written from the paper (Grover et al., 2019, eq. 5), one
    row at a time: row i is softmax(((n + 1 - 2i) s - A_s 1) / tau), A_s[j, k] = |s_j - s_k|."""
    n = len(s)
    out = np.zeros((n, n))
    for i in range(1, n + 1):
        logits = np.array([(n + 1 - 2 * i) * s[j] - sum(abs(s[j] - s[k]) for k in range(n)) for j in range(n)]) / tau
        e = np.exp(logits - logits.max())
        out[i - 1] = e / e.sum()
    return out


def _pirank_loops(scores, labels, where, tau, k=15):
    """pirank_simple_loss by another route: per list, padding at the minimum score less 1e-6,
    the relaxed sort of 2^y - 1 over ln(1 + position), summed over the lists, ratio of sums."""
    num = den = 0.0
    for s, y, w in zip(scores, labels, where):
        s = np.where(w, s, np.min(np.where(w, s, np.inf)) - 1e-6)
        y = np.where(w, y, 0.0)
        gains = 2.0**y - 1
        positions = np.arange(1, len(s) + 1)
        sorted_gains = _neuralsort_loops(s, tau) @ gains if tau else gains[np.argsort(-s, kind="stable")]
        num += np.sum((sorted_gains / np.log(positions + 1))[:k])
        den += np.sum((np.sort(gains)[::-1] / (1e-10 + np.log(positions + 1)))[:k])
    return 1 - num / (1e-10 + den)


def _pad(rows, width: int, lists: int = 2, fill: float = -1.0) -> np.ndarray:
    """A case's lists padded (allRank's label -1 marks padding) to ``[lists, width]``."""
    out = np.full((lists, width), fill)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


@jax.jit
def _peer_values(scores, labels, pi_scores, pi_labels, pi_where):
    """Every value the peer-loss test needs, in one compiled program: per allRank case (``vmap``:
    each case is its own batch, padded with empty lists and items that both losses ignore),
    NeuralNDCG at temperatures 1, 0.1 and 1e-4 and its gradient at 1, ListNet and its gradient;
    PiRank relaxed, and straight-through with its gradient."""

    def case(s, y):
        w = y >= 0
        neural = [_peer_losses.neural_ndcg(s, y, w, temperature=t) for t in (1.0, 0.1, 1e-4)]
        neural_grad = jax.grad(lambda s: _peer_losses.neural_ndcg(s, y, w))(s)
        listnet, listnet_grad = jax.value_and_grad(lambda s: _peer_losses.listnet(s, y, w))(s)
        return jnp.stack(neural), neural_grad, listnet, listnet_grad

    relaxed = _peer_losses.pirank(pi_scores, pi_labels, pi_where, ste=False)
    ste, ste_grad = jax.value_and_grad(lambda s: _peer_losses.pirank(s, pi_labels, pi_where))(pi_scores)
    return jax.vmap(case)(scores, labels), (relaxed, ste, ste_grad)


def test_peer_losses_match_their_reference_code():
    keys = list(ALLRANK)
    scores = np.stack([_pad(ALLRANK[k][0], 5, fill=0.0) for k in keys]).astype(np.float32)
    labels = np.stack([_pad(ALLRANK[k][1], 5) for k in keys]).astype(np.float32)
    # PiRank: no installable reference (TensorFlow 1.14); its formula by another route (loops)
    pi_scores = np.array([[0.4, -0.3, 1.1, 0.2, 0.0], [0.9, 0.1, -0.5, 0.0, 0.0]])
    pi_labels = np.array([[1.0, 0.0, 2.0, 1.0, 0.0], [0.0, 2.0, 1.0, 0.0, 0.0]])
    pi_where = np.array([[True] * 5, [True, True, True, False, False]])
    (neural, neural_grad, listnet, listnet_grad), (relaxed, ste, ste_grad) = jax.device_get(
        _peer_values(scores, labels, jnp.asarray(pi_scores, jnp.float64), pi_labels, pi_where)
    )
    for i, key in enumerate(keys):
        case_scores, case_labels, expected_neural, expected_listnet, expected_listnet_grad = ALLRANK[key]
        shape = np.shape(case_scores)
        assert neural[i, 0] == pytest.approx(expected_neural[1.0], abs=2e-6), key
        assert neural[i, 1] == pytest.approx(expected_neural[0.1], abs=2e-6), key
        np.testing.assert_allclose(_crop(neural_grad[i], shape), ALLRANK_NEURAL_GRAD[key], atol=2e-6)
        assert listnet[i] == pytest.approx(expected_listnet, abs=2e-6), key
        np.testing.assert_allclose(_crop(listnet_grad[i], shape), expected_listnet_grad, atol=2e-6)
        # NeuralNDCG at a tiny temperature is minus the mean exact nDCG (exp gain) over the
        # lists that have a relevant document (brute force: sort)
        exact = [
            _hard_ndcg_exp(np.asarray(a)[np.asarray(b) >= 0], np.asarray(b)[np.asarray(b) >= 0])
            for a, b in zip(case_scores, case_labels)
        ]
        assert neural[i, 2] == pytest.approx(-np.mean([v for v in exact if v is not None]), abs=1e-5)

    assert relaxed == pytest.approx(_pirank_loops(pi_scores, pi_labels, pi_where, tau=5.0), abs=1e-10)
    # straight-through: the value of the hard sort, the gradient of the relaxed one
    assert ste == pytest.approx(_pirank_loops(pi_scores, pi_labels, pi_where, tau=None), abs=1e-9)
    h = 1e-6
    for q, i in [(0, 0), (0, 2), (1, 1), (1, 2)]:
        up, down = pi_scores.copy(), pi_scores.copy()
        up[q, i] += h
        down[q, i] -= h
        numeric = (_pirank_loops(up, pi_labels, pi_where, 5.0) - _pirank_loops(down, pi_labels, pi_where, 5.0)) / (
            2 * h
        )
        assert ste_grad[q, i] == pytest.approx(numeric, abs=1e-6)
    assert ste_grad[1, 3] == 0.0 and ste_grad[1, 4] == 0.0  # padding


def _crop(values, shape):
    return np.asarray(values)[: shape[0], : shape[1]]


@pytest.mark.usefixtures("quick_compiles")
def test_quick_run_prints_every_row_over_every_judged_query(tmp_path, capsys):
    total = _write_letor(tmp_path / "mq", np.random.default_rng(1))
    out = bench_letor.main(
        [
            "--quick", "--data", "mq2008", "--mq2008", str(tmp_path / "mq"), "--seeds", "2",
            "--losses", "default", "lightgbm", "--versus", "default", "--json", str(tmp_path / "r.json"),
        ]
    )  # fmt: skip
    text = capsys.readouterr().out
    assert f"## mq2008: {total} judged queries" in text
    rows = [line for line in text.splitlines() if line.startswith("| 1 ") or line.startswith("| 2 ")]
    assert len(rows) == 2 and all(" p " in line and "(vs `" in line for line in rows)
    assert "LETOR nDCG@10" in text and "# wall time" in text
    results = out["data"]["mq2008"]
    for key in ("default", "lightgbm"):
        table = np.asarray(results[key]["test"])
        assert table.shape == (total, 4) and np.all((table >= 0) & (table <= 1))
        assert len(results[key]["letor"]) == total and results[key]["finite"]
    # --versus: the row minus each other row, the same in a reprint of the saved results
    gap = np.mean(np.asarray(results["default"]["test"])[:, -1] - np.asarray(results["lightgbm"]["test"])[:, -1])
    versus = [line for line in text.splitlines() if line.startswith("| `lightgbm` | ")]
    assert len(versus) == 1 and versus[0].startswith(f"| `lightgbm` | {gap:+.4f} ["), versus
    bench_letor.main(["--from-json", str(tmp_path / "r.json"), "--versus", "default", "--mq2008", str(tmp_path / "mq")])
    assert versus[0] in capsys.readouterr().out


@pytest.mark.usefixtures("quick_compiles")
def test_length_buckets_give_the_whole_batch_loss(tmp_path):
    """The losses run bucket by bucket, weighted by what each loss's own reduction divides by:
    a mean over lists (jaxrank's rows, rax's softmax), over the lists with a relevant document
    (NeuralNDCG), over the pairs with y_i > y_j, scaled by the padded length (rax's LambdaRank)."""
    _write_letor(tmp_path / "mq", np.random.default_rng(2), per_block=6)
    ds = bench_letor.load("mq2008", tmp_path / "mq", quick=False)
    assert len(ds.buckets) >= 2
    fold = ds.folds[0]
    x, buckets = ds.train_arrays(fold)
    split = fold.data.train
    q, p = np.nonzero(split.where)
    flat = jnp.asarray(np.random.default_rng(3).normal(size=x.shape[0]) * 2, jnp.float32)
    keys = ("default", "rax_softmax", "neural_ndcg", "rax_lambdarank")

    @jax.jit
    def both(flat):
        whole = jnp.zeros(split.where.shape, jnp.float32).at[q, p].set(flat[: q.size])
        out = []
        for key in keys:
            row = bench_letor.ROWS[key]
            out.append(row.objective(whole, jnp.asarray(split.y, jnp.float32), jnp.asarray(split.where)))
            out.append(bench_letor.bucketed(row.objective, row.weight, flat, buckets, row.length_scaled))
        return jnp.stack(out)

    values = np.asarray(both(flat)).reshape(len(keys), 2)
    for key, (whole, by_bucket) in zip(keys, values):
        assert by_bucket == pytest.approx(whole, rel=1e-5), key


def test_screened_rankers_give_the_hard_metric_at_small_temperatures_and_pass_their_doctests():
    import doctest

    import _screen_rankers as screen

    import jaxrank

    rng = np.random.default_rng(0)
    scores = jnp.asarray(rng.normal(size=(3, 12)))
    labels = jnp.asarray(rng.integers(0, 3, size=(3, 12)))
    where = jnp.asarray(rng.random((3, 12)) < 0.8)
    hard = jaxrank.ndcg(scores, labels, where=where)
    for ranker in (
        screen.band(1e-6, 1e-6, 1e6),
        screen.expected(1e-3),
        screen.gapped(jaxrank.softsort(1e-3, units="score")),
        screen.mixed(1e-3, 0.5, 4.0),
        screen.spread(1e-3),
        screen.spread(1e-3, live=True),
    ):
        soft = jaxrank.ndcg(scores, labels, where=where, ranker=ranker)
        np.testing.assert_allclose(soft, hard, atol=1e-5, err_msg=repr(ranker))
    assert doctest.testmod(screen).failed == 0


def test_spread_is_monotone_in_a_relevant_items_own_score_at_every_temperature():
    import _screen_rankers as screen

    import jaxrank

    scores = jnp.asarray(np.random.default_rng(1).normal(size=40))
    for position in (0, 5, 30):
        labels = jnp.zeros(40, int).at[jnp.argsort(-scores)[position]].set(1)
        for t in (0.5, 4.0, 32.0):
            grad = jax.grad(lambda s: jaxrank.ndcg(s, labels, k=10, ranker=screen.spread(t, live=True)))(scores)
            assert grad[labels == 1][0] >= 0, (position, t)
