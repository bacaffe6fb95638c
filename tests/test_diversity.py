"""The intent-aware metrics (jaxrank.metrics.diversity) against ndeval's C binary and pyndeval,
under jit / vmap / padding / segments / 8 host devices, and their smooth relaxations."""

import functools
import json
import subprocess

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrank
from jaxrank import losses
from tests.devices import run_with_host_devices
from tests.xla import optimisations

pytestmark = pytest.mark.usefixtures("quick_compiles")  # many small programs (tests/conftest.py)


# ndeval's columns and the array function, cutoff and normalisation each one is
COLUMNS = {
    "ERR-IA@5": ("err_ia", 5),
    "ERR-IA@10": ("err_ia", 10),
    "ERR-IA@20": ("err_ia", 20),
    "nERR-IA@5": ("nerr_ia", 5),
    "nERR-IA@10": ("nerr_ia", 10),
    "nERR-IA@20": ("nerr_ia", 20),
    "alpha-DCG@5": ("alpha_dcg", 5),
    "alpha-DCG@10": ("alpha_dcg", 10),
    "alpha-DCG@20": ("alpha_dcg", 20),
    "alpha-nDCG@5": ("alpha_ndcg", 5),
    "alpha-nDCG@10": ("alpha_ndcg", 10),
    "alpha-nDCG@20": ("alpha_ndcg", 20),
    "NRBP": ("nrbp", None),
    "nNRBP": ("nnrbp", None),
    "MAP-IA": ("ap_ia", None),
    "P-IA@5": ("precision_ia", 5),
    "P-IA@10": ("precision_ia", 10),
    "P-IA@20": ("precision_ia", 20),
    "strec@5": ("subtopic_recall", 5),
    "strec@10": ("subtopic_recall", 10),
    "strec@20": ("subtopic_recall", 20),
}
NAMES = sorted({name for name, _ in COLUMNS.values()})
USES_ALPHA = {"alpha_dcg", "alpha_ndcg", "err_ia", "nerr_ia", "nrbp", "nnrbp"}


def generate(seed, topics=12, subtopics=5):
    """Diversity qrels ``{topic: {docno: [judgment per subtopic]}}`` and a run
    ``{topic: [docno in rank order]}``: graded judgments, unjudged retrieved documents,
    runs shorter and longer than 20, subtopics nobody judged relevant, a topic whose
    judgments are all 0, topics on one side only."""
    rng = np.random.default_rng(seed)
    qrels, run = {}, {}
    for topic in range(1, topics + 1):
        m = int(rng.integers(3, 60))
        docs = [f"d{int(x):04d}" for x in rng.choice(5000, m, replace=False)]
        grades = rng.choice([0, 0, 0, 1, 2, 3], size=(m, subtopics))
        if topic == 2:
            grades[:] = 0
        grades[:, 0] = np.where(topic % 3 == 0, 0, grades[:, 0])  # a subtopic never relevant
        if topic != topics:  # the last topic is in the run only
            qrels[topic] = {d: g for d, g in zip(docs, grades)}
        if topic == 1:
            continue  # in the qrels only
        n = int(rng.integers(1, 45))
        judged = list(rng.choice(docs, min(m, int(rng.integers(0, n + 1))), replace=False))
        unjudged = [f"u{int(x):04d}" for x in rng.choice(5000, n - len(judged), replace=False)]
        ranked = judged + unjudged
        rng.shuffle(ranked)
        run[topic] = ranked
    return qrels, run, subtopics


def write(tmp_path, qrels, run):
    q = tmp_path / "qrels"
    q.write_text(
        "".join(
            f"{t} {s} {d} {int(g[s])}\n" for t, docs in qrels.items() for d, g in docs.items() for s in range(len(g))
        )
    )
    r = tmp_path / "run"
    # ranks with gaps and lines out of order: ndeval sorts by the rank column
    lines = [f"{t} Q0 {d} {3 * i + 1} {100 - i} tag\n" for t, docs in run.items() for i, d in enumerate(docs)]
    r.write_text("".join(reversed(lines)))
    return q, r


def ndeval(binary, qrels_path, run_path, *flags):
    out = subprocess.run([str(binary), *flags, str(qrels_path), str(run_path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    header = lines[0].split(",")
    rows = {}
    for line in lines[1:]:
        fields = line.split(",")
        if fields[1] != "amean":
            rows[int(fields[1])] = dict(zip(header[2:], map(float, fields[2:])))
    return rows


def arrays(qrels, run, t, topics, n=0, m=0):
    """The padded batch of the given topics, in ndeval's orders: run by rank, judgments
    by docno ascending; at least ``n`` items and ``m`` judgments wide."""
    n = max(n, *(len(run[q]) for q in topics))
    m = max(m, *(len(qrels[q]) for q in topics))
    labels = np.zeros((len(topics), n, t))
    where = np.zeros((len(topics), n), bool)
    judgments = np.zeros((len(topics), m, t))
    jwhere = np.zeros((len(topics), m), bool)
    for b, q in enumerate(topics):
        for i, d in enumerate(run[q]):
            labels[b, i] = qrels[q].get(d, 0)
            where[b, i] = True
        for j, d in enumerate(sorted(qrels[q])):
            judgments[b, j] = qrels[q][d]
            jwhere[b, j] = True
    scores = -np.tile(np.arange(n, dtype=float), (len(topics), 1))
    return dict(scores=scores, labels=labels, where=where, judgments=judgments, judgments_where=jwhere)


def values(name, batch, k, alpha=0.5, beta=0.5, ranker=None):
    kwargs = dict(batch)
    kwargs["k"] = k
    if name in USES_ALPHA:
        kwargs["alpha"] = alpha
    if name in ("nrbp", "nnrbp"):
        kwargs["beta"] = beta
    if ranker is not None:
        kwargs["ranker"] = ranker
    scores, labels = kwargs.pop("scores"), kwargs.pop("labels")
    return getattr(jaxrank, name)(scores, labels, **kwargs)


@functools.partial(jax.jit, static_argnames="wanted")
def _columns(batch, alpha, beta, wanted):
    return {c: values(name, batch, k, alpha, beta) for c, (name, k) in wanted}


def columns(batch, alpha, beta, wanted=COLUMNS):
    """Every column of ``wanted`` (name -> (metric, k)) in one compiled call; alpha and beta
    traced, so that batches of the same shapes share the program."""
    got = _columns(batch, np.float64(alpha), np.float64(beta), tuple(wanted.items()))
    return {c: np.asarray(v) for c, v in got.items()}


@pytest.mark.parametrize("seed, flags", [(0, ()), (1, ("-alpha", "0.3", "-beta", "0.7")), (2, ("-alpha", "1"))])
def test_arrays_equal_ndeval_per_topic(ndeval_binary, tmp_path, seed, flags):
    qrels, run, t = generate(seed)
    want = ndeval(ndeval_binary, *write(tmp_path, qrels, run), *flags)
    opts = dict(zip(flags[::2], map(float, flags[1::2])))
    alpha, beta = opts.get("-alpha", 0.5), opts.get("-beta", 0.5)
    topics = sorted(set(qrels) & set(run))
    # one width for every seed (generate: under 45 items, 60 judgments): one compiled program
    batch = arrays(qrels, run, t, topics, n=45, m=60)
    checked = 0
    every = columns(batch, alpha, beta)
    for column, (name, _) in COLUMNS.items():
        got = every[column]
        for b, q in enumerate(topics):
            expected = want[q][column]
            if np.isnan(expected):  # nNRBP of a topic without relevant judgments: 0/0 in ndeval
                assert name == "nnrbp" and got[b] == 0
                continue
            assert abs(got[b] - expected) <= 5e-7 + 1e-12, (column, q, got[b], expected)
            checked += 1
    assert checked > 200


def test_arrays_equal_pyndeval_at_other_cutoffs_and_levels():
    pyndeval = pytest.importorskip("pyndeval")
    qrels, run, t = generate(3, topics=10, subtopics=4)
    topics = sorted(set(qrels) & set(run))
    for rel in (1, 2):
        records = [
            (str(q), str(s), d, int(g[s])) for q, docs in qrels.items() for d, g in docs.items() for s in range(t)
        ]
        measures = [
            "ERR-IA@3",
            "nERR-IA@7",
            "alpha-DCG@1",
            "alpha-nDCG@15",
            "P-IA@2",
            "strec@6",
            "NRBP",
            "nNRBP",
            "MAP-IA",
        ]
        evaluator = pyndeval.RelevanceEvaluator(records, measures, relevance_level=rel, alpha=0.4, beta=0.6)
        # pyndeval orders by score; these scores keep the rank order
        scored = [(str(q), d, float(100 - i)) for q in sorted(run) for i, d in enumerate(run[q])]
        want = evaluator.evaluate(scored)
        batch = dict(arrays(qrels, run, t, topics), rel=rel)
        names = {
            "ERR-IA": "err_ia",
            "nERR-IA": "nerr_ia",
            "alpha-DCG": "alpha_dcg",
            "alpha-nDCG": "alpha_ndcg",
            "P-IA": "precision_ia",
            "strec": "subtopic_recall",
            "NRBP": "nrbp",
            "nNRBP": "nnrbp",
            "MAP-IA": "ap_ia",
        }
        wanted = {}
        for measure in measures:
            base, _, cut = measure.partition("@")
            wanted[measure] = (names[base], int(cut) if cut else None)
        every = columns(batch, 0.4, 0.6, wanted)
        for measure in measures:
            got = every[measure]
            for b, q in enumerate(topics):
                expected = want[str(q)][measure]
                if np.isnan(expected):
                    assert got[b] == 0
                    continue
                np.testing.assert_allclose(got[b], expected, rtol=1e-12, atol=1e-12, err_msg=f"{measure} {q} rel={rel}")


def small_batch(seed=0, b=6, n=30, t=4, m=50):
    rng = np.random.default_rng(seed)
    scores = np.round(rng.standard_normal((b, n)), 1)  # ties
    labels = (rng.random((b, n, t)) < 0.2) * rng.integers(1, 3, (b, n, t))
    where = rng.random((b, n)) < 0.85
    judgments = (rng.random((b, m, t)) < 0.15).astype(float)
    judgments[:, :n] = labels * where[..., None]  # the retrieved judged documents are among the judgments
    jwhere = rng.random((b, m)) < 0.9
    jwhere[:, :n] = True
    return scores, labels, where, judgments, jwhere


def call(name, scores, labels, **kw):
    return getattr(jaxrank, name)(scores, labels, **kw)


def every_metric(s, y, w, j, jw, ranker=None):
    """Every diversity metric at three kinds of cutoff: none, one, several (past the list)."""
    out = {}
    for name in NAMES:
        for k in (None, (1, 5, 40)):
            kw = dict(k=k, where=w, judgments=j, judgments_where=jw)
            if ranker is not None:
                kw["ranker"] = ranker
            out[f"{name}@{k}"] = call(name, s, y, **kw)
    return out


def close(got, want):
    for key in want:
        np.testing.assert_allclose(np.asarray(got[key]), np.asarray(want[key]), rtol=1e-12, atol=1e-12, err_msg=key)


def test_jit_vmap_and_padding_leave_the_values_unchanged():
    s, y, w, j, jw = small_batch()
    plain = jax.jit(every_metric)(s, y, w, j, jw)
    # eagerly, one metric: the compiled program computes what the functions compute
    np.testing.assert_allclose(
        call("alpha_ndcg", s, y, k=5, where=w, judgments=j, judgments_where=jw),
        plain["alpha_ndcg@(1, 5, 40)"][..., 1],
        rtol=1e-12,
        atol=1e-12,
    )
    close(jax.jit(jax.vmap(every_metric))(s, y, w, j, jw), plain)

    # masked items appended to the list and to the judgments change nothing
    def pad(x, width, value):
        return np.concatenate([x, np.full(x.shape[:1] + (width,) + x.shape[2:], value, x.dtype)], axis=1)

    close(
        jax.jit(every_metric)(pad(s, 7, 9.0), pad(y, 7, 1), pad(w, 7, False), pad(j, 3, 1.0), pad(jw, 3, False)), plain
    )


def test_traced_alpha_and_beta_give_the_values_and_gradients_of_the_same_numbers():
    # jaxrank.evaluate passes alpha and beta traced; alpha = 0 takes the plain sum there too
    s, y, w, j, jw = small_batch()
    kw = dict(k=(1, 5), where=w, judgments=j, judgments_where=jw, ranker=jaxrank.approx(0.5, units="std"))

    def metrics(s, alpha, beta):
        return (
            jaxrank.alpha_ndcg(s, y, alpha=alpha, **kw),
            jaxrank.nerr_ia(s, y, alpha=alpha, **kw),
            jaxrank.nnrbp(s, y, alpha=alpha, beta=beta, where=w, judgments=j, judgments_where=jw),
        )

    def with_gradient(s, alpha, beta):
        gradient = jax.grad(lambda s: sum(jnp.sum(v) for v in metrics(s, alpha, beta)[:2]))(s)
        return (*metrics(s, alpha, beta), gradient)

    settings = [(0.0, 0.5), (0.5, 0.3), (1.0, 0.9)]
    traced = jax.jit(jax.vmap(with_gradient, (None, 0, 0)))(s, *(jnp.asarray(v) for v in zip(*settings)))
    for i, (alpha, beta) in enumerate(settings):
        want = jax.jit(functools.partial(with_gradient, alpha=alpha, beta=beta))(s)
        for got, expected in zip(traced, want):
            np.testing.assert_allclose(got[i], expected, rtol=1e-10, atol=1e-12, err_msg=str((alpha, beta)))
            assert np.all(np.isfinite(got[i]))


def test_segments_equal_each_list_alone():
    s, y, w, _, _ = small_batch(1, b=1, n=40)
    segments = np.repeat(np.arange(4), 10)[None]

    def packed(s, y, w):
        return {n: call(n, s, y, k=(3, 10), where=w, segments=segments, num_segments=4) for n in NAMES}

    def alone(s, y, w):  # the four lists as a batch of four rows
        return {n: call(n, s, y, k=(3, 10), where=w) for n in NAMES}

    got = jax.jit(packed)(s, y, w)
    want = jax.jit(alone)(s.reshape(4, 10), y.reshape(4, 10, -1), w.reshape(4, 10))
    close({n: np.asarray(v)[0] for n, v in got.items()}, want)


def brute_alpha_ndcg(order, rel, judged, k, alpha):
    """alpha-nDCG@k by definition: gains counted in the given order, the ideal by trying
    every order of the judged relevant items (small lists)."""
    import itertools

    def dcg(seq):
        seen = np.zeros(rel.shape[-1])
        total = 0.0
        for p, item in enumerate(seq[:k]):
            total += np.sum(item * (1 - alpha) ** seen) / np.log2(p + 2)
            seen += item
        return total

    best = max(dcg([judged[i] for i in perm]) for perm in itertools.permutations(range(len(judged))))
    return dcg([rel[i] for i in order]) / best if best > 0 else 0.0


def test_greedy_ideal_reaches_the_best_order_on_lists_where_greedy_is_optimal():
    # one relevant item per subtopic each: the greedy ideal is optimal, and alpha-nDCG of the
    # ideal order is 1 while any other order scores by definition
    rng = np.random.default_rng(5)
    alpha_ndcg = jax.jit(functools.partial(jaxrank.alpha_ndcg, k=4, alpha=0.5))  # one program for the five lists
    for _ in range(5):
        t = 3
        judged = np.eye(t)[rng.permutation(t)]
        judged = np.concatenate([judged, judged[:2]])  # two redundant items
        scores = rng.standard_normal(len(judged))
        order = np.argsort(-scores, kind="stable")
        got = float(alpha_ndcg(scores, judged))
        np.testing.assert_allclose(got, brute_alpha_ndcg(order, judged, judged, 4, 0.5), rtol=1e-12)


SOFT = {
    "approx": jaxrank.approx(),
    "softrank": jaxrank.softrank(),
    "neuralsort": jaxrank.neuralsort(),
    "softsort": jaxrank.softsort(),
}


SHARP = jaxrank.approx(0.3, units="std")
# k=5 below the shortest list: at k >= n subtopic recall and P-IA no longer depend on the order
LOSSES = [
    ("alpha_ndcg", None),
    ("alpha_ndcg", 5),
    ("nerr_ia", 5),
    ("nnrbp", None),
    ("ap_ia", None),
    ("subtopic_recall", 5),
    ("precision_ia", 5),
]


@pytest.mark.parametrize(
    "ranker, n",
    [(name, n) for name in SOFT for n in (10, 200)] + [("sharp", 1000)],
)
def test_soft_diversity_gradients_are_finite_and_non_zero(ranker, n):
    # At n = 1000 the defaults' top soft ranks lie in the hundreds (test_default_approx_blurs_...), and
    # the cascade's product over every relevant item "half above" underflows float32:
    # docs/diversity.md gives the sharper ranker for long lists, checked here.
    rng = np.random.default_rng(n)
    labels = jnp.asarray(rng.random((2, n, 4)) < 0.3)
    base = rng.standard_normal((2, n))  # one draw at every scale, as the nDCG grid of test_soft
    smooth = SHARP if ranker == "sharp" else SOFT[ranker]

    def loss(name, k, s):
        return jnp.sum(losses.metric_loss(s, labels, metric=getattr(jaxrank, name), ranker=smooth, k=k))

    each_loss = [functools.partial(loss, name, k) for name, k in LOSSES]

    # each loss's gradient alone: a Jacobian's backward pass would carry all seven
    gradients = jax.jit(lambda s: jnp.stack([jax.grad(loss)(s) for loss in each_loss]))
    for scale in (0.01, 1.0, 100.0):
        with optimisations(on=n == 1000):  # at n = 1000 the run outweighs the compile
            g = np.asarray(gradients(jnp.asarray(base * scale, jnp.float32)))
        for (name, k), row in zip(LOSSES, g):
            assert np.isfinite(row).all(), (name, k, scale)
            assert np.abs(row).max() > 0, (name, k, scale)


def test_default_approx_blurs_the_cascades_of_long_lists():
    # what docs/diversity.md says of approx() at n = 1000, and why the sharper ranker it
    # gives keeps the gradient
    rng = np.random.default_rng(1000)
    labels = jnp.asarray(rng.random((2, 1000, 4)) < 0.3)
    base = rng.standard_normal((2, 1000))
    # temperature 3 in score units, kept within the band of each list's spread: sharp once
    # the scores spread wide (std 100), blurred below
    ranks = jax.jit(lambda s: jaxrank.approx()(s, None).ranks)  # one program for the three scales
    sharp_top = ranks(jnp.asarray(base * 100.0, jnp.float32))
    assert float(jnp.min(sharp_top)) < 2

    @jax.jit  # both gradients in one program, compiled once for both scales
    def gradients(s):
        def grad(ranker):
            return jax.grad(lambda x: jnp.sum(jaxrank.nnrbp(x, labels, ranker=ranker)))(s)

        return grad(jaxrank.approx()), grad(SHARP)

    for scale in (0.01, 1.0):
        s = jnp.asarray(base * scale, jnp.float32)
        assert float(jnp.min(ranks(s))) > 100, scale
        with optimisations(on=True):  # at n = 1000 the run outweighs the compile
            blurred, sharp = gradients(s)
        assert np.abs(blurred).max() == 0, scale
        assert np.abs(sharp).max() > 0, scale


def test_soft_values_approach_the_hard_ones_as_the_temperature_vanishes():
    s, y, w, j, jw = small_batch(2)
    rng = np.random.default_rng(0)
    # scores at least 0.8 apart (as test_soft's limits): one order for the limit to reach
    s = np.stack([rng.permutation(s.shape[1]) for _ in s]) + rng.uniform(0, 0.2, s.shape)
    hard = jax.jit(every_metric)(s, y, w, j, jw)

    def gap(tau):
        ranker = jaxrank.approx(tau, units="std")
        soft = jax.jit(lambda *a: every_metric(*a, ranker=ranker))(s, y, w, j, jw)
        return {key: float(np.max(np.abs(np.asarray(soft[key]) - np.asarray(hard[key])))) for key in hard}

    warm, cold = gap(0.3), gap(1e-3)
    for key in hard:
        assert cold[key] < 1e-6, (key, cold[key])
    assert max(warm.values()) > 1e-2  # a relaxation, away from the hard values when warm


def test_metric_loss_trains_a_linear_model_on_alpha_ndcg():
    # the recipe of docs/diversity.md: 32 queries, lists of 200 documents, 5 subtopics, the
    # ranker the docs give for cascades (the default approx() blurs them: 0.55 -> 0.68 there)
    import optax

    rng = np.random.default_rng(0)
    q, n, t, f = 32, 200, 5, 8
    x = rng.standard_normal((q, n, f)).astype(np.float32)
    labels = ((x @ rng.standard_normal((f, t))) > 1.5).astype(np.float32)  # each subtopic along its own direction
    ranker = jaxrank.approx(0.3, units="std")
    # float32, as the recipe runs with JAX's default dtypes (this suite turns x64 on: a float64
    # model doubled the steps' run time and compiled the evaluation again)
    params = jnp.zeros(f, jnp.float32)
    opt = optax.adam(0.05)
    state = opt.init(params)

    def loss(p):
        return jnp.mean(losses.metric_loss(x @ p, labels, metric=jaxrank.alpha_ndcg, k=20, ranker=ranker))

    @jax.jit
    def step(p, state):
        g = jax.grad(loss)(p)
        updates, state = opt.update(g, state)
        return optax.apply_updates(p, updates), state

    evaluate = jax.jit(lambda p: jnp.mean(jaxrank.alpha_ndcg(x @ p, labels, k=20)))
    with optimisations(on=True):  # 60 steps: optimised code pays
        before = float(evaluate(jnp.asarray(rng.standard_normal(f), jnp.float32)))  # a random model
        for _ in range(60):
            params, state = step(params, state)
        after = float(evaluate(params))
    assert after > before + 0.25 and after > 0.8, (before, after)


def test_labels_and_judgments_of_the_wrong_shape_are_refused():
    with pytest.raises(ValueError, match=r"labels must have shape \(3,\) \+ \(t,\)"):
        jaxrank.alpha_ndcg(jnp.zeros(3), jnp.zeros(3))
    with pytest.raises(ValueError, match="judgments must have shape"):
        jaxrank.alpha_ndcg(jnp.zeros(3), jnp.zeros((3, 2)), judgments=jnp.zeros((4, 3)))
    with pytest.raises(ValueError, match="alpha"):
        jaxrank.alpha_ndcg(jnp.zeros(3), jnp.zeros((3, 2)), alpha=1.5)
    with pytest.raises(ValueError, match="beta"):
        jaxrank.nrbp(jnp.zeros(3), jnp.zeros((3, 2)), beta=-0.1)


SHARDED = r"""
import json
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import jaxrank

mesh = Mesh(jax.devices(), ("d",))
rows = NamedSharding(mesh, P("d"))
rng = np.random.default_rng(0)
B, N, T, M = 16, 24, 3, 32
s = np.round(rng.standard_normal((B, N)), 1).astype(np.float32)
y = (rng.random((B, N, T)) < 0.25).astype(np.float32)
w = rng.random((B, N)) < 0.9
j = (rng.random((B, M, T)) < 0.2).astype(np.float32)
j[:, :N] = y * w[..., None]
jw = np.ones((B, M), bool)
NAMES = ["alpha_dcg", "alpha_ndcg", "err_ia", "nerr_ia", "nrbp", "nnrbp", "precision_ia", "ap_ia",
         "subtopic_recall"]

def f(s, y, w, j, jw, ranker):
    return {n: getattr(jaxrank, n)(s, y, k=(5, 10) if n not in ("nrbp", "nnrbp", "ap_ia") else None, where=w,
                                   judgments=j, judgments_where=jw, ranker=ranker) for n in NAMES}

gaps = {}
for label, ranker in {"hard": jaxrank.hard(), "approx": jaxrank.approx(0.5)}.items():
    g = lambda *a, r=ranker: f(*a, r)
    whole = jax.jit(g)(s, y, w, j, jw)
    args = tuple(jax.device_put(a, rows) for a in (s, y, w, j, jw))
    in_map = jax.jit(jax.shard_map(g, mesh=mesh, in_specs=P("d"), out_specs=P("d")))(*args)
    in_jit = jax.jit(g)(*args)
    gap = lambda a, b: max(float(np.max(np.abs(np.asarray(a[n]) - np.asarray(b[n])))) for n in NAMES)
    gaps[label] = dict(shard_map=gap(in_map, whole), jit=gap(in_jit, whole),
                       finite=all(bool(np.isfinite(np.asarray(v)).all()) for v in whole.values()))
print("REPORT" + json.dumps(gaps))
"""


def test_diversity_metrics_on_8_host_devices_equal_the_unsharded_values():
    report = json.loads(run_with_host_devices(SHARDED, devices=8).split("REPORT", 1)[1])
    for label, gap in report.items():
        assert gap["finite"], label
        assert gap["shard_map"] < 1e-6 and gap["jit"] < 1e-6, (label, gap)
