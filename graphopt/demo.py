"""``make demo``: simulate GO's workloads on a 4-GPU NVLink cluster under the placement baselines.

Prints a table per graph (step time, speed-up over one device, gap to the lower bound, validity,
memory) and writes under ``runs/demo/``: ``results.json`` and a Gantt chart of one schedule.
Run it as ``python -m graphopt.demo [--graphs SPEC] [--cluster PRESET] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from graphopt.baselines.placement import PLACERS
from graphopt.hardware import get_cluster
from graphopt.sim import Simulator, lower_bounds
from graphopt.typing import Decision
from graphopt.viz.gantt import plot_gantt
from graphopt.workloads import resolve_graphs

DEFAULT_GRAPHS = "gnmt-2,txl-2,inception-v3,wavenet-2"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--graphs", default=DEFAULT_GRAPHS)
    parser.add_argument("--cluster", default="v100-nvlink-4")
    parser.add_argument("--out", default="runs/demo")
    args = parser.parse_args(argv)

    console = Console()
    cluster = get_cluster(args.cluster)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sim = Simulator()
    results = []
    table = Table(title=f"step time on {cluster.name} ({cluster.num_devices} devices)")
    for col in (
        "graph",
        "ops",
        "placement",
        "step (ms)",
        "vs single",
        "vs bound",
        "mem (GB)",
        "valid",
        "sim (ms)",
    ):
        table.add_column(col, justify="left" if col in ("graph", "placement", "valid") else "right")
    gantt_done = None
    for graph in resolve_graphs(args.graphs):
        bound = lower_bounds(graph, cluster).best
        single_time = math.nan
        for name, placer in PLACERS.items():
            decision = Decision(placement=placer(graph, cluster))
            start = time.perf_counter()
            m = sim.evaluate(graph, cluster, decision)
            wall = time.perf_counter() - start
            if gantt_done is None and name == "split":
                m = sim.evaluate(graph, cluster, decision, schedule=True)
            if name == "single":
                single_time = m.step_time
            if m.schedule is not None:
                gantt_done = plot_gantt(
                    graph,
                    cluster,
                    m.schedule,
                    out / f"gantt-{graph.name}-{name}.png",
                    title=f"{graph.name}, {name} placement on {cluster.name}",
                )
            results.append({
                "graph": graph.name, "ops": graph.num_ops, "placement": name,
                "step_time": m.step_time, "valid": m.valid, "reason": m.reason,
                "lower_bound": bound, "peak_memory": m.peak_memory.tolist(),
                "bytes_moved": m.bytes_moved,
            })  # fmt: skip
            table.add_row(
                graph.name, f"{graph.num_ops:,}", name, f"{m.step_time * 1e3:,.2f}",
                f"{single_time / m.step_time:.2f}x", f"{m.step_time / bound - 1:+.0%}",
                f"{m.peak_memory.max() / 1e9:.2f}", "yes" if m.valid else ("OOM" if "memory" in m.reason else "illegal"),
                f"{wall * 1e3:.1f}",
            )  # fmt: skip
        table.add_section()
    console.print(table)
    for r in results:
        if not r["valid"]:
            console.print(f"[yellow]{r['graph']}, {r['placement']}:[/yellow] {r['reason']}")
    (out / "results.json").write_text(json.dumps(results, indent=2))
    console.print(f"wrote {out / 'results.json'}" + (f" and {gantt_done}" if gantt_done else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
