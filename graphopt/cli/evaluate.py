"""``graphopt eval``: a trained policy on (held-out) graphs, next to every baseline."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from graphopt.cli import options

NAME = "eval"
HELP = "evaluate a trained run on graphs against the baselines"


def register(sub: Any) -> None:
    p = sub.add_parser(
        NAME,
        help=HELP,
        description="Per graph: the policy's step time (greedy, best of K samples, after "
        "fine-tuning, or refined by K analytic estimates) next to every baseline, the lower bound or optimum, and the speed-up over the "
        "best heuristic; geometric means. Writes results.json, results.csv and plots to RUN/eval/. "
        "The model is the run's best by validation, else its final one, else the last checkpoint "
        "of an unfinished run.",
    )
    p.add_argument("run", metavar="RUN", help="run directory, e.g. runs/placement/go_1")
    p.add_argument(
        "--graphs", required=True, help="graphs to evaluate on (name, suite:NAME, file; comma list)"
    )
    options.add_cluster(
        p,
        each=True,
        help="cluster (default: the run's); with the run's device count, except for an edit "
        f"run or a GO run trained with policy_kwargs device_agnostic: true (any count); "
        f"{options.EACH}: every graph on its own cluster, the file beside its graph file "
        "(NAME.cluster.yaml for NAME.json) or the one its metadata names (key cluster), all in "
        "one table",
    )
    options.add_budget(p, help="evaluations for random search / annealing (0: skip)")
    options.add_seed(p, help="seed of sampling, fine-tuning and search")
    options.add_workers(
        p,
        help="graphs evaluated at once, one Ray task per graph that loads the run's model itself "
        "(above 1 needs pip install 'graphopt[ray]'); the same table and curves as one at a time",
        address_help="run the tasks on this Ray cluster (the run directory must exist on its "
        "nodes)",
    )
    options.add_device(
        p,
        help="where the policy runs: auto, cpu, cuda or cuda:N (default: the run's)",
        ray_tasks=True,
    )
    p.add_argument("--out", help="output directory (default RUN/eval/<mode>, or RUN/eval/curves)")
    p.add_argument(
        "--curve",
        action="store_true",
        help="anytime curves instead of the table: the best step time of every method (best "
        "heuristic, random search, annealing, estimate search, the policy greedy, sample:K, "
        "finetune:K, plan:K, search:K) after each budget of simulator calls and of seconds; writes "
        "curves.csv, curves.json and curves.png",
    )
    options.add_curve_budgets(p)
    options.add_save_decisions(
        p,
        help="save the decision of every row of the table (the policy's and every baseline's; "
        "with --curve every point's, e.g. sample@calls=64) to DIR: one decision file per graph "
        "and method, replayable with graphopt simulate GRAPH --decision FILE, and "
        "DIR/index.json; results.json rows name their file",
    )
    p.add_argument(
        "--finetune-max",
        type=int,
        default=256,
        help="--curve: the largest call budget fine-tuning runs at (it is the slow mode)",
    )
    options.add_mode(  # checked last: the check reads the policies (torch)
        p,
        help="greedy, sample:K, finetune:STEPS, plan:K (placement: K analytic estimates, no "
        "simulation) or search:K (placement-edit: the learned search, K simulator calls; "
        "default greedy)",
    )
    p.set_defaults(func=cmd_eval)


def describe_model(run: Path) -> str:
    """Which of the run's models ``graphopt eval`` loads, and what it is."""
    from graphopt import rundir

    path = rundir.best_model_path(run)
    state = rundir.read_state(run)
    if path.name == rundir.BEST:
        best = state.get("best_val_speedup")
        shown = f"{best:.3f}x" if isinstance(best, (int, float)) and math.isfinite(best) else "-"
        return f"model: {path} (best by validation, speed-up {shown})"
    if path.name == rundir.FINAL:
        return f"model: {path} (final model, {int(state.get('timesteps', 0)):,} timesteps)"
    return (
        f"model: {path} (last checkpoint of a run that is {state.get('status', 'unfinished')}, "
        f"{int(state.get('timesteps', 0)):,} timesteps)"
    )


def cmd_eval(args: argparse.Namespace) -> int:
    """The table (or ``--curve``); the shared options are checked by
    :func:`graphopt.cli.options.check` before."""
    from graphopt import rundir

    if args.curve and args.finetune_max < 0:
        raise ValueError(f"--finetune-max must be >= 0, got {args.finetune_max}")
    run = rundir.check_run_dir(args.run)
    out = Path(args.out) if args.out else None
    if out is not None:
        rundir.check_output_path(out, "--out", directory=True)

    from graphopt.eval.console import make_console
    from graphopt.eval.evaluate import curve_run, evaluate_run

    console = make_console()
    console.print(describe_model(run), markup=False, highlight=False)
    where = dict(
        cluster=args.cluster,
        seed=args.seed,
        out_dir=out,
        console=console,
        device=args.device,
        workers=args.workers,
        address=args.ray_address,
    )
    if args.curve:
        curve_run(
            args.run,
            args.graphs,
            calls=args.curve_calls,
            seconds=args.curve_seconds,
            finetune_max=args.finetune_max,
            save_decisions=args.save_decisions,
            **where,
        )
    else:
        evaluate_run(
            args.run,
            args.graphs,
            mode=args.mode,
            budget=args.budget,
            save_decisions=args.save_decisions,
            **where,
        )
    return 0
