"""The simulator against real execution on this CPU: predicted vs measured step times.

For each zoo model (modest sizes), forward and training graphs, the graph is run for real on this
machine (:func:`graphopt.importers.profile.profile_graph`, random weights, one thread by default)
and the machine is measured once (:func:`graphopt.importers.machine.probe_cpu`: peak FLOP/s,
memory bandwidth, per-op overhead). Printed per graph, all on one device of the probed cluster,
topological order, no fusion:

- ``eager``: measured wall time of the eager ``nn.Module`` step (forward under no_grad, or
  forward + backward of the loss), median of the timed runs: the reference;
- ``graph``: measured wall time of the imported ATen graph run as one ``GraphModule`` call;
- ``roofline``: the simulator's step from FLOPs and bytes alone (the graph's measured times
  dropped), and its relative error ``(predicted - eager) / eager``;
- ``measured``: the simulator's step from the measured per-op times (the sum of the ops' median
  times on one device), and its relative error;
- ``match``: share of the graph's ops matched to a profiler event;
- ``folded``: measured time of the view / getitem nodes, which run but are no op of the graph.

Then, over all graphs, per op class: summed measured time, summed roofline time and their ratio
(the roofline's efficiency per class; > 1: the op runs slower than the roofline predicts).

The machine is shared and noisy: every time is a median over ``--iterations`` runs, the peak
figures are best-of-repeats; read the errors as rough.

Run: ``python bench/bench_profile.py [--models SPEC,...] [--modes forward,train] [--threads 1]
[--iterations 10] [--warmup 3] [--timer profiler|clock]``.
"""

from __future__ import annotations

import argparse
import math
import time
from collections import defaultdict

from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.importers.machine import machine_cluster, probe_cpu
from graphopt.importers.profile import profile_graph
from graphopt.sim import simulate

MODELS = (
    "torch:resnet?depth=18&width=32&image=64&batch=4",
    "torch:transformer?layers=2&d_model=256&heads=4&ff=1024&vocab=8000&seq=64&batch=4",
    "torch:lstm?layers=2&hidden=256&vocab=8000&seq=16&batch=16",
    "torch:wavenet?layers=8&stacks=1&residual=32&skip=64&classes=256&seq=1024&batch=2",
)
"""Modest sizes: each graph profiles in seconds on one CPU thread."""


def without_measured(graph: CompGraph) -> CompGraph:
    """The graph with its measured times dropped (the simulator falls back to the roofline)."""
    data = graph.to_json_dict()
    data["measured"] = {}
    return CompGraph.from_json_dict(data)


def rel(predicted: float, reference: float) -> str:
    if not (math.isfinite(predicted) and math.isfinite(reference)) or reference <= 0:
        return "n/a"
    return f"{(predicted - reference) / reference:+.0%}"


def ms(seconds: float) -> str:
    return "n/a" if not math.isfinite(seconds) else f"{seconds * 1e3:.2f}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default=",".join(MODELS), help="comma-separated torch: specs")
    p.add_argument("--modes", default="forward,train", help="forward, train or both")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--timer", default="profiler", choices=("profiler", "clock"))
    args = p.parse_args()

    began = time.perf_counter()
    device = probe_cpu(args.threads)
    cluster: Cluster = machine_cluster(device)
    print(
        f"this machine: {device.kind}: peak {device.peak_flops / 1e9:.1f} GFLOP/s (best float32 "
        f"matmul), {device.mem_bandwidth / 1e9:.1f} GB/s (best copy), "
        f"{device.launch_overhead * 1e6:.2f} us per op (median eager dispatch)"
    )
    print(
        f"shared, noisy machine: times are medians of {args.iterations} runs after "
        f"{args.warmup} warm-up runs ({args.timer} timer, {args.threads} thread(s)); "
        "errors are (predicted - eager) / eager"
    )
    header = (
        f"{'model':<44}{'mode':>8}{'ops':>6}{'match':>7}{'eager ms':>10}{'graph ms':>10}"
        f"{'roofline':>10}{'err':>7}{'measured':>10}{'err':>7}{'folded':>8}{'s':>6}"
    )
    print(header)
    per_class: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for spec in [s.strip() for s in args.models.split(",") if s.strip()]:
        for mode in modes:
            start = time.perf_counter()
            graph, report = profile_graph(
                spec,
                training=mode == "train",
                iterations=args.iterations,
                warmup=args.warmup,
                threads=args.threads,
                timer=args.timer,
            )
            roofline = simulate(without_measured(graph), cluster).step_time
            measured = simulate(graph, cluster).step_time
            times = graph.measured[report.kind]
            op_roofline = device.roofline_time(graph.flops, graph.bytes_accessed)
            for op_class, t, r in zip(graph.op_classes, times, op_roofline, strict=True):
                if math.isfinite(t):
                    row = per_class[op_class]
                    row[0] += 1
                    row[1] += float(t)
                    row[2] += float(r)
            name = spec.removeprefix("torch:")
            print(
                f"{name[:43]:<44}{mode:>8}{graph.num_ops:>6}{report.match_rate:>7.1%}"
                f"{ms(report.eager_seconds):>10}{ms(report.graph_seconds):>10}"
                f"{ms(roofline):>10}{rel(roofline, report.eager_seconds):>7}"
                f"{ms(measured):>10}{rel(measured, report.eager_seconds):>7}"
                f"{ms(report.folded_seconds):>8}{time.perf_counter() - start:>6.1f}",
                flush=True,
            )
    print("\nper op class, all graphs above (matched ops): measured vs roofline time")
    print(f"{'class':<16}{'ops':>7}{'measured ms':>13}{'roofline ms':>13}{'ratio':>8}")
    for op_class, (count, t, r) in sorted(per_class.items(), key=lambda kv: -kv[1][1]):
        print(f"{op_class:<16}{int(count):>7}{t * 1e3:>13.2f}{r * 1e3:>13.2f}{t / r:>8.2f}")
    print(f"\ntotal {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
