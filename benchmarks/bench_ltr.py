#!/usr/bin/env python
"""Learning-to-rank benchmark: the full 5-seed run of examples/train_ltr.py, and its tuning.

Two commands:

``full``
    Every loss of ``examples/train_ltr.py`` with its chosen hyperparameters,
    5 seeds, plus LightGBM's LambdaRank; evaluated on the test queries. Prints
    the markdown table (the one in ``docs/reports/letor.md``), and writes the JSON
    results and the nDCG@10 curves when asked::

        python benchmarks/bench_ltr.py full --json ltr.json --plot ltr.png

``tune``
    A grid search on held-out TRAINING queries only: for each setting, each of
    ``--folds`` random splits of the 201 training queries (``--valid-fraction``
    held out, split seeds 0, 1, ...) trains ``--seeds`` models on the rest and
    scores nDCG@10 on the held-out part. The test queries are never read::

        python benchmarks/bench_ltr.py tune --losses approx \\
            --grid lr=3e-4,1e-3 weight_decay=1e-4,1e-2 temperature=0.1,1
        python benchmarks/bench_ltr.py tune --losses neuralsort --grid anneal=3 score_norm=on,off

    Settings are printed best first (mean validation nDCG@10 over folds and
    seeds, at the end of training and at the best checkpoint).

Both print a header (machine, versions, load before) and a footer (load after, and
whether the run was "noisy": docs/reports/index.md); ``tune`` marks each setting's row.
Wall times are the only timings here; the nDCG numbers do not depend on the load.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

import _machine
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import train_ltr  # noqa: E402


def _value(text: str):
    if text in ("True", "False", "on", "off"):  # score_norm=on, layernorm=off, ...
        return text in ("True", "on")
    if "," in text and not text.startswith("("):
        return tuple(int(v) for v in text.split(","))
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return None if text == "None" else text


def _grid(specs):
    """``["lr=1e-3,3e-4", "hidden=256:128"]`` -> list of override dicts (cartesian product)."""
    axes = []
    for spec in specs:
        key, _, values = spec.partition("=")
        if key == "hidden":  # hidden=256:128,64:32
            vals = [tuple(int(h) for h in v.split(":")) for v in values.split(",")]
        else:
            vals = [_value(v) for v in values.split(",")]
        axes.append([(key, v) for v in vals])
    return [dict(combo) for combo in itertools.product(*axes)] or [{}]


def tune(args) -> list:
    losses = [s for s in args.losses.split(",") if s]
    rows = []
    for loss in losses:
        for setting in _grid(args.grid):
            overrides = dict(setting)
            if args.steps:
                overrides.setdefault("steps", args.steps)
            overrides.setdefault("eval_every", args.eval_every)
            curves, finals = [], []
            start = time.perf_counter()
            watch = _machine.Watch()
            for fold in range(args.folds):
                r = train_ltr.run(
                    [loss],
                    tuple(range(args.seeds)),
                    data_dir=args.data,
                    valid_fraction=args.valid_fraction,
                    split_seed=fold,
                    lightgbm=False,
                    overrides=overrides,
                    progress=False,
                )
                res = r["losses"][loss]
                curves.append(np.asarray(res["history"]["ndcg@10"]))  # [seeds, evals]
                finals.append(np.asarray(res["per_seed"])[:, -1])
                steps = res["history"]["step"]
                cfg = res["config"]
            curve = np.concatenate(curves).mean(0)
            row = dict(
                loss=loss,
                setting=setting,
                config=cfg,
                final=float(np.mean(finals)),
                final_std_over_folds=float(np.std([f.mean() for f in finals])),
                best=float(curve.max()),
                best_step=int(steps[int(curve.argmax())]),
                curve=curve.round(4).tolist(),
                steps=steps,
                seconds=time.perf_counter() - start,
                load=watch.stop().flag,
            )
            rows.append(row)
            print(
                f"{loss:>22} {json.dumps(setting):60s} final {row['final']:.4f} "
                f"(± {row['final_std_over_folds']:.4f} over folds)  best {row['best']:.4f} "
                f"@ {row['best_step']}  [{row['seconds']:.0f}s{' noisy' if row['load'] else ''}]",
                flush=True,
            )
    print("\nbest first:")
    for row in sorted(rows, key=lambda r: -r["final"]):
        print(f"{row['loss']:>22} {json.dumps(row['setting']):60s} {row['final']:.4f}")
    if args.json:
        Path(args.json).write_text(json.dumps(dict(args=vars(args), rows=rows), indent=1))
    return rows


def full(args) -> dict:
    argv = ["--seeds", str(args.seeds), "--losses", args.losses, "--data", args.data]
    if args.json:
        argv += ["--json", args.json]
    if args.plot:
        argv += ["--plot", args.plot]
    if args.no_progress:
        argv += ["--no-progress"]
    start = time.perf_counter()
    with _machine.Watch() as watch:
        results = train_ltr.main(argv)
    print(f"\n{time.perf_counter() - start:.0f} s in all {watch.flag}")
    for name, r in results["losses"].items():
        print(f"  {name}: {r['seconds']:.0f} s")
    return results


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="command", required=True)
    f = sub.add_parser("full", help="the 5-seed run on test (docs/reports/letor.md)")
    f.add_argument("--seeds", type=int, default=5)
    f.add_argument("--losses", default=",".join(train_ltr.ALL_LOSSES))
    f.add_argument("--data", default=str(train_ltr.DEFAULT_DATA))
    f.add_argument("--json")
    f.add_argument("--plot")
    f.add_argument("--no-progress", action="store_true")
    t = sub.add_parser("tune", help="grid search on held-out training queries")
    t.add_argument("--losses", default=",".join(train_ltr.SOFT_LOSSES))
    t.add_argument("--grid", nargs="*", default=[], help="key=v1,v2 ... (Config fields)")
    t.add_argument("--folds", type=int, default=3)
    t.add_argument("--seeds", type=int, default=2)
    t.add_argument("--valid-fraction", type=float, default=0.25)
    t.add_argument("--steps", type=int)
    t.add_argument("--eval-every", type=int, default=100)
    t.add_argument("--data", default=str(train_ltr.DEFAULT_DATA))
    t.add_argument("--json")
    args = p.parse_args(argv)
    run = _machine.start(peers=("optax", "lightgbm"), extra={"command": args.command})
    print(run.header(), flush=True)
    result = full(args) if args.command == "full" else tune(args)
    print("\n" + run.finish())
    return result


if __name__ == "__main__":
    main()
