"""``graphopt eval``: a trained policy on (held-out) graphs, next to every baseline."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser(
        "eval",
        help="evaluate a trained run on graphs against the baselines",
        description="Per graph: the policy's step time (greedy, best of K samples, after "
        "fine-tuning, or refined by K analytic estimates) next to every baseline, the lower bound or optimum, and the speed-up over the "
        "best heuristic; geometric means. Writes results.json, results.csv and plots to RUN/eval/.",
    )
    p.add_argument("run", metavar="RUN", help="run directory, e.g. runs/placement/go_1")
    p.add_argument(
        "--graphs", required=True, help="graphs to evaluate on (name, suite:NAME, file; comma list)"
    )
    p.add_argument(
        "--mode",
        default="greedy",
        help="greedy, sample:K, finetune:STEPS or plan:K (placement: K analytic estimates, no "
        "simulation; default greedy)",
    )
    p.add_argument(
        "--cluster", help="cluster (default: the run's); must have the run's device count"
    )
    p.add_argument(
        "--budget", type=int, default=0, help="evaluations for random search / annealing (0: skip)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="output directory (default RUN/eval/<mode>)")
    p.set_defaults(func=cmd_eval)


def cmd_eval(args: argparse.Namespace) -> int:
    from graphopt.evaluate import evaluate_run

    out = Path(args.out) if args.out else None
    evaluate_run(
        args.run,
        args.graphs,
        mode=args.mode,
        cluster=args.cluster,
        budget=args.budget,
        seed=args.seed,
        out_dir=out,
    )
    return 0
