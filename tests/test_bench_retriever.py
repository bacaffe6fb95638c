"""benchmarks/bench_retriever.py: folds that hold out every query once with validation from
the training queries, the baselines' losses against their formulas, rows from the command
line, and a small run end to end: a grid value chosen on validation, later seeds on it alone,
every test query judged; a later seed run alone gives the same values, and runs on disjoint
seeds pool into one table."""

import json
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import beir_layout  # noqa: E402
import bench_retriever as br  # noqa: E402


@pytest.mark.parametrize("n, k", [(225, 5), (30, 5), (11, 2)])
def test_folds_hold_out_every_query_once_and_validate_on_training_queries(n, k):
    for seed in (0, 1):
        splits = br.folds(n, k, seed)
        tests = np.concatenate([s[2] for s in splits])
        assert sorted(tests.tolist()) == list(range(n))
        for train, valid, test in splits:
            assert len(np.intersect1d(train, valid)) == len(np.intersect1d(train, test)) == 0
            assert len(np.intersect1d(valid, test)) == 0 and len(train) + len(valid) + len(test) == n
            assert len(valid) == round((n - len(test)) * 40 / 165)
    assert not np.array_equal(br.folds(n, k, 0)[0][2], br.folds(n, k, 1)[0][2])


def _toy():
    """Two queries, five documents (the last one padding); query 0 has two positives."""
    rng = np.random.default_rng(0)
    q, d = rng.normal(size=(2, 3)), rng.normal(size=(5, 3))
    positives = np.array([[1, 3], [0, -1]])
    where = np.array([True, True, True, True, False])
    return q, d, positives, where


def test_infonce_is_one_softmax_per_relevant_document_without_the_other_positives():
    q, d, positives, where = _toy()
    s = q @ d.T / 0.1
    want = []
    for i, pos in enumerate(positives):
        pos = [p for p in pos if p >= 0]
        for p in pos:
            keep = [j for j in range(4) if j == p or j not in pos]
            want.append(np.log(np.exp(s[i, keep]).sum()) - s[i, p])
    got = br.infonce(jnp.asarray(q), jnp.asarray(d), jnp.asarray(positives), None, jnp.asarray(where), 0.1)
    np.testing.assert_allclose(got, np.mean(want), rtol=1e-5)


def test_softmax_takes_every_positive_as_the_target_at_once():
    q, d, positives, where = _toy()
    s = q @ d.T / 0.05
    want = []
    for i, pos in enumerate(positives):
        pos = [p for p in pos if p >= 0]
        log_z = np.log(np.exp(s[i, :4]).sum())
        want.append(np.mean([log_z - s[i, p] for p in pos]))
    got = br.softmax(jnp.asarray(q), jnp.asarray(d), jnp.asarray(positives), None, jnp.asarray(where), 0.05)
    np.testing.assert_allclose(got, np.mean(want), rtol=1e-5)


def test_rows_from_the_command_line():
    assert br.parse_row("default") is br.BUILTIN["default"]
    row = br.parse_row("mine=lambda q, d, p, w, t: losses.retrieval_loss(q / t, d, p, where=w, ranker=softsort(0.1))")
    assert row.name == "mine" and row.grid == br.TEMPERATURES
    q, d, positives, where = _toy()
    gains = np.where(positives >= 0, 1, 0)
    args = (jnp.asarray(q), jnp.asarray(d), jnp.asarray(positives), jnp.asarray(gains), jnp.asarray(where), 1.0)
    assert np.isfinite(row.loss(*args)) and 0 <= row.loss(*args) <= 1
    row = br.parse_row(
        "sharp=(lambda q, d, p, w, t: losses.retrieval_loss(q / t, d, p, where=w), (1, 0.5, 0.2, 0.1, 0.05))"
    )
    assert row.grid == (1.0, 0.5, 0.2, 0.1, 0.05) and row.describe.startswith("(lambda")
    row = br.parse_row("plain=(lambda q, d, p, w, t: losses.retrieval_loss(q, d, p, where=w), (1,))")
    assert row.grid == (1.0,)  # no parameter: one run a seed, less tuning than InfoNCE's
    too_many = "x=(lambda q, d, p, w, t: 0, (1, 2, 3, 4, 5, 6))"
    for bad in (
        "nonsense",
        "default=lambda q, d, p, w, t: 0",
        too_many,
        "x=(lambda q, d, p, w, t: 0, ())",
        "x=lambda: (",
    ):
        with pytest.raises(SystemExit, match="--rows"):
            br.parse_row(bad)


def test_teacher_positives_add_the_teachers_top_k_of_the_other_documents():
    rng = np.random.default_rng(3)
    teacher = rng.normal(size=(2, 7)).astype(np.float32)
    where = np.array([True] * 6 + [False])
    teacher[:, 6] = 9.0  # padding: never a teacher's positive, whatever its score
    p = br.jaxrank.positives(jnp.asarray([[1, 4], [0, -1]]), jnp.asarray([[2, 1], [1, 0]]))
    got = br.teacher_positives(p, jnp.asarray(teacher), jnp.asarray(where), 3, 0.5)
    for b, (named, grades) in enumerate((([1, 4], [2, 1]), ([0], [1]))):
        others = [j for j in range(6) if j not in named]
        top = sorted(others, key=lambda j: -teacher[b, j])[:3]
        want = dict(zip(named, grades))
        want.update({j: 0.5 / np.log2(2 + place) for place, j in enumerate(top)})
        dense = np.asarray(got.dense(7))[b]
        np.testing.assert_allclose(dense, [want.get(j, 0.0) for j in range(7)], rtol=1e-6)
    # fewer other documents than k: only the real ones
    few = np.asarray(
        br.teacher_positives(p, jnp.asarray(teacher), jnp.asarray([True] * 3 + [False] * 4), 3, 0.5).dense(7)
    )
    assert (few[0, [0, 2]] > 0).all() and few[0, 1] == 2 and few[0, 4] == 1 and (few[0, [3, 5, 6]] == 0).all()


def test_batch_temperature_is_the_grid_value_of_least_infonce_and_follows_the_margins():
    q, d, positives, where = _toy()
    p = br.jaxrank.positives(jnp.asarray(positives), jnp.asarray(np.where(positives >= 0, 1, 0)))
    s = q @ d.T

    def infonce(t):  # brute force: each pair's softmax over its query's non-relevant real documents
        pairs = [(b, i) for b in range(2) for i in positives[b] if i >= 0]
        out = []
        for b, i in pairs:
            keep = [j for j in range(5) if where[j] and (j == i or j not in positives[b])]
            z = s[b, keep] / t
            out.append(np.log(np.exp(z - z.max()).sum()) + z.max() - s[b, i] / t)
        return np.mean(out)

    want = br.BATCH_TEMPERATURES[np.argmin([infonce(float(t)) for t in br.BATCH_TEMPERATURES])]
    got = jax.jit(br.batch_temperature)(jnp.asarray(q), jnp.asarray(d), p, jnp.asarray(where))  # as in training
    np.testing.assert_allclose(got, want, rtol=1e-6)
    # each positive above every negative: the sharpest; below them all: the softest
    eye = jnp.eye(3)
    first = br.jaxrank.positives(jnp.asarray([[0], [1]]), jnp.ones((2, 1)))
    last = br.jaxrank.positives(jnp.asarray([[2], [2]]), jnp.ones((2, 1)))
    docs = jnp.asarray([[1.0, 0, 0], [0, 1, 0], [-1, -1, 0]])
    assert br.batch_temperature(eye[:2], docs, first, jnp.ones(3, bool)) == br.BATCH_TEMPERATURES[0]
    assert br.batch_temperature(eye[:2], docs, last, jnp.ones(3, bool)) == br.BATCH_TEMPERATURES[-1]
    grad = jax.grad(lambda x: br.batch_temperature(x, jnp.asarray(d), p, jnp.asarray(where)))(jnp.asarray(q))
    assert not np.any(np.asarray(grad))  # learned apart from the model's gradient


def test_batch_gap_is_the_mean_over_queries_of_the_top_gaps_of_the_real_documents():
    rng = np.random.default_rng(4)
    q, d = rng.normal(size=(3, 5)), rng.normal(size=(30, 5))
    where = np.arange(30) < 26
    top = [np.sort(row[where])[::-1][:11] for row in q @ d.T]
    want = np.mean([(t[0] - t[10]) / 10 for t in top])
    got = jax.jit(br.batch_gap)(jnp.asarray(q), jnp.asarray(d), jnp.asarray(where))
    np.testing.assert_allclose(got, want, rtol=1e-5)
    row = br.parse_row(
        "g=(lambda q, d, p, w, t: infonce(q, d, p.indices, p.grades, w, t * batch_gap(q, d, w)), (2.0,))"
    )
    positives = np.array([[0, 1], [2, -1], [3, -1]])
    gains = np.where(positives >= 0, 1, 0)
    args = (jnp.asarray(q), jnp.asarray(d), jnp.asarray(positives), jnp.asarray(gains), jnp.asarray(where), 2.0)
    want = br.infonce(*args[:5], 2.0 * want)
    np.testing.assert_allclose(row.loss(*args), want, rtol=1e-5)


def test_a_row_that_reads_the_teacher_needs_a_pretrained_encoder(capsys):
    row = br.parse_row(
        "distill=(lambda q, d, p, w, t, teacher: losses.retrieval_loss(q, d, teacher_positives(p, teacher, w, 2, t),"
        " where=w), (0.25,))"
    )
    assert row.teacher and not br.parse_row("default").teacher
    q, d, positives, where = _toy()
    gains = np.where(positives >= 0, 1, 0)
    args = (jnp.asarray(q), jnp.asarray(d), jnp.asarray(positives), jnp.asarray(gains), jnp.asarray(where), 0.25)
    value = row.loss(*args, teacher=jnp.asarray(q @ d.T))
    assert np.isfinite(value) and 0 <= value <= 1
    with pytest.raises(SystemExit):
        br.main(["--quick", "--rows", "distill=" + row.describe])
    assert "needs a pretrained encoder" in capsys.readouterr().err


def _small_cranfield(folder: Path, docs: int) -> tuple[beir_layout.Collection, Path]:
    """Cranfield's first 24 queries over its first ``docs`` documents, written in BEIR's
    layout to ``folder``: a collection small enough for a run of seconds."""
    cranfield = beir_layout.cranfield(ROOT / "tests" / "data" / "cranfield")
    queries = cranfield.queries[:24]
    kept = {q for q, _ in queries}
    qrels = [(q, d, s) for q, d, s in cranfield.qrels["test"] if q in kept and int(d) <= docs]
    small = beir_layout.Collection(cranfield.docs[:docs], queries, {"test": qrels})
    return small, beir_layout.write(small, folder)


def test_a_small_run_chooses_on_validation_and_judges_every_test_query(tmp_path, capsys):
    small, folder = _small_cranfield(tmp_path / "small", 600)
    argv = ["--data", str(folder), "--rows", "default", "--encoders", "mlp", "--seeds", "2", "--folds", "2"]
    argv += [
        "--steps",
        "4",
        "--refresh",
        "2",
        "--batch",
        "4",
        "--resamples",
        "200",
        "--json",
        str(tmp_path / "out.json"),
    ]
    br.main(argv)
    out = json.loads((tmp_path / "out.json").read_text())
    judged = {q for q, _, _ in small.qrels["test"]}
    assert out["small"]["how"].startswith("2-fold cross-validation over its 24 queries")
    for name, grid in (("infonce", br.TEMPERATURES), ("default", br.TEMPERATURES)):
        row = out["small"]["mlp"]["rows"][name]
        assert sorted(map(float, row["grid"])) == sorted(grid) and row["chosen"] in grid
        valid = {float(t): np.mean(r["valid"]) for t, r in row["grid"].items()}
        assert valid[row["chosen"]] == max(valid.values())
        for runs in [*row["grid"].values(), *row["seeds"]]:
            assert set(runs["test"]["ndcg_cut.10"]) == judged and len(runs["steps"]) == 2
        assert len(row["seeds"]) == 1  # the second seed ran the chosen value alone
    assert "default ndcg_cut.10" in out["small"]["stats"]["mlp"]
    printed = capsys.readouterr().out
    assert "| mlp | default | losses.retrieval_loss" in printed and "### Against InfoNCE, every collection" in printed

    # --first-seed: seed 1 alone repeats the protocol on it (its grid), the same runs as above
    argv[argv.index("--seeds") + 1] = "1"
    argv[argv.index("--json") + 1] = str(tmp_path / "later.json")
    br.main([*argv, "--first-seed", "1", "--rows", "infonce"])
    later = json.loads((tmp_path / "later.json").read_text())["small"]
    assert "; 1 seed (1); " in later["table"]
    before = out["small"]["mlp"]["rows"]["infonce"]
    assert later["mlp"]["rows"]["infonce"]["grid"][str(before["chosen"])]["test"] == before["seeds"][0]["test"]

    # --pool: files on disjoint seeds as one; a seed in two files is refused
    with pytest.raises(SystemExit, match="seed 1 is in both"):
        br.main(["--pool", str(tmp_path / "out.json"), str(tmp_path / "later.json")])
    argv[argv.index("--json") + 1] = str(tmp_path / "third.json")
    br.main([*argv, "--first-seed", "2"])
    text = br.main(["--pool", str(tmp_path / "out.json"), str(tmp_path / "third.json"), "--resamples", "200"])
    third = json.loads((tmp_path / "third.json").read_text())["small"]["mlp"]["rows"]
    assert text["markdown"].startswith("3 seeds (out.json: seeds 0-1; third.json: seeds 2-2)")
    for name in ("infonce", "default"):
        runs = [out["small"]["mlp"]["rows"][name], third[name]]
        tests = [r["grid"][str(r["chosen"])]["test"] for r in runs] + [s["test"] for r in runs for s in r["seeds"]]
        assert len(tests) == 3
        want = np.mean([[t["ndcg_cut.10"][q] for q in judged] for t in tests])
        line = next(row for row in text["markdown"].splitlines() if row.startswith(f"| small | mlp | {name} |"))
        assert line.split(" | ")[4] == f"{want:.4f}"


def test_pool_refuses_what_is_not_a_json_file_of_the_benchmark(tmp_path):
    (tmp_path / "bad.json").write_text("not json")
    (tmp_path / "other.json").write_text("{}")
    (tmp_path / "number.json").write_text("3")
    for name, seeds in (("a.json", 0), ("b.json", 1)):
        (tmp_path / name).write_text(json.dumps({"settings": {"seeds": "1", "first_seed": str(seeds)}}))
    with pytest.raises(SystemExit, match="cannot read .*bad.json"):
        br.main(["--pool", str(tmp_path / "bad.json")])
    with pytest.raises(SystemExit, match="other.json is not a --json file"):
        br.main(["--pool", str(tmp_path / "other.json")])
    with pytest.raises(SystemExit, match="cannot read .*missing.json"):
        br.main(["--pool", str(tmp_path / "missing.json")])
    with pytest.raises(SystemExit, match="number.json is not a --json file"):
        br.main(["--pool", str(tmp_path / "number.json")])
    with pytest.raises(SystemExit, match="share no collection"):
        br.main(["--pool", str(tmp_path / "a.json"), str(tmp_path / "b.json")])


def _unit_rows(n: int, width: int = 8, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).normal(size=(n, width)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("adapter", [br.LinearAdapter, br.MLPAdapter])
def test_an_adapter_starts_as_the_pretrained_encoder(adapter):
    table = np.concatenate([np.zeros((1, 8), np.float32), _unit_rows(5)])
    model = adapter(table, 16, 64, rngs=br.nnx.Rngs(0))
    out = np.asarray(model(jnp.asarray([[3], [1], [0]])))
    np.testing.assert_allclose(out[:2], table[[3, 1]], atol=1e-6)
    assert np.all(out[2] == 0)  # padding
    # The embeddings are state, not a parameter: the gradient and Adam leave them.
    assert all(p.shape != table.shape for p in jax.tree_util.tree_leaves(br.nnx.state(model, br.nnx.Param)))


def test_the_pretrained_embeddings_are_computed_once_and_cached(tmp_path, monkeypatch):
    calls = []

    def fake(texts):
        calls.append(len(texts))
        return _unit_rows(len(texts))

    monkeypatch.setattr(br, "embed_texts", fake)
    data = br.tr.load_cranfield(ROOT / "tests" / "data" / "cranfield")
    table, (queries, docs) = br.pretrained_tokens(data, tmp_path)
    again, rows = br.pretrained_tokens(data, tmp_path)
    assert calls == [225 + 1400] and len(list(tmp_path.glob("*.npy"))) == 1
    np.testing.assert_array_equal(table, again)
    assert table.shape == (1 + 225 + 1400, 8) and np.all(table[0] == 0)
    assert queries.shape == (225, 1) and docs.shape == (1400, 1) and docs[0, 0] == 226
    np.testing.assert_array_equal(rows[1], docs)


def test_pretrained_adapters_train_from_their_zero_shot_row(tmp_path, monkeypatch, capsys):
    """The minilm-* encoders on a small collection, the pretrained encoder stood in for by
    random unit vectors (the real one: tests/test_sentence_encoder.py)."""
    monkeypatch.setattr(br, "embed_texts", lambda texts: _unit_rows(len(texts)))
    _, folder = _small_cranfield(tmp_path / "small", 300)
    argv = ["--data", str(folder), "--encoders", "minilm-linear", "minilm-mlp", "--folds", "2", "--seeds", "1"]
    argv += ["--cache", str(tmp_path / "cache"), "--resamples", "100"]
    zero = br.main([*argv, "--zero-shot"])["small"]
    assert "| minilm-linear | zero-shot |" in capsys.readouterr().out
    distill = "distill=(lambda q, d, p, w, t, teacher: losses.retrieval_loss(q, d, teacher_positives(p, teacher, w, 2, t), where=w), (0.5,))"
    out = br.main([*argv, "--rows", "default", distill, "--steps", "4", "--refresh", "2", "--batch", "4"])["small"]
    printed = capsys.readouterr().out
    assert "| minilm-mlp | zero-shot |" in printed and "| minilm-mlp | default |" in printed
    # every trained row against the zero-shot encoder: its Δ is the difference of the two means
    cells = [
        [c.strip() for c in line.split("|")[1:-1]] for line in printed.splitlines() if line.startswith("| minilm-")
    ]
    means = {(c[0], c[1]): float(c[5]) for c in cells if len(c) == 11}
    deltas = {(c[0], c[1]): float(c[2].split()[0]) for c in cells if len(c) == 6}
    assert set(deltas) == {(e, r) for e in ("minilm-linear", "minilm-mlp") for r in ("infonce", "default", "distill")}
    for (enc, row), delta in deltas.items():
        assert delta == pytest.approx(means[enc, row] - means[enc, "zero-shot"], abs=2e-4)
    for enc in ("minilm-linear", "minilm-mlp"):
        assert zero[enc]["rows"] == {} and zero[enc]["untrained"] == out[enc]["untrained"]
        assert set(out[enc]["rows"]) == {"infonce", "default", "distill"}
    assert len(list((tmp_path / "cache").glob("*.npy"))) == 1
