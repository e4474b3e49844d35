"""``graphopt baselines``: every heuristic, search at a budget, the optimum and bounds, per graph."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from graphopt.compare import TASKS, compare_on_graph
from graphopt.hardware import DEFAULT_CLUSTER, get_cluster
from graphopt.report import plot_comparisons, print_comparisons, write_comparisons
from graphopt.sim import Simulator
from graphopt.workloads import resolve_graphs


def register(sub: Any) -> None:
    p = sub.add_parser(
        "baselines",
        help="compare heuristics, search and exact optima on graphs",
        description="For each graph: step time of every baseline for the task, speed-up over one "
        "device, gap to the lower bound (or the CP-SAT optimum on small graphs), validity and the "
        "method's wall time; geometric means at the end.",
    )
    p.add_argument("graphs", metavar="GRAPHS", help="name, suite:NAME, graph file, or a comma list")
    p.add_argument(
        "--cluster",
        default=DEFAULT_CLUSTER,
        help=f"preset or cluster file (default {DEFAULT_CLUSTER})",
    )
    p.add_argument("--task", default="placement", choices=TASKS)
    p.add_argument(
        "--budget",
        type=int,
        default=0,
        help="simulator evaluations for random search and annealing (0: skip)",
    )
    p.add_argument(
        "--estimate-budget",
        type=int,
        default=0,
        help="placement: analytic estimates for estimate-search from the best heuristic, no "
        "simulation but one final check (0: skip)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-priorities", type=int, default=8)
    p.add_argument(
        "--exact-time-limit", type=float, default=10.0, help="seconds for CP-SAT per small graph"
    )
    p.add_argument(
        "--json", metavar="FILE", help="also write results.json and results.csv next to FILE"
    )
    p.add_argument("--plot", metavar="PNG", help="write a grouped bar chart")
    p.set_defaults(func=cmd_baselines)


def cmd_baselines(args: argparse.Namespace) -> int:
    for flag, value in (("--budget", args.budget), ("--estimate-budget", args.estimate_budget)):
        if value < 0:
            raise ValueError(f"{flag} must be >= 0, got {value}")
    if args.estimate_budget and args.task != "placement":
        raise ValueError(f"--estimate-budget searches placements; --task is {args.task}")
    cluster = get_cluster(args.cluster)
    sim = Simulator()
    comparisons = [
        compare_on_graph(
            g,
            cluster,
            args.task,
            budget=args.budget,
            estimate_budget=args.estimate_budget,
            seed=args.seed,
            num_priorities=args.num_priorities,
            exact_time_limit=args.exact_time_limit,
            sim=sim,
        )  # fmt: skip
        for g in resolve_graphs(args.graphs)
    ]
    title = f"{args.task} on {cluster.name}"
    print_comparisons(comparisons, title)
    if args.json:
        json_path, csv_path = write_comparisons(comparisons, Path(args.json).parent)
        if Path(args.json).name != "results.json":
            Path(args.json).write_text(json_path.read_text())
        print(f"wrote {args.json} and {csv_path}")
    if args.plot:
        print(f"wrote {plot_comparisons(comparisons, Path(args.plot), title)}")
    return 0
