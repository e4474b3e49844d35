"""Ablation of the step-wise policy (GO's Table 4): the full GO encoder against an MLP encoder and
against no schedule features, several seeds each, zero-shot on the family-test split.

Usage: python bench/bench_stepwise_ablation.py [--graphs SPEC] [--test SPEC] [--updates U]
       [--imitation U] [--seeds 0,1,2] [--samples K]

Each variant trains from scratch on ``--graphs`` (default ``suite:train-gen-small``) with the
demo's hyper-parameters (``graphopt/configs/stepwise-demo.yaml``) for ``--imitation`` imitation
and ``--updates`` PPO updates, then is evaluated on ``--test`` (default ``suite:family-test``):
the geometric mean over the graphs of the greedy decode's speed-up over the best heuristic, and of
the best of ``--samples`` decodes (the greedy one among them). Printed per variant: the mean and
range over seeds. Target (issue #37): the full encoder >= 2 points above each ablation on
family-test, ranges apart.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from graphopt.configs import CONFIG_DIR
from graphopt.eval.stepwise import evaluate
from graphopt.train.step_run import build_items, load_step_config, resolve_run_graphs
from graphopt.train.stepwise import geomean, train

VARIANTS = {
    "GO encoder + schedule features": {},
    "MLP encoder": {"encoder": "mlp"},
    "no schedule features": {"schedule_features": False},
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graphs", default="suite:train-gen-small")
    ap.add_argument("--test", default="suite:family-test")
    ap.add_argument("--updates", type=int, default=30)
    ap.add_argument("--imitation", type=int, default=5)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--samples", type=int, default=16)
    args = ap.parse_args()
    torch.set_num_threads(2)
    base = load_step_config(CONFIG_DIR / "stepwise-demo.yaml")
    from graphopt.train.step_run import resolve_clusters

    clusters = resolve_clusters(base.clusters)
    items = build_items(resolve_run_graphs(args.graphs), clusters)
    test = build_items(resolve_run_graphs(args.test), clusters)
    seeds = [int(s) for s in args.seeds.split(",")]
    print(
        f"ablation: {len(items)} training graphs, {args.imitation} imitation + {args.updates} PPO "
        f"updates, seeds {seeds}; zero-shot on {len(test)} graphs of {args.test}"
    )
    print(
        f"| variant | greedy: mean [min, max] | best of {args.samples}: mean [min, max] | s/run |"
    )
    print("| --- | ---: | ---: | ---: |")
    for label, change in VARIANTS.items():
        greedy, sampled, seconds = [], [], []
        for seed in seeds:
            config = load_step_config(
                CONFIG_DIR / "stepwise-demo.yaml",
                updates=args.updates,
                imitation_updates=args.imitation,
                seed=seed,
                eval_every=10**6,
                policy={**base.train.policy, **change},
            ).train
            for item in items:  # every run starts from the best heuristic's target
                item.target = item.sg.anchor.copy()
                item.target_return = 0.0
            start = time.perf_counter()
            policy, _ = train(items, [], config)
            seconds.append(time.perf_counter() - start)
            rows = evaluate(policy, test, [("greedy", 1), ("sample", args.samples)], seed=seed)
            greedy.append(geomean(np.array([r.speedup["greedy"] for r in rows])))
            sampled.append(geomean(np.array([r.speedup[f"sample:{args.samples}"] for r in rows])))
        print(
            f"| {label} | {np.mean(greedy):.4f} [{min(greedy):.4f}, {max(greedy):.4f}] | "
            f"{np.mean(sampled):.4f} [{min(sampled):.4f}, {max(sampled):.4f}] | "
            f"{np.mean(seconds):.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
