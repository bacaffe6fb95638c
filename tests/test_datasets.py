"""jaxrank.datasets: svmlight / LETOR reading and per-query padding."""

import numpy as np
import pytest

import jaxrank
from jaxrank.datasets import pad_queries, read_svmlight

TOY = """\
# a comment line, then a blank line

2 qid:10 1:0.5 3:1.25 # doc A
0 qid:10 2:-0.75
1 qid:3 4:8e-1
3 qid:3
0 qid:3 1:1 2:2 3:3 4:4
4 qid:42 2:1.5
"""


def test_toy_file_with_qids(tmp_path):
    path = tmp_path / "toy.svm"
    path.write_text(TOY)
    data = read_svmlight(path)
    # 6 documents, the largest index is 4 (1-based) -> 4 columns.
    assert data.features.shape == (6, 4)
    assert data.features.dtype == np.float32
    expected = np.zeros((6, 4), np.float32)
    expected[0, 0], expected[0, 2] = 0.5, 1.25
    expected[1, 1] = -0.75
    expected[2, 3] = 0.8
    expected[4] = [1, 2, 3, 4]
    expected[5, 1] = 1.5
    np.testing.assert_array_equal(data.features, expected)
    assert data.labels.tolist() == [2, 0, 1, 3, 0, 4]
    assert data.group_sizes.tolist() == [2, 3, 1]  # qid 10: 2 docs, qid 3: 3, qid 42: 1
    assert data.qids.tolist() == [10, 3, 42]
    features, labels, sizes, qids = data  # a plain tuple too
    assert sizes.sum() == len(labels) == len(features)


def test_num_features_and_zero_based(tmp_path):
    path = tmp_path / "toy.svm"
    path.write_text(TOY)
    wide = read_svmlight(path, num_features=7)
    assert wide.features.shape == (6, 7)
    assert (wide.features[:, 4:] == 0).all()
    with pytest.raises(ValueError, match=r"toy\.svm, line 5: feature index 4 exceeds num_features=3"):
        read_svmlight(path, num_features=3)
    zero = read_svmlight(path, zero_based=True)
    # index j is column j: 5 columns, column 0 empty.
    assert zero.features.shape == (6, 5)
    np.testing.assert_array_equal(zero.features[:, 1:], read_svmlight(path).features)
    assert (zero.features[:, 0] == 0).all()


def test_query_file(tmp_path):
    data = tmp_path / "rank.txt"
    data.write_text("1 1:1\n0 2:1\n2 1:3 2:4\n0 3:1\n")
    query = tmp_path / "rank.txt.query"
    query.write_text("3\n1\n")
    out = read_svmlight(data, query)
    assert out.group_sizes.tolist() == [3, 1]
    assert out.qids.tolist() == [0, 1]
    assert out.labels.tolist() == [1, 0, 2, 0]
    # No qid and no query file: one query holding everything.
    assert read_svmlight(data).group_sizes.tolist() == [4]
    query.write_text("2\n1\n")
    with pytest.raises(ValueError, match="counts 3 documents but .* has 4"):
        read_svmlight(data, query)
    query.write_text("3\nx\n")
    with pytest.raises(ValueError, match=r"rank\.txt\.query, line 2"):
        read_svmlight(data, query)
    query.write_text("4\n0\n")
    with pytest.raises(ValueError, match=r"line 2: a query must have at least one document"):
        read_svmlight(data, query)


@pytest.mark.parametrize(
    "line, message",
    [
        ("x qid:1 1:2", "label 'x' is not a number"),
        ("1 qid:a 1:2", "qid 'a' is not an integer"),
        ("1 qid:1 1-2", "expected idx:value, got '1-2'"),
        ("1 qid:1 1:abc", "expected idx:value, got '1:abc'"),
        ("1 qid:1 z:1", "expected idx:value, got 'z:1'"),
        ("1 qid:1 0:1", r"feature index 0 is out of range \(indices are 1-based"),
        ("1 qid:1 2:1 2:3", "a feature index is repeated"),
        ("1 1:1 qid:1", "qid: must come right after the label"),
        ("1 qid:1 1:nan", "feature value .nan. is not finite"),
        ("inf qid:1 1:1", "label 'inf' is not finite"),
    ],
)
def test_bad_lines_name_file_and_line(tmp_path, line, message):
    path = tmp_path / "bad.svm"
    path.write_text("0 qid:1 1:1\n\n" + line + "\n0 qid:1 1:1\n")
    with pytest.raises(ValueError, match=r"bad\.svm, line 3: " + message):
        read_svmlight(path)


def test_qid_problems(tmp_path):
    path = tmp_path / "q.svm"
    path.write_text("0 qid:1 1:1\n0 qid:2 1:1\n0 qid:1 1:1\n")
    with pytest.raises(ValueError, match=r"q\.svm, line 3: the documents of qid 1 are not consecutive"):
        read_svmlight(path)
    path.write_text("0 qid:1 1:1\n0 1:1\n")
    with pytest.raises(ValueError, match=r"q\.svm, line 2: qid: missing"):
        read_svmlight(path)


def test_empty_file(tmp_path):
    path = tmp_path / "empty.svm"
    path.write_text("# nothing\n\n")
    data = read_svmlight(path, num_features=3)
    assert data.features.shape == (0, 3) and data.group_sizes.size == 0
    x, y, where = pad_queries(data.features, data.labels, data.group_sizes, max_docs=2)
    assert x.shape == (0, 2, 3) and y.shape == (0, 2) and where.shape == (0, 2)


def test_pad_queries():
    features = np.arange(12, dtype=np.float64).reshape(6, 2)  # doc i = [2i, 2i+1]
    labels = np.array([3, 0, 1, 2, 2, 4])
    x, y, where = pad_queries(features, labels, [1, 3, 2])
    assert x.shape == (3, 3, 2) and x.dtype == np.float32
    assert where.tolist() == [[True, False, False], [True, True, True], [True, True, False]]
    assert y.tolist() == [[3, 0, 0], [0, 1, 2], [2, 4, 0]]
    np.testing.assert_array_equal(x[1], features[1:4])
    np.testing.assert_array_equal(x[2, :2], features[4:6])
    assert (x[~where] == 0).all()
    # Wider: more padding, same content.
    x5, y5, where5 = pad_queries(features, labels, [1, 3, 2], max_docs=5)
    np.testing.assert_array_equal(x5[:, :3], x)
    assert where5.sum() == 6 and not where5[:, 3:].any()
    # Narrower: each query keeps its first max_docs documents.
    x2, y2, where2 = pad_queries(features, labels, [1, 3, 2], max_docs=2)
    assert y2.tolist() == [[3, 0], [0, 1], [2, 4]]
    assert where2.sum() == 1 + 2 + 2
    with pytest.raises(ValueError, match="sum to 5 but there are 6"):
        pad_queries(features, labels, [1, 3, 1])
    with pytest.raises(ValueError, match="max_docs"):
        pad_queries(features, labels, [1, 3, 2], max_docs=0)


def test_padding_is_a_no_op_for_metrics():
    """The padded layout feeds jaxrank directly; masked padding changes nothing."""
    rng = np.random.default_rng(0)
    sizes = [4, 1, 6]
    features = rng.normal(size=(11, 3))
    labels = rng.integers(0, 3, 11)
    x, y, where = pad_queries(features, labels, sizes)
    x9, y9, where9 = pad_queries(features, labels, sizes, max_docs=9)
    w = np.array([1.0, -2.0, 0.5])
    got = jaxrank.ndcg(x @ w, y, k=(1, 3, 10), where=where)
    got9 = jaxrank.ndcg(x9 @ w, y9, k=(1, 3, 10), where=where9)
    np.testing.assert_allclose(got, got9, rtol=1e-6)
    # One query by hand: its own list, unpadded.
    start = 0
    for q, size in enumerate(sizes):
        s = features[start : start + size] @ w
        single = jaxrank.ndcg(s, labels[start : start + size], k=(1, 3, 10))
        np.testing.assert_allclose(got[q], single, rtol=1e-6)
        start += size


def _first_line_by_hand(path):
    with open(path) as f:
        tokens = f.readline().split()
    row = np.zeros(300)
    for tok in tokens[1:]:
        i, v = tok.split(":")
        row[int(i) - 1] = float(v)
    return float(tokens[0]), row


@pytest.mark.parametrize(
    "name, queries, docs, label_counts",
    [
        # label counts by `cut -d' ' -f1 rank.train | sort | uniq -c`
        ("rank.train", 201, 3005, [645, 1211, 858, 222, 69]),
        ("rank.test", 50, 768, [206, 256, 252, 44, 10]),
    ],
)
def test_lightgbm_lambdarank_files(shared_data, name, queries, docs, label_counts):
    folder = shared_data / "lambdarank"
    data = read_svmlight(folder / name, folder / f"{name}.query")
    assert data.features.shape == (docs, 300)
    assert data.group_sizes.size == queries and data.group_sizes.sum() == docs
    sizes_by_hand = [int(s) for s in (folder / f"{name}.query").read_text().split()]
    assert data.group_sizes.tolist() == sizes_by_hand
    assert np.bincount(data.labels.astype(int)).tolist() == label_counts
    assert np.isfinite(data.features).all()
    label, row = _first_line_by_hand(folder / name)
    assert data.labels[0] == label
    np.testing.assert_allclose(data.features[0], row, rtol=1e-6)
    # The same data read with num_features fixed (as for a test split that may
    # not use the last feature).
    again = read_svmlight(folder / name, folder / f"{name}.query", num_features=300)
    np.testing.assert_array_equal(again.features, data.features)
    x, y, where = pad_queries(data.features, data.labels, data.group_sizes)
    assert x.shape == (queries, data.group_sizes.max(), 300)
    assert where.sum() == docs
    np.testing.assert_array_equal(where.sum(1), data.group_sizes)
    np.testing.assert_array_equal(np.sort(y[where]), np.sort(data.labels))
