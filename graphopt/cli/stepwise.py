"""``graphopt stepwise``: train the step-wise placement policy and evaluate it on unseen graphs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from graphopt.cli import options

MAX_COUNT = 1_000_000
"""The bound of ``graphopt.train.stepwise.MAX_COUNT`` (that module imports torch; a test keeps
the two equal)."""

NAME = "stepwise"
HELP = "the step-wise placement policy: train (imitation, then PPO) and eval on unseen graphs"


def register(sub: Any) -> None:
    p = sub.add_parser(
        NAME,
        help=HELP,
        description="The placement policy that decides one op per step inside the list "
        "scheduler, reading the partial schedule (graphopt/decoders/stepwise.py). 'train' writes "
        "runs/placement-step/<name>_<k>/; 'eval' prints a table of speed-ups over the best "
        "heuristic per graph.",
    )
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)

    t = verbs.add_parser(
        "train",
        help="train a step-wise policy",
        description="Imitation of the best heuristic, then PPO with a shared per-graph baseline "
        "(graphopt/train/stepwise.py). --config FILE.yaml sets any key of StepRunConfig and "
        "StepTrainConfig (graphopt/train/step_run.py); flags override it. Ctrl-C keeps "
        "policy.pt (the weights so far) and exits with 130.",
    )
    t.add_argument("--config", metavar="FILE.yaml", help="configuration file")
    t.add_argument("--graphs", help="training graphs (names, suite:NAME, files; comma list)")
    t.add_argument("--val-graphs", help="validation graphs")
    t.add_argument("--clusters", help="cluster presets or files, comma-separated")
    t.add_argument("--name", help="run name (runs/placement-step/<name>_<k>)")
    t.add_argument(
        "--updates",
        type=options.integer(0, MAX_COUNT),
        help=f"updates after imitation: PPO, lookahead or search (config key updates; 0..{MAX_COUNT})",
    )
    t.add_argument(
        "--imitation-updates",
        type=options.integer(0, MAX_COUNT),
        help=f"imitation updates first (0..{MAX_COUNT})",
    )
    options.add_seed(t, default=None, help="seeds torch and the samples (default: the config's)")
    options.add_device(
        t,
        help="where the encoder and the updates compute: auto, cpu, cuda or cuda:N (config key "
        "device; default auto); the decoder runs on the CPU",
    )
    options.add_runs_dir(t, help="where runs are written")
    options.name_flags(
        t,
        config="--config",
        graphs="--graphs",
        val_graphs="--val-graphs",
        clusters="--clusters",
        name="--name",
        updates="--updates",
        imitation_updates="--imitation-updates",
    )
    t.set_defaults(func=cmd_train)

    e = verbs.add_parser(
        "eval",
        help="evaluate a step-wise run on graphs",
        description="Speed-up over the best heuristic of each (graph, cluster) pair: greedy (one "
        "decode), sample:K (the fastest of K sampled decodes) and annealing:K (the baseline at "
        "K simulator calls).",
    )
    e.add_argument("run", metavar="RUN", help="a step-wise run directory or its policy.pt/best.pt")
    e.add_argument("--graphs", required=True, help="graphs (names, suite:NAME, files)")
    e.add_argument("--clusters", default="v100-nvlink-4", help="cluster presets or files")
    e.add_argument(
        "--methods",
        default="greedy,sample:64,annealing:64",
        help="comma list of greedy (one decode), sample:K (best of K sampled decodes), "
        "annealing:K (the baseline at K simulator calls)",
    )
    options.add_seed(e, help="seeds sampling and annealing")
    options.add_save_decisions(e, help="save every mode's decision here (index.json)")
    e.set_defaults(func=cmd_eval)


def cmd_train(args: argparse.Namespace) -> int:
    from graphopt.train.step_run import load_step_config, run_training

    config = load_step_config(
        args.config,
        graphs=args.graphs,
        val_graphs=args.val_graphs,
        clusters=args.clusters,
        name=args.name,
        updates=args.updates,
        imitation_updates=args.imitation_updates,
        seed=args.seed,
        device=args.device,
    )
    try:
        run = run_training(config, args.runs_dir, log=lambda line: print(line, flush=True))
    except KeyboardInterrupt:
        print("graphopt: interrupted", file=sys.stderr)
        return 130
    print(f"run: {run}")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from graphopt.eval.stepwise import evaluate, parse_modes, table
    from graphopt.train.step_run import build_items, resolve_clusters, resolve_run_graphs
    from graphopt.train.stepwise import load_checkpoint

    modes = parse_modes(args.methods)
    path = Path(args.run)
    if path.is_dir() and (path / "best.pt").exists():
        path = path / "best.pt"
    policy = load_checkpoint(path)
    clusters = resolve_clusters(args.clusters)
    items = build_items(resolve_run_graphs(args.graphs), clusters)
    saved = options.open_save_decisions(args)
    rows = evaluate(policy, items, modes, seed=args.seed)
    print("\n".join(table(rows)))
    if saved is not None:
        from graphopt.typing import Decision

        for item, row in zip(items, rows, strict=True):
            for label, placement in row.placement.items():
                method = "step-" + label.replace(":", "@")
                saved.save(item.sg.graph, item.sg.cluster, method, Decision(placement=placement))
        saved.write_index()
        print(f"decisions: {saved.path / 'index.json'}")
    return 0
