"""``make demo``: train a GO placement policy with PPO, then evaluate it on graphs it never saw.

1. Trains on the built-in ``default`` suite (small GO-family graphs and random DAGs) with the
   configuration ``graphopt/configs/demo.yaml`` (about 2 minutes on 2 CPU cores): the GO network
   steering the placement decoder (:mod:`graphopt.decoders`), validating on held-out graphs as it
   goes; the run is written to ``runs/placement/demo_<k>/``.
2. Evaluates the best model zero-shot on held-out families (WaveNet, AmoebaNet) and real measured
   models (PipeDream profiles of ResNet-50, Inception-v3 and GNMT, shipped in ``graphopt/data/``),
   next to every placement baseline, random search and simulated annealing at the same small
   budget, and the lower bound: the table is printed, and ``results.json``, ``results.csv``,
   ``comparison.png`` and ``training_curve.png`` go to ``RUN/eval/greedy/``; then, for a run with
   a decoder, the search through the decoder from the network's outputs at ``--search``
   simulator calls beside the baselines at the same calls (``RUN/eval/search-K/``), or for a
   one-shot run without one the greedy placement refined by ``--plan`` analytic estimates
   (``RUN/eval/plan-K/``, beside ``estimate-search@K``, the same search from the best heuristic).
3. Draws a Gantt chart of the policy's schedule on the first evaluation graph.
4. Trains the placement-edit policy (``graphopt/configs/edit.yaml``, about a minute: placement
   improved one move at a time from the best heuristic, each candidate move seen in the analytic
   estimate; ``runs/placement-edit/demo-edit_<k>/``) and evaluates it greedily on the same graphs.
5. For scheduling, fusion and joint: trains the edit policy of ``graphopt/configs/TASK-edit.yaml``
   for ``--edit-timesteps`` steps (under a minute each: one simulated move per step, the policy
   choosing which to try; validated on :data:`EDIT_VAL_GRAPHS`) and evaluates it on the same
   graphs at ``--edit-calls`` simulator calls, beside the task's heuristics, random search and
   annealing at the same calls: one table per task.
6. Trains the step-wise placement policy (``graphopt/configs/stepwise-demo.yaml``, under a minute:
   one op per step inside the list scheduler, reading the partial schedule; imitation of the
   best heuristic, then PPO) and evaluates it on the same graphs: greedy, the best of
   ``--budget`` decodes, and annealing at the same calls (``runs/placement-step/``).

Run it as ``python -m graphopt.demo [--config FILE] [--eval-graphs SPEC] [--total-timesteps N]``.
``--budget`` and ``--runs-dir`` are the ``graphopt`` command's (:mod:`graphopt.cli.options`): the
same definition, the same check, and a bad value is one line with exit status 2, as there.

Output: training shows a progress bar on a terminal, and a line of progress (speed-up, decisions
per second, ETA) every few percent of the run where the output is piped (``| tee``, a CI log).
Stopped with Ctrl-C or SIGTERM, training saves its run and the demo ends with one line saying how
to resume it, and exit status 130 (a Ctrl-C outside training: one line, 130 too).
"""

from __future__ import annotations

import argparse
import sys

import torch
from rich.console import Console
from rich.text import Text

from envs import make_env
from envs.base import resolve_graph_list
from graphopt.cli import Parser, options
from graphopt.configs import CONFIG_DIR
from graphopt.eval.console import make_console
from graphopt.eval.evaluate import evaluate_run, load_run_model, model_sizes
from graphopt.eval.gantt import plot_gantt
from graphopt.rundir import is_interrupt
from graphopt.sim import simulate
from graphopt.train.config import load_config
from graphopt.train.trainer import TrainingInterrupted, train
from policies.rollout import run_policy

BAD_INPUT = 2
"""Exit status of a bad flag (as the ``graphopt`` command's)."""
INTERRUPTED = 130
"""Exit status after Ctrl-C or SIGTERM (128 + SIGINT, as shells report a Ctrl-C)."""
RULE_WIDTH = 100
"""Widest section rule: piped output has a 1000-column console (for uncut tables), and a rule
as wide as that would fill a log with dashes."""

HELDOUT = "suite:heldout-small"
REAL = "pipedream:resnet50,pipedream:inception_v3,pipedream:gnmt"
EVAL_GRAPHS = f"{HELDOUT},{REAL}"
"""The graphs of stage 2 (``--eval-graphs`` replaces them)."""
EDIT_VAL_GRAPHS = "random-sp-800-s21,random-layered-600-s22"
"""Validation graphs of the stage-5 runs, in place of their configs' PyTorch imports: the
fusion heuristics' ``inductor`` fuser has PyTorch Inductor lower every zoo graph it sees (tens of
seconds each), which would take minutes of a short demo run. Random DAGs, none of them evaluated."""


def section(console: Console, title: str) -> None:
    """A section heading: the title in bold, underlined no wider than the title, the terminal or
    :data:`RULE_WIDTH`."""
    console.print()
    console.print(Text(title, style="bold"))
    console.print("─" * max(1, min(len(title), console.width, RULE_WIDTH)), style="dim")


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the exit status (0, or :data:`INTERRUPTED`)."""
    try:
        return _main(argv)
    except TrainingInterrupted as e:  # the run is saved; no traceback for a Ctrl-C
        print(f"demo: {e}", file=sys.stderr, flush=True)
        return INTERRUPTED
    except (Exception, KeyboardInterrupt) as e:
        if not is_interrupt(e):
            raise
        print("demo: interrupted", file=sys.stderr, flush=True)
        return INTERRUPTED


def build_parser() -> argparse.ArgumentParser:
    """The demo's options: the shared ``--budget`` and ``--runs-dir`` and its own."""
    parser = Parser(
        prog="python -m graphopt.demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", default=str(CONFIG_DIR / "demo.yaml"))
    parser.add_argument("--eval-graphs", default=None)
    parser.add_argument("--total-timesteps", type=int, default=None)
    options.add_runs_dir(parser, help="where the runs are written")
    options.add_budget(parser, default=64, help="evaluations for the search baselines")
    parser.add_argument(
        "--plan",
        type=int,
        default=4096,
        help="analytic estimates of the plan:K evaluation (0: skip)",
    )
    parser.add_argument(
        "--search",
        type=int,
        default=256,
        help="simulator calls of a decoder run's search:K evaluation, and of the baselines beside "
        "it (0: skip)",
    )
    parser.add_argument(
        "--edit-config",
        default=str(CONFIG_DIR / "edit.yaml"),
        help="configuration of the placement-edit stage ('' to skip it)",
    )
    parser.add_argument(
        "--edit-tasks",
        default="scheduling,fusion,joint",
        help="tasks of stage 5, comma-separated ('' to skip it)",
    )
    parser.add_argument(
        "--edit-timesteps", type=int, default=4096, help="training steps of each stage-5 policy"
    )
    parser.add_argument(
        "--edit-calls",
        type=int,
        default=256,
        help="simulator calls of each method in the stage-5 tables",
    )
    parser.add_argument(
        "--step-config",
        default=str(CONFIG_DIR / "stepwise-demo.yaml"),
        help="configuration of the step-wise stage ('' to skip it)",
    )
    return parser


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    try:
        options.check(args)
    except ValueError as e:
        print(f"demo: error: {options.message(e, args)}", file=sys.stderr, flush=True)
        return BAD_INPUT

    console = make_console()
    config = load_config(args.config, total_timesteps=args.total_timesteps, name="demo")
    torch.set_num_threads(config.threads)
    section(
        console,
        f"1. PPO training: {config.task} on {config.graphs}, {config.total_timesteps:,} decisions",
    )
    run = train(config, runs_root=args.runs_dir)
    console.print(f"run directory: {run}")

    eval_graphs = args.eval_graphs or EVAL_GRAPHS
    section(console, f"2. zero-shot evaluation on graphs never trained on: {eval_graphs}")
    comparisons = evaluate_run(run, eval_graphs, mode="greedy", budget=args.budget, console=console)
    if config.decoder != "none" and args.search > 0:
        section(
            console,
            f"2b. the same, searched through the decoder from the network's outputs: "
            f"{args.search:,} simulator calls, every search baseline at the same calls",
        )
        evaluate_run(
            run, eval_graphs, mode=f"search:{args.search}", budget=args.search, console=console
        )
    elif config.decoder == "none" and config.task == "placement" and args.plan > 0:
        section(
            console,
            f"2b. the same, greedy placement refined by {args.plan:,} analytic estimates "
            "(no simulation but one final check; estimate-search: the same from the best heuristic)",
        )
        evaluate_run(
            run, eval_graphs, mode=f"plan:{args.plan}", budget=args.budget, console=console
        )

    section(console, "3. the policy's schedule")
    _gantt(run, comparisons[0].graph, eval_graphs, config, load_run_model(run), console)

    if args.edit_config:
        edit = load_config(args.edit_config, name="demo-edit")
        section(
            console,
            f"4. one move at a time: {edit.task} on {edit.graphs}, {edit.total_timesteps:,} "
            "steps, then zero-shot on the same graphs",
        )
        edit_run = train(edit, runs_root=args.runs_dir)
        console.print(f"run directory: {edit_run}")
        evaluate_run(edit_run, eval_graphs, mode="greedy", budget=args.budget, console=console)

    for number, task in enumerate(t for t in args.edit_tasks.split(",") if t):
        edit = load_config(
            CONFIG_DIR / f"{task}-edit.yaml",
            name=f"demo-{task}-edit",
            total_timesteps=args.edit_timesteps,
            val_graphs=EDIT_VAL_GRAPHS,
        )
        section(
            console,
            f"5{chr(ord('a') + number)}. {task}: {edit.task} on {edit.graphs}, "
            f"{edit.total_timesteps:,} steps, then every method at {args.edit_calls} simulator "
            "calls on graphs never trained on",
        )
        edit_run = train(edit, runs_root=args.runs_dir)
        console.print(f"run directory: {edit_run}")
        evaluate_run(
            edit_run,
            eval_graphs,
            mode=f"search:{args.edit_calls}",
            budget=args.edit_calls,
            console=console,
        )

    if args.step_config:
        _stepwise(args.step_config, eval_graphs, args.runs_dir, args.budget, console)
    return 0


def _stepwise(config_path: str, eval_graphs: str, runs_dir: str, budget: int, console) -> None:
    """Stage 6: train the step-wise policy and evaluate it beside annealing at equal calls."""
    from graphopt.eval.stepwise import evaluate as evaluate_stepwise
    from graphopt.eval.stepwise import table
    from graphopt.train.step_run import (
        build_items,
        load_step_config,
        resolve_clusters,
        resolve_run_graphs,
        run_training,
    )
    from graphopt.train.stepwise import load_checkpoint

    config = load_step_config(config_path)
    section(
        console,
        f"6. one op per step inside the list scheduler: {config.graphs}, "
        f"{config.train.imitation_updates} imitation and {config.train.updates} PPO updates, then "
        f"greedy, the best of {budget} decodes and annealing at {budget} calls",
    )
    run = run_training(config, runs_dir, log=console.print)
    policy = load_checkpoint(run / "best.pt")
    items = build_items(resolve_run_graphs(eval_graphs), resolve_clusters(config.clusters))
    rows = evaluate_stepwise(
        policy, items, [("greedy", 1), ("sample", budget), ("annealing", budget)]
    )
    console.print("\n".join(table(rows)))


def _gantt(run, graph_name, eval_graphs, config, model, console) -> None:
    graphs = [g for g in resolve_graph_list(eval_graphs) if g.name == graph_name][:1]
    max_ops, max_edges = model_sizes(model, config.task)
    cluster = config.resolved_cluster
    env = make_env(config.task, graphs, cluster, **config.env_settings(max_ops, max_edges))
    result = run_policy(model, env, 0)
    m = simulate(graphs[0], env.cluster, result.decision, schedule=True)
    assert m.schedule is not None
    path = plot_gantt(
        graphs[0],
        env.cluster,
        m.schedule,
        run / "eval" / f"gantt-{graphs[0].name}.png",
        title=f"policy placement of {graphs[0].name} on {env.cluster.name}",
    )
    console.print(f"wrote {path}")


if __name__ == "__main__":
    raise SystemExit(main())
