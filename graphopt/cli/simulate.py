"""``graphopt simulate``: step time, memory and traffic of graphs under a placement."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from graphopt.graph import CompGraph
    from graphopt.hardware import Cluster
    from graphopt.sim import Simulator
    from graphopt.typing import Decision

from graphopt.cli import options

NAME = "simulate"
HELP = "simulate graphs on a cluster under a placement"
PLACER_NAMES = (
    "single",
    "round-robin",
    "split",
    "metis",
    "heft",
    "heft-lc",
    "m-topo",
    "m-etf",
    "tarnawski-greedy",
    "tarnawski-dp",
    "pipedream",
)
"""The keys of :data:`graphopt.baselines.placement.PLACERS`, for the help text without importing
the baselines (and numba); tests/graphopt/cli/test_startup.py checks that they agree."""


def register(sub: Any) -> None:
    from graphopt.hardware import DEFAULT_CLUSTER, PRESETS

    p = sub.add_parser(
        NAME,
        help=HELP,
        description="Simulate GRAPH (a name, suite:NAME, a graph file, or a comma list) on a "
        "cluster and report step time, per-device busy time and peak memory, bytes moved, "
        "validity and lower bounds.",
    )
    p.add_argument("graphs", metavar="GRAPH")
    options.add_cluster(
        p,
        help=f"preset name or cluster file (default: the cluster a versioned --decision file "
        f"was saved for when it is a preset, else {DEFAULT_CLUSTER}; presets: "
        + ", ".join(PRESETS)
        + ")",
    )
    p.add_argument(
        "--placement",
        default="single",
        help=f"a baseline placer ({', '.join(PLACER_NAMES)}) or a JSON decision file (see "
        "graphopt.decisions.io)",
    )
    p.add_argument(
        "--decision",
        metavar="FILE",
        help="a JSON decision file (placement, priority, fusion): one saved by --save-decisions "
        "(replayed exactly; docs/decisions.md), by an environment's save_episode(), or a "
        "placement keyed by op name; overrides --placement",
    )
    options.add_save_decisions(
        p,
        help="save each graph's decision to DIR as a versioned decision file, with "
        "DIR/index.json; --json rows name their file (docs/decisions.md)",
    )
    p.add_argument("--json", action="store_true", help="print JSON results instead of a table")
    p.add_argument(
        "--gantt",
        metavar="OUT.png",
        help="write a Gantt chart (with several graphs, one file per graph: OUT-<graph>.png)",
    )
    p.set_defaults(func=cmd_simulate)


def decision_for(graph: CompGraph, cluster: Cluster, placement: str) -> Decision:
    """The decision named by ``--placement``: a baseline name or a decision file."""
    from graphopt.baselines.placement import PLACERS
    from graphopt.decisions.io import load_decision
    from graphopt.typing import Decision

    if placement in PLACERS:
        return Decision(placement=PLACERS[placement](graph, cluster))
    if placement.endswith(".json"):
        return load_decision(placement, graph, cluster=cluster)
    raise ValueError(
        f"unknown placement {placement!r}; choose one of: {', '.join(PLACERS)}, or a .json decision file"
    )


def warm_up(cluster: Cluster, schedule: bool) -> None:
    """Simulate a two-op graph once, so that loading the compiled simulator (numba, about a second
    on the first call of a process) is not counted in the first graph's ``simulation_seconds``."""
    import numpy as np

    from graphopt.graph import CompGraph, Op
    from graphopt.sim import Simulator, lower_bounds
    from graphopt.typing import Decision

    graph = CompGraph.build(
        "warm-up", [Op("a", "X", flops=1.0), Op("b", "X", flops=1.0)], [("a", "b", 1.0)]
    )
    Simulator().evaluate(
        graph, cluster, Decision(placement=np.arange(2) % cluster.num_devices), schedule=schedule
    )
    lower_bounds(graph, cluster)


def simulate_one(
    graph: CompGraph, cluster: Cluster, decision: Decision, sim: Simulator, schedule: bool
) -> tuple[dict[str, Any], Any]:
    from graphopt.sim import lower_bounds

    start = time.perf_counter()
    m = sim.evaluate(graph, cluster, decision, schedule=schedule)
    wall = time.perf_counter() - start
    bounds = lower_bounds(graph, cluster)
    result = {
        "graph": graph.name,
        "ops": graph.num_ops,
        "cluster": cluster.name,
        "step_time": m.step_time,
        "valid": m.valid,
        "reason": m.reason,
        "busy_time": m.busy_time.tolist(),
        "peak_memory": m.peak_memory.tolist(),
        "bytes_moved": m.bytes_moved,
        "lower_bound_critical_path": bounds.critical_path,
        "lower_bound_work": bounds.work,
        "simulation_seconds": wall,
    }
    return result, m


def cluster_spec(args: argparse.Namespace) -> str | Cluster:
    """``--cluster`` (resolved by its check), or where it is left out the preset a versioned
    ``--decision`` file was saved for (the default cluster otherwise)."""
    from graphopt.hardware import DEFAULT_CLUSTER, PRESETS

    if args.cluster is not None:
        return args.cluster
    if args.decision:
        from graphopt.decisions.format import is_versioned, read_json

        data = read_json(args.decision)
        if is_versioned(data) and data.get("cluster") in PRESETS:
            return str(data["cluster"])
    return DEFAULT_CLUSTER


def method_name(args: argparse.Namespace) -> str:
    """How a saved decision names its method: the placer, the method a versioned decision file
    names, or the decision file's name."""
    chosen = args.decision or args.placement
    if not args.decision and not chosen.endswith(".json"):
        return str(chosen)
    from graphopt.decisions.format import is_versioned, read_json

    data = read_json(chosen)
    if is_versioned(data) and isinstance(data.get("method"), str) and data["method"]:
        return str(data["method"])
    return Path(chosen).stem


def check_constraints(pairs: Sequence[tuple[CompGraph, Cluster]], source: str) -> None:
    """Refuse placement constraints that no placement of a graph can meet on its cluster
    (:func:`graphopt.constraints.constraints`), before anything runs.

    Raises:
        ValueError: one line, ``source`` (the graphs as the command line named them: a graph
            file's path) first, then the graph and the op or colocation group.
    """
    from graphopt.constraints import constraints

    for graph, cluster in pairs:
        try:
            constraints(graph, cluster)
        except ValueError as e:
            raise ValueError(f"{source}: {e}") from e


def cmd_simulate(args: argparse.Namespace) -> int:
    from graphopt.decisions.io import load_decision
    from graphopt.hardware import get_cluster
    from graphopt.rundir import check_output_path
    from graphopt.sim import Simulator
    from graphopt.workloads import resolve_graphs

    if args.gantt:
        check_output_path(args.gantt, "--gantt")
    saved = options.open_save_decisions(args)  # checked now; created once all is simulated
    cluster = get_cluster(cluster_spec(args))
    graphs = resolve_graphs(args.graphs)
    check_constraints([(graph, cluster) for graph in graphs], args.graphs)
    sim = Simulator()
    warm_up(cluster, schedule=bool(args.gantt))  # a throwaway simulator: `sim` caches per graph
    results, measured = [], []  # every graph is simulated before anything is written
    for graph in graphs:
        decision = (
            load_decision(args.decision, graph, cluster=cluster)
            if args.decision
            else decision_for(graph, cluster, args.placement)
        )
        result, m = simulate_one(graph, cluster, decision, sim, schedule=bool(args.gantt))
        if m.reason.startswith("illegal fusion"):  # bad input, not a result: nothing is written
            raise ValueError(f"{args.decision or args.placement}: graph {graph.name!r}: {m.reason}")
        results.append(result)
        measured.append((graph, m, decision))
    index = None
    if saved is not None:  # every decision checked and simulated: now the files are written
        for result, (graph, m, decision) in zip(results, measured, strict=True):
            result["decision_file"] = saved.save(graph, cluster, method_name(args), decision, m)
        index = saved.write_index()
    for result, (graph, m, _) in zip(results, measured, strict=True):
        if args.gantt and m.schedule is not None:
            from graphopt.eval.gantt import plot_gantt

            out = Path(args.gantt)
            if len(graphs) > 1:
                out = out.with_name(f"{out.stem}-{graph.name}{out.suffix or '.png'}")
            title = f"{graph.name} on {cluster.name}, {args.decision or args.placement} placement"
            try:
                written = plot_gantt(graph, cluster, m.schedule, out, title=title)
            except ValueError as e:
                raise ValueError(f"--gantt: {e}") from e
            result["gantt"] = str(written)
    if args.json:
        from graphopt.strict_json import dumps

        print(dumps(results, indent=2))
        return 0
    print_results(results, title=f"{cluster.name}, decision: {args.decision or args.placement}")
    if index is not None:
        print(f"wrote {len(results)} decisions and {index}")
    return 0


def print_results(results: list[dict[str, Any]], title: str) -> None:
    from rich.markup import escape
    from rich.table import Table

    from graphopt.eval.console import make_console

    table = Table(title=escape(title))
    for col in (
        "graph",
        "ops",
        "step (ms)",
        "lower bound (ms)",
        "max peak mem (GB)",
        "moved (MB)",
        "valid",
        "sim (ms)",
    ):
        numeric = col not in ("graph", "valid")
        table.add_column(col, justify="right" if numeric else "left", no_wrap=numeric)
    for r in results:
        table.add_row(
            escape(r["graph"]),
            f"{r['ops']:,}",
            f"{r['step_time'] * 1e3:,.3f}",
            f"{max(r['lower_bound_critical_path'], r['lower_bound_work']) * 1e3:,.3f}",
            f"{max(r['peak_memory'], default=0) / 1e9:,.2f}",
            f"{r['bytes_moved'] / 1e6:,.1f}",
            "yes" if r["valid"] else escape(f"no: {r['reason']}"),
            f"{r['simulation_seconds'] * 1e3:,.1f}",
        )
    captions = ["sim (ms): simulator wall time, set-up of the graph included"]
    captions += [f"gantt: {escape(r['gantt'])}" for r in results if "gantt" in r]
    table.caption = "; ".join(captions)
    make_console().print(table)
