"""``graphopt baselines``: every heuristic, search at a budget, the optimum and bounds, per graph."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from graphopt.eval.compare import GraphComparison
    from graphopt.graph import CompGraph
    from graphopt.hardware import Cluster

from graphopt.cli import options

NAME = "baselines"
HELP = "compare heuristics, search and exact optima on graphs"


def register(sub: Any) -> None:
    from graphopt.hardware import DEFAULT_CLUSTER
    from graphopt.tasks import ONE_SHOT_TASKS

    p = sub.add_parser(
        NAME,
        help=HELP,
        description="For each graph: step time of every baseline for the task, speed-up over one "
        "device, gap to the task's lower bound (for placement and scheduling, to the CP-SAT optimum on "
        "small graphs; with fusion the CP-SAT row is the best decision without fusion), validity and "
        "the method's wall time; geometric means at the end.",
    )
    p.add_argument("graphs", metavar="GRAPHS", help="name, suite:NAME, graph file, or a comma list")
    options.add_cluster(
        p,
        default=DEFAULT_CLUSTER,
        each=True,
        help=f"preset or cluster file (default {DEFAULT_CLUSTER}), or {options.EACH}: every graph "
        "on its own cluster, the file beside its graph file (NAME.cluster.yaml for NAME.json) "
        "or the one its metadata names (key cluster), all in one table",
    )
    p.add_argument("--task", default="placement", choices=ONE_SHOT_TASKS)
    options.add_budget(
        p,
        help="simulator evaluations for random search, annealing and, for placement, the search "
        "through the placement decoder from zero outputs (decoder-search@K) (0: skip)",
    )
    options.add_budget(
        p,
        flag="--estimate-budget",
        dest="estimate_budget",
        help="placement: analytic estimates for estimate-search from the best heuristic, no "
        "simulation but one final check (0: skip)",
    )
    options.add_seed(p, help="seed of the searches")
    p.add_argument(
        "--num-priorities",
        type=options.integer(1, 1_000_000),
        default=8,
        help="priority levels of the scheduling searches, 1..1000000",
    )
    p.add_argument(
        "--exact-time-limit",
        type=options.number(0.001, 86_400),
        default=10.0,
        help="seconds for CP-SAT per small graph, 0.001..86400",
    )
    p.add_argument(
        "--json",
        metavar="FILE",
        help="also write FILE (everything, JSON) and FILE with the suffix .csv (one row per graph "
        "and method); nothing else is written",
    )
    options.add_save_decisions(
        p,
        help="save every method's decision to DIR: one decision file per graph and method "
        "(with --curve: per method and budget, e.g. annealing@calls=256), replayable with "
        "graphopt simulate GRAPH --decision FILE, and DIR/index.json; --json rows name their "
        "file (docs/decisions.md)",
    )
    p.add_argument(
        "--curve",
        metavar="DIR",
        help="anytime curves instead of the table: every method's best step time after each "
        "budget of simulator calls and of seconds, written to DIR (curves.csv, curves.json, "
        "curves.png)",
    )
    options.add_curve_budgets(p)
    options.add_workers(
        p,
        help="graphs compared at once, one Ray task per graph (above 1 needs pip install "
        "'graphopt[ray]'); the same table and curves as one at a time",
    )
    p.add_argument(
        "--plot",
        metavar="PNG",
        help="write a grouped bar chart (.png, .pdf, .svg, ...: the suffix says the type)",
    )
    p.set_defaults(func=cmd_baselines)


def csv_path_for(json_path: Path) -> Path:
    """The CSV written beside ``--json FILE``: ``FILE`` with the suffix ``.csv``.

    Raises:
        ValueError: ``FILE`` already ends in ``.csv`` (both would be the same file).
    """
    csv_path = json_path.with_suffix(".csv")
    if csv_path == json_path:
        raise ValueError(
            f"--json {json_path}: the table's CSV goes to FILE with the suffix .csv, which is FILE "
            "itself; name the JSON file e.g. results.json"
        )
    return csv_path


def output_files(
    comparisons: list[GraphComparison], json_path: Path | None, plot: Path | None, title: str
) -> dict[Path, str | bytes]:
    """What ``--json FILE`` (with its CSV, :func:`csv_path_for`) and ``--plot FILE`` write, each
    when given: every path with its text or bytes, for one
    :func:`graphopt.file_set.write_together` (with the decisions of ``--save-decisions``)."""
    from graphopt.eval.report import comparison_files, comparison_plot

    files: dict[Path, str | bytes] = {}
    if json_path is not None:
        csv_path_for(json_path)  # refuses a JSON name whose CSV would overwrite it
        for name, text in comparison_files(comparisons, json_path.name).items():
            files[json_path.with_name(name)] = text
    if plot is not None:
        files[plot] = comparison_plot(comparisons, title, plot.suffix[1:].lower())
    return files


PLOT_SUFFIXES = (
    ".png",
    ".pdf",
    ".svg",
    ".svgz",
    ".eps",
    ".ps",
    ".jpg",
    ".jpeg",
    ".tif",
    ".tiff",
    ".webp",
)
"""File types ``--plot`` writes (matplotlib's, by the suffix)."""


def check_outputs(args: argparse.Namespace) -> None:
    """Refuse ``--json`` and ``--plot`` paths that cannot be written, before the comparison.

    Raises:
        ValueError: one line naming the path and the fix.
    """
    from graphopt.rundir import check_output_path

    if args.json:
        json_path = Path(args.json)
        check_output_path(json_path, "--json")
        check_output_path(csv_path_for(json_path), "--json's CSV")
    if args.plot:
        plot = Path(args.plot)
        if plot.suffix.lower() not in PLOT_SUFFIXES:
            raise ValueError(
                f"--plot {args.plot!r}: the suffix says the image type; use one of "
                f"{', '.join(PLOT_SUFFIXES)}"
            )
        check_output_path(plot, "--plot")
        if args.json and plot.resolve() in (
            Path(args.json).resolve(),
            csv_path_for(Path(args.json)).resolve(),
        ):
            raise ValueError(f"--plot {args.plot!r} would overwrite what --json writes")


def graphs_on_clusters(args: argparse.Namespace) -> tuple[list[tuple[CompGraph, Cluster]], str]:
    """The graphs of the command line, each with the cluster it runs on, and how a title names
    the clusters: ``--cluster`` (resolved by its check) for all, or with ``--cluster each`` every
    graph's own (:func:`graphopt.workloads.clusters.graph_clusters`). Each graph's placement
    constraints are checked on its cluster (:func:`check_constraints`)."""
    from graphopt.cli.simulate import check_constraints

    if args.cluster == options.EACH:
        from graphopt.workloads.clusters import graph_clusters

        pairs = graph_clusters(args.graphs)
        names = dict.fromkeys(c.name for _, c in pairs)
        check_constraints(pairs, args.graphs)
        return pairs, "each graph's cluster (" + ", ".join(names) + ")"
    from graphopt.workloads import resolve_graphs

    pairs = [(g, args.cluster) for g in resolve_graphs(args.graphs)]
    check_constraints(pairs, args.graphs)
    return pairs, args.cluster.name


def compare_job(job: dict[str, Any]) -> Any:
    """``compare_on_graph`` of one graph (a Ray task of ``--workers``): ``job`` holds its
    arguments."""
    from graphopt.eval.compare import compare_on_graph

    job = dict(job)
    return compare_on_graph(job.pop("graph"), job.pop("cluster"), job.pop("task"), **job)


def curve_job(job: dict[str, Any]) -> Any:
    """``graph_curves`` of one graph (a Ray task of ``--curve --workers``): ``job`` holds its
    arguments."""
    from graphopt.eval.curves import graph_curves

    job = dict(job)
    return graph_curves(job.pop("graph"), job.pop("cluster"), job.pop("task"), **job)


def cmd_baselines(args: argparse.Namespace) -> int:
    """The table (or ``--curve``); the shared options (cluster resolved, budgets, workers) are
    checked by :func:`graphopt.cli.options.check` before."""
    check_outputs(args)  # bad paths fail before the (slow) comparison and torch's import
    if args.estimate_budget and args.task != "placement":
        raise ValueError(f"--estimate-budget searches placements; --task is {args.task}")
    if args.curve:
        return curves(args)

    from graphopt.distributed import map_jobs, uses_ray
    from graphopt.eval.compare import compare_on_graph
    from graphopt.eval.report import print_comparisons
    from graphopt.sim import Simulator

    settings = dict(
        budget=args.budget,
        estimate_budget=args.estimate_budget,
        seed=args.seed,
        num_priorities=args.num_priorities,
        exact_time_limit=args.exact_time_limit,
    )
    pairs, where = graphs_on_clusters(args)
    saved = options.open_save_decisions(args)
    if uses_ray(args.workers, args.ray_address):  # one Ray task per graph, results in order
        jobs = [{"graph": g, "cluster": c, "task": args.task, **settings} for g, c in pairs]
        comparisons = map_jobs(compare_job, jobs, workers=args.workers, address=args.ray_address)
    else:
        sim = Simulator()
        comparisons = [compare_on_graph(g, c, args.task, sim=sim, **settings) for g, c in pairs]
    title = f"{args.task} on {where}"
    print_comparisons(comparisons, title)
    # the decisions, --json and --plot: one set, all of them or nothing new, wherever they lie
    from graphopt.decisions.files import write_outputs

    count = 0
    if saved is not None:
        from graphopt.eval.compare import stage_decisions

        count = stage_decisions(comparisons, pairs, saved, task=args.task, seed=args.seed)
    files = output_files(
        comparisons,
        Path(args.json) if args.json else None,
        Path(args.plot) if args.plot else None,
        title,
    )
    index = write_outputs(files, saved)
    if index is not None:
        print(f"wrote {count} decisions and {index}")
    if files:
        *first, final = [str(p) for p in files]
        print(f"wrote {', '.join(first) + ' and ' if first else ''}{final}")
    return 0


def curves(args: argparse.Namespace) -> int:
    """``--curve DIR``: anytime curves of the baselines (:mod:`graphopt.eval.curves`)."""
    from graphopt import rundir

    calls, seconds = args.curve_calls, args.curve_seconds
    out = rundir.check_output_path(args.curve, "--curve", directory=True)

    from graphopt.decisions.files import write_outputs
    from graphopt.distributed import map_jobs, uses_ray
    from graphopt.eval.curves import (
        curve_files,
        graph_curves,
        print_curves,
        stage_curve_decisions,
    )
    from graphopt.sim import Simulator

    saved = options.open_save_decisions(args)
    pairs, where = graphs_on_clusters(args)
    per_pair: list[list[Any]] = []
    if uses_ray(args.workers, args.ray_address):  # one Ray task per graph, points in order
        settings = dict(
            calls=calls, seconds=seconds, seed=args.seed, num_priorities=args.num_priorities
        )
        jobs = [{"graph": g, "cluster": c, "task": args.task, **settings} for g, c in pairs]
        per_pair = map_jobs(curve_job, jobs, workers=args.workers, address=args.ray_address)
    else:
        sim = Simulator()
        for graph, cluster in pairs:
            per_pair.append(
                graph_curves(
                    graph,
                    cluster,
                    args.task,
                    calls=calls,
                    seconds=seconds,
                    seed=args.seed,
                    num_priorities=args.num_priorities,
                    sim=sim,
                )
            )
    points = [p for found in per_pair for p in found]
    title = f"{args.task} on {where}"
    print_curves(points, title)
    # the curves and the decisions: one set, all of them or nothing new
    if saved is not None:
        stage_curve_decisions(pairs, per_pair, saved, task=args.task, seed=args.seed)
    files = {out / name: content for name, content in curve_files(points, title).items()}
    index = write_outputs(files, saved)
    print(f"wrote {', '.join(str(f) for f in files)}")
    if index is not None:
        print(f"saved every point's decision: {index}")
    return 0
