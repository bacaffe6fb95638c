"""Command line: ``jaxrank eval QRELS RUN``."""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

import numpy as np

CUTOFFS = (5, 10, 20, 100, 1000)


def _table(qrels_path, run_path) -> str:
    import jax.numpy as jnp

    import jaxrank
    from jaxrank import trec

    batch = trec.to_batch(trec.read_qrels(qrels_path), trec.read_run(run_path))
    scores = jnp.asarray(batch.scores)
    labels, where = jnp.asarray(batch.labels), jnp.asarray(batch.where)
    judged = dict(judgments=jnp.asarray(batch.judgments), judgments_where=jnp.asarray(batch.judgments_where))
    ranks = jaxrank.hard("stable")(scores, where, depth=None)
    common = dict(k=CUTOFFS, where=where, ranker=ranks)
    rows = {
        "P": jaxrank.precision(scores, labels, **common),
        "recall": jaxrank.recall(scores, labels, **common, **judged),
        "map_cut": jaxrank.average_precision(scores, labels, **common, **judged),
        "ndcg_cut": jaxrank.ndcg(scores, labels, **common, **judged),
        "success": jaxrank.success(scores, labels, **common),
    }
    lines = [f"{len(batch.qids)} queries; mean over queries (trec_eval conventions)", ""]
    lines.append("metric    " + "".join(f"{'@' + str(k):>9}" for k in CUTOFFS))
    for name, values in rows.items():
        mean = np.asarray(jaxrank.aggregate(values))
        lines.append(f"{name:<10}" + "".join(f"{v:9.4f}" for v in mean))
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="jaxrank", description="Ranking metrics for JAX.")
    sub = parser.add_subparsers(dest="command", required=True)
    ev = sub.add_parser("eval", help="evaluate a TREC run against qrels")
    ev.add_argument("qrels", nargs="?", help="qrels file (qid iter docno rel)")
    ev.add_argument("run", nargs="?", help="run file (qid Q0 docno rank score tag)")
    args = parser.parse_args(argv)
    from jaxrank import trec

    qrels, run = args.qrels, args.run
    if qrels is None and run is None:
        qrels, run = trec.demo_paths()
        print(f"no files given: evaluating the demo pair shipped with jaxrank ({qrels.name}, {run.name})\n")
    elif run is None:
        parser.error("give both QRELS and RUN, or neither for the demo")
    try:
        print(_table(qrels, run))
    except (trec.TrecFormatError, OSError) as e:
        print(f"jaxrank: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
