"""A practitioner's set of semantic-relevance metrics (the blog among the seeds):
precision and recall of retrieved id sets, the area under a precision-recall curve by
Simpson's rule, and an average precision over graded labels.

The blog's other two worked examples are metrics of the core: Spearman's rho of
true [0.9, 0.6, 0.3] against predicted [0.6, 0.4, 0.5] is 0.5, and nDCG with linear
gain over the real-valued labels is 0.9725:

  >>> import jaxrank
  >>> float(jaxrank.spearman([0.6, 0.4, 0.5], [0.9, 0.6, 0.3]))
  0.5
  >>> round(float(jaxrank.ndcg([0.6, 0.4, 0.5], [0.9, 0.6, 0.3])), 4)
  0.9725
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxrank import _checks
from jaxrank.metrics import common as _c
from jaxrank.metrics.common import Array, Gain
from jaxrank.metrics.segments import segmented
from jaxrank.ranking import hard
from jaxrank.ranking.backend import cumsum, row_sum


def _hits(retrieved, relevant):
    """Distinct valid retrieved ids found among the valid relevant ids, and both masks."""
    retrieved, relevant = jnp.asarray(retrieved), jnp.asarray(relevant)
    for name, x in (("retrieved", retrieved), ("relevant", relevant)):
        if x.ndim == 0 or not jnp.issubdtype(x.dtype, jnp.integer):
            raise ValueError(f"{name} must be integer ids with at least one axis, got {x.dtype}{list(x.shape)}")
    if retrieved.shape[:-1] != relevant.shape[:-1]:
        raise ValueError(
            f"retrieved and relevant must share their batch axes, got {retrieved.shape} and {relevant.shape}"
        )
    got, want = retrieved >= 0, relevant >= 0
    found = jnp.any((retrieved[..., :, None] == relevant[..., None, :]) & want[..., None, :], axis=-1)
    a = retrieved.shape[-1]
    earlier = jnp.tril(jnp.ones((a, a), bool), -1)
    repeat = jnp.any((retrieved[..., :, None] == retrieved[..., None, :]) & earlier & got[..., None, :], axis=-1)
    return row_sum(got & found & ~repeat), got, want


def set_precision(retrieved, relevant) -> Array:
    """Precision of a retrieved id set: the distinct retrieved ids that are relevant,
    over the number of retrieved entries.

    .. math:: P = \\frac{|\\mathrm{set}(retrieved) \\cap \\mathrm{set}(relevant)|}{|retrieved|}

    ``retrieved[..., a]`` and ``relevant[..., b]`` are integer ids padded with
    negative values (``-1``); the result is ``[...]``, 0 when nothing is retrieved.
    Duplicated retrieved ids count once above and every time below, as the blog's
    ``len(pre_labels)``.

    Example:
      >>> import jaxrank
      >>> round(float(jaxrank.set_precision([3, 7, 9, -1], [7, 9, 11])), 4)
      0.6667
    """
    hits, got, _ = _hits(retrieved, relevant)
    return _c.safe_divide(hits[..., None], row_sum(got))[..., 0]


def set_recall(retrieved, relevant) -> Array:
    """Recall of a retrieved id set: the distinct retrieved ids that are relevant, over
    the number of relevant entries.

    .. math:: R = \\frac{|\\mathrm{set}(retrieved) \\cap \\mathrm{set}(relevant)|}{|relevant|}

    Shapes and padding as :func:`set_precision`; 0 when no id is relevant.

    Example:
      >>> import jaxrank
      >>> float(jaxrank.set_recall([3, 7, 9, -1], [7, 9, 11, 12]))
      0.5
    """
    hits, _, want = _hits(retrieved, relevant)
    return _c.safe_divide(hits[..., None], row_sum(want))[..., 0]


def _simpson(x: Array, y: Array, count: Array) -> Array:
    """scipy's ``integrate.simpson(y, x=x)`` over the first ``count`` points of each row
    (``x`` strictly increasing there); an even count integrates the last interval with
    Cartwright's correction, two points by a trapezoid."""
    m = x.shape[-1]
    pad = jnp.zeros(x.shape[:-1] + (2,), x.dtype)
    xs, ys = jnp.concatenate([x, pad], -1), jnp.concatenate([y, pad], -1)
    x0, x1, x2 = xs[..., :m], xs[..., 1 : m + 1], xs[..., 2 : m + 2]
    y0, y1, y2 = ys[..., :m], ys[..., 1 : m + 1], ys[..., 2 : m + 2]
    h0, h1 = x1 - x0, x2 - x1
    safe0, safe1 = jnp.where(h0 != 0, h0, 1), jnp.where(h1 != 0, h1, 1)
    hsum = h0 + h1
    triple = hsum / 6 * (y0 * (2 - safe1 / safe0) + y1 * hsum * hsum / (safe0 * safe1) + y2 * (2 - safe0 / safe1))
    j = jnp.arange(m)
    last_full = jnp.where(count % 2 == 1, count - 1, count - 2)  # the points the triples cover
    body = jnp.sum(jnp.where((j % 2 == 0) & (j + 2 <= last_full[..., None]), triple, 0.0), axis=-1)

    def at(v, i):
        return jnp.take_along_axis(v, jnp.clip(i, 0, m - 1)[..., None], axis=-1)[..., 0]

    xa, xb, xc = at(x, count - 3), at(x, count - 2), at(x, count - 1)
    ya, yb, yc = at(y, count - 3), at(y, count - 2), at(y, count - 1)
    g0, g1 = xb - xa, xc - xb
    alpha = (2 * g1**2 + 3 * g0 * g1) / (6 * (g1 + g0))
    beta = (g1**2 + 3 * g0 * g1) / (6 * g0)
    eta = g1**3 / (6 * g0 * (g0 + g1))
    corrected = alpha * yc + beta * yb - eta * ya
    trapezoid = 0.5 * g1 * (yc + yb)
    tail = jnp.where(count % 2 == 1, 0.0, jnp.where(count == 2, trapezoid, corrected))
    return body + tail


def pr_auc(recall, precision, *, where=None) -> Array:
    """Area under a precision-recall curve given as points, as the blog computes it:
    the end points (recall 1, precision 0) and (0, 1) are added, the precisions of
    points with equal recall are averaged, and the curve, ordered by recall, is
    integrated by Simpson's rule (scipy's ``integrate.simpson``).

    ``recall[..., m]``, ``precision[..., m]`` and ``where[..., m]`` (valid points) give
    one curve per list, e.g. :func:`precision_recall_curve`'s outputs; the result is
    ``[...]``. Jittable: equal recalls are grouped by the exact ranker.

    Example:
      >>> import jaxrank
      >>> # points (0, 1), (0.5, mean(1, 0.5)), (1, mean(2/3, 0)): (1 + 4 * 0.75 + 1/3) / 6
      >>> round(float(jaxrank.pr_auc([0.5, 0.5, 1.0], [1.0, 0.5, 2 / 3])), 5)
      0.72222
    """
    recall = _checks.scores(recall, "recall")
    precision = _checks.same_shape(precision, recall.shape, "precision", "recall")
    valid = _checks.mask(where, recall.shape, "where", "recall")
    dtype = jnp.result_type(recall.dtype, precision.dtype, float)
    batch = recall.shape[:-1]
    ends = jnp.broadcast_to(jnp.asarray([1.0, 0.0], dtype), batch + (2,))
    x = jnp.concatenate([recall.astype(dtype), ends], -1)
    y = jnp.concatenate([precision.astype(dtype), ends[..., ::-1]], -1)
    valid = jnp.concatenate([valid, jnp.ones(batch + (2,), bool)], -1)
    # ascending recall, equal recalls one tie group
    r = hard("expected")(-x, valid)
    xs, run = r.in_rank_order(x), cumsum(r.in_rank_order(y))
    before = jnp.where(r.start > 0, jnp.take_along_axis(run, jnp.maximum(r.start - 1, 0), -1), 0.0)
    mean = (jnp.take_along_axis(run, r.end - 1, -1) - before) / (r.end - r.start)
    m = x.shape[-1]
    first = (r.start == jnp.arange(m)) & r.valid_positions()
    slot = jnp.where(first, cumsum(first.astype(dtype)).astype(jnp.int32) - 1, m)
    rows = jnp.arange(xs.reshape(-1, m).shape[0])[:, None]

    def compact(v):
        flat = jnp.zeros((rows.shape[0], m), dtype).at[rows, slot.reshape(-1, m)].set(v.reshape(-1, m), mode="drop")
        return flat.reshape(v.shape)

    return _simpson(compact(xs), compact(mean), row_sum(first).astype(jnp.int32))


@segmented()
def graded_average_precision(
    scores,
    labels,
    *,
    where=None,
    rel=1,
    ranker=_c.DEFAULT_RANKER,
    gain: Gain = "linear",
    judgments=None,
    judgments_where=None,
) -> Array:
    """The blog's average precision over graded labels: the precision at each
    position, weighted by the gain of the item there, averaged over all ``n`` items.

    .. math:: AP_G = \\frac{1}{n} \\sum_i G(y_i)\\,
        \\frac{\\#\\{j: y_j \\ge rel, r_j \\le r_i\\}}{r_i}

    ``gain`` as :func:`dcg`'s (``"linear"``, ``"exp"`` or a callable on labels). The
    blog maps labels 3/2/1 to gains 1/0.5/0 and counts label 3 as relevant.
    ``judgments`` and ``judgments_where`` cannot change the value: they are accepted
    (and checked) so that every metric takes the same keywords.

    Example (the blog's: gains [1, 0, 0.5] in rank order, precisions [1, 1/2, 1/3]):
      >>> import jaxrank
      >>> ap = jaxrank.graded_average_precision([0.6, 0.4, 0.5], [3, 2, 1], rel=3, gain=lambda y: (y - 1) / 2)
      >>> round(float(ap), 4)
      0.3889
    """
    gain_fn = _c.gain_fn(gain)
    p = _c.prepare(scores, labels, None, where, ranker, judgments, judgments_where)
    gains = jnp.where(p.valid, gain_fn(p.labels), 0)
    total = p.ranks.count_before(gains, p.weights(_c.inverse), p.relevant(rel))
    return p.finish(_c.safe_divide(total, row_sum(p.valid)))
