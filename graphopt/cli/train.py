"""``graphopt train``: launch (or resume) a PPO run of the GO policy."""

from __future__ import annotations

import argparse
from typing import Any

from graphopt.train.config import POLICIES, TASKS


def register(sub: Any) -> None:
    p = sub.add_parser(
        "train",
        help="train a policy with PPO (writes runs/<task>/<name>_<k>/)",
        description="Train a GO policy with PPO. Defaults come from graphopt/configs/ppo_default.yaml; "
        "--config FILE.yaml overrides them and flags override both. Ctrl-C leaves a resumable run.",
    )
    p.add_argument("--task", choices=TASKS)
    p.add_argument(
        "--graphs",
        help="training graphs (name, suite:NAME, file, pipedream:/torch: source; comma list)",
    )
    p.add_argument("--val-graphs", help="validation graphs (best model by these)")
    p.add_argument("--cluster", help="cluster preset or file")
    p.add_argument("--total-timesteps", type=int)
    p.add_argument(
        "--config", metavar="FILE.yaml", help="configuration file (all hyper-parameters)"
    )
    p.add_argument("--seed", type=int)
    p.add_argument("--name", help="run name (directory runs/<task>/<name>_<k>)")
    p.add_argument("--policy", choices=POLICIES)
    p.add_argument(
        "--cost-model", metavar="RUN",
        help="training reward from a learned cost model (runs/costmodel/<name>_<k> or model.pt) "
        "instead of the simulator; validation stays on the simulator. Train it with "
        "'graphopt costmodel train --loss mse': ranking losses order runtimes but exaggerate "
        "their ratios, which the speedup reward uses",
    )  # fmt: skip
    p.add_argument("--runs-dir", default="runs", help="where runs are written (default runs/)")
    p.add_argument("--resume", metavar="RUN", help="continue an interrupted run directory")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (e.g. in CI logs)")
    p.set_defaults(func=cmd_train)


def cmd_train(args: argparse.Namespace) -> int:
    from graphopt.train.config import load_config
    from graphopt.train.trainer import TrainingInterrupted, resume, train

    try:
        if args.resume:
            run = resume(args.resume, show_progress=not args.no_progress)
        else:
            config = load_config(
                args.config, task=args.task, graphs=args.graphs, val_graphs=args.val_graphs,
                cluster=args.cluster, total_timesteps=args.total_timesteps, seed=args.seed,
                name=args.name, policy=args.policy, cost_model=args.cost_model,
            )  # fmt: skip
            run = train(config, runs_root=args.runs_dir, show_progress=not args.no_progress)
    except TrainingInterrupted as e:
        print(f"graphopt: {e}")
        return 130
    print(f"run: {run}")
    return 0
