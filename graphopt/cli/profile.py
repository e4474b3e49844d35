"""``graphopt profile SOURCE -o GRAPH.json``: measure a model's ops on this machine.

Runs the graph of a zoo model for real on the CPU (:func:`graphopt.measure.profile.profile_graph`),
stores each op's median time under a device kind named after this CPU and thread count, and writes
the cluster file of this machine (one CPU device measured by
:func:`graphopt.measure.machine.probe_cpu`), so that ``graphopt simulate GRAPH.json --cluster
CLUSTER.yaml`` uses the measured times. Both files are written only after everything succeeded,
each atomically; bad input (an unknown source or device, no CUDA device, an output path that
cannot be written, a model that fails to run) is one line on stderr, exit status 2.
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import Any

from graphopt import strict_json
from graphopt.cli import options

NAME = "profile"
HELP = "run a zoo model on this machine and store each op's measured time in its graph file"

MODES = ("training", "forward")
TIMERS = ("profiler", "clock")  # graphopt.measure.profile.TIMERS, without importing torch
MAX_ITERATIONS = 1_000
MAX_THREADS = 1_024
"""The bounds of :data:`graphopt.measure.profile.MAX_ITERATIONS` and ``MAX_THREADS``, which
this module does not import at start-up (tests/graphopt/cli/test_profile_cli.py checks that they
agree)."""
GRAPH_SUFFIXES = (".json", ".gz")
CLUSTER_SUFFIXES = (".yaml", ".yml", ".json")


def register(sub: Any) -> None:
    p = sub.add_parser(
        NAME,
        help=HELP,
        description="Run SOURCE (torch:NAME?ARG=INT&..., as for graphs import; graphopt graphs list "
        "shows the zoo) on this machine with random weights: warm-up runs, then timed runs of its "
        "imported ATen graph under torch.profiler, one annotation per op. Writes the graph with "
        "each op's median time, stored for a device kind named after this CPU and the thread "
        "count, and the cluster file of this machine (one CPU device: peak FLOP/s, memory "
        "bandwidth and per-op overhead from short microbenchmarks). Simulate with: graphopt "
        "simulate GRAPH.json --cluster CLUSTER.yaml.",
    )
    p.add_argument("source", metavar="SOURCE")
    p.add_argument("-o", "--output", required=True, help="graph file to write (.json or .json.gz)")
    p.add_argument(
        "--cluster-out",
        metavar="CLUSTER.yaml",
        help="cluster file of this machine to write (.yaml, .yml or .json; default: the graph "
        "file's name with .cluster.yaml)",
    )
    options.add_device(
        p, default="cpu", help="where to run the model: cpu, or cuda / cuda:N (--timer clock)"
    )
    p.add_argument(
        "--threads",
        type=options.integer(1, MAX_THREADS),
        default=1,
        help=f"torch threads (part of the device kind), 1..{MAX_THREADS} (default 1)",
    )
    p.add_argument(
        "--iterations",
        type=options.integer(1, MAX_ITERATIONS),
        default=10,
        help=f"timed runs, 1..{MAX_ITERATIONS}; each op's time is their median (default 10)",
    )
    p.add_argument(
        "--warmup",
        type=options.integer(0, MAX_ITERATIONS),
        default=3,
        help=f"untimed runs first, 0..{MAX_ITERATIONS} (default 3)",
    )
    p.add_argument(
        "--mode",
        choices=MODES,
        help="training (forward + backward) or forward graph (default: the source's mode= "
        "query, else training)",
    )
    p.add_argument(
        "--timer",
        choices=TIMERS,
        default="profiler",
        help="profiler: ATen events under each op's torch.profiler annotation; clock: "
        "perf_counter around each op's call",
    )
    options.add_seed(p, help="seed of the random weights and inputs")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    options.name_flags(p, threads="--threads", iterations="--iterations", warmup="--warmup")
    p.set_defaults(func=cmd_profile)


# ---------------------------------------------------------------------------- checks
def split_source(source: str, mode: str | None) -> tuple[str, bool]:
    """The zoo spec (``mode=`` removed) and whether to profile the training graph.

    Raises:
        ValueError: not a ``torch:`` source, a bad ``mode=``, or ``mode=`` and ``--mode``
            disagreeing.
    """
    if not source.startswith("torch:"):
        hint = (
            "a PipeDream profile holds measured times already; "
            if source.startswith("pipedream:")
            else ""
        )
        raise ValueError(
            f"cannot profile {source!r}: {hint}give a PyTorch zoo model torch:NAME?ARG=INT&... "
            "(see graphopt graphs list)"
        )
    base, _, query = source.partition("?")
    kept, given = [], None
    for part in filter(None, query.split("&")):
        key, _, value = part.partition("=")
        if key != "mode":
            kept.append(part)
        elif value in ("train", "training", "forward"):
            given = "forward" if value == "forward" else "training"
        else:
            raise ValueError(f"{source!r}: mode must be train or forward, got {value!r}")
    if given is not None and mode is not None and given != mode:
        raise ValueError(f"{source!r} asks for mode={given} but --mode is {mode}; give one")
    chosen = mode or given or "training"
    return base + ("?" + "&".join(kept) if kept else ""), chosen == "training"


def check_output(path: Path, what: str, suffixes: tuple[str, ...]) -> None:
    """Refuse an output path that cannot be written, before any work: a wrong suffix, a
    directory, or a folder that cannot exist (a regular file in its way)."""
    if path.suffix.lower() not in suffixes:
        raise ValueError(f"{what} {str(path)!r} must end in {', '.join(suffixes)}")
    if path.is_dir():
        raise ValueError(f"cannot write {what} {str(path)!r}: it is a directory")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ValueError(f"cannot write {what} {str(path)!r}: {parent} is not a directory")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise ValueError(f"cannot write {what} {str(path)!r}: {parent} is not writable")
            return


def default_cluster_path(output: Path) -> Path:
    """``run/graph.json`` -> ``run/graph.cluster.yaml`` (``.json.gz`` likewise): where
    ``--cluster each`` finds it (:func:`graphopt.workloads.clusters.sibling_cluster_path`)."""
    from graphopt.workloads.clusters import sibling_cluster_path

    return sibling_cluster_path(output)


# ---------------------------------------------------------------------------- the command
def cmd_profile(args: argparse.Namespace) -> int:
    spec, training = split_source(args.source, args.mode)
    out = Path(args.output)
    cluster_out = Path(args.cluster_out) if args.cluster_out else default_cluster_path(out)
    check_output(out, "graph file", GRAPH_SUFFIXES)
    check_output(cluster_out, "cluster file", CLUSTER_SUFFIXES)
    if out.resolve() == cluster_out.resolve():
        raise ValueError(f"the graph and the cluster file are both {str(out)!r}; give two paths")

    from rich.markup import escape
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from graphopt.measure.machine import machine_cluster, probe_cpu, probe_cuda
    from graphopt.measure.profile import check_device, profile_graph

    check_device(args.device)
    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), transient=True
    ) as progress:
        task = progress.add_task(f"profiling {escape(spec)} on {args.device}", total=None)
        graph, report = profile_graph(
            spec,
            training=training,
            iterations=args.iterations,
            warmup=args.warmup,
            threads=args.threads,
            timer=args.timer,
            device=args.device,
            seed=args.seed,
        )
        progress.update(task, description="measuring the device (peak FLOP/s, bandwidth, overhead)")
        if args.device.startswith("cuda"):  # pragma: no cover - needs a GPU
            index = args.device.partition(":")[2]
            device = probe_cuda(int(index or 0))
        else:
            device = probe_cpu(args.threads)
    if device.kind != report.kind:  # pragma: no cover - both come from cpu_kind / cuda_kind
        raise ValueError(f"device kind {device.kind!r} differs from the profile's {report.kind!r}")
    cluster = machine_cluster(device)
    write_outputs(graph, out, cluster, cluster_out)

    if args.json:
        print(
            strict_json.dumps(
                {
                    "graph_file": str(out),
                    "cluster_file": str(cluster_out),
                    "report": report.summary(),
                    "device": cluster.to_dict()["devices"][0],
                },
                indent=2,
            )
        )
        return 0
    print_summary(report, out, cluster_out, device)
    return 0


def write_outputs(graph: Any, out: Path, cluster: Any, cluster_out: Path) -> None:
    """The graph file and the cluster file as one set: both or nothing new, wherever they lie
    (:func:`graphopt.file_set.write_together`); neither is ever half-written."""
    from graphopt.file_set import write_together

    write_together(
        {
            out: graph.file_content(gzipped=out.suffix == ".gz"),
            cluster_out: cluster.file_content(cluster_out.suffix),
        }
    )


def _ms(seconds: float) -> str:
    return "n/a" if math.isnan(seconds) else f"{seconds * 1e3:,.3f} ms"


def print_summary(report: Any, out: Path, cluster_out: Path, device: Any) -> None:
    ops = len(report.op_names)
    threads = f"{report.threads} thread" + ("s" if report.threads > 1 else "")
    print(
        f"{out}: {report.name}, {ops:,} ops, {report.matched:,} matched "
        f"({report.match_rate:.1%}), measured as {report.kind} ({threads}, median of "
        f"{report.iterations} runs, {report.timer} timer)"
    )
    print(
        f"  step: eager model {_ms(report.eager_seconds)}, ATen graph {_ms(report.graph_seconds)}, "
        f"sum of ops {_ms(report.op_seconds)} (+{_ms(report.folded_seconds)} in "
        f"{report.folded_nodes:,} folded view/getitem nodes)"
    )
    if report.unmatched_ops:
        shown = ", ".join(report.unmatched_ops[:10])
        more = (
            f" and {len(report.unmatched_ops) - 10} more" if len(report.unmatched_ops) > 10 else ""
        )
        print(f"  unmatched (no event; simulated by roofline): {shown}{more}")
    print(
        f"{cluster_out}: {device.name} ({device.kind}): {device.peak_flops / 1e9:,.1f} GFLOP/s, "
        f"{device.mem_bandwidth / 1e9:,.1f} GB/s, {device.launch_overhead * 1e6:,.2f} us per op, "
        f"{device.memory / 1e9:,.1f} GB"
    )
