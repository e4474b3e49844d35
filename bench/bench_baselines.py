"""Speed and quality of the placement and scheduling baselines on one large graph.

Usage: python bench/bench_baselines.py [--graph NAME] [--cluster PRESET] [--repeats N]

For every placer of ``graphopt.baselines.placement.PLACERS`` and scheduler of
``graphopt.baselines.scheduling.SCHEDULERS``: the wall time of one call (median of ``--repeats``,
after a warm-up on a small graph so that numba's compilation is not counted; the first-call time,
compilation included when the cache is cold, is printed too) and the simulated step time of its
decision (placers with topological priorities; schedulers on the HEFT placement), with validity
and peak memory. Targets (issue "Baselines"): HEFT and m-ETF under 10 s and METIS under 2 s on
``gnmt-8`` (86,562 ops) with ``v100-nvlink-8``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from graphopt.baselines.placement import PLACERS
from graphopt.baselines.scheduling import SCHEDULERS
from graphopt.hardware import get_cluster
from graphopt.sim import PreparedGraph, lower_bounds
from graphopt.typing import Decision
from graphopt.workloads import get_graph

TARGETS = {"heft": 10.0, "m-etf": 10.0, "metis": 2.0}


def timed(fn, repeats: int) -> tuple[float, float, object]:
    """(first call seconds, median seconds over `repeats` further calls, result)."""
    start = time.perf_counter()
    out = fn()
    first = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return first, statistics.median(times) if times else first, out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--graph", default="gnmt-8")
    parser.add_argument("--cluster", default="v100-nvlink-8")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    start = time.perf_counter()
    graph = get_graph(args.graph)
    cluster = get_cluster(args.cluster)
    print(
        f"graph {graph.name}: {graph.num_ops:,} ops, {graph.num_edges:,} edges "
        f"(built in {time.perf_counter() - start:.2f} s); cluster {cluster.name}: "
        f"{cluster.num_devices} devices"
    )
    warm = get_graph("gnmt-tiny")
    start = time.perf_counter()
    for placer in PLACERS.values():
        placement = placer(warm, cluster)
        for scheduler in SCHEDULERS.values():
            scheduler(warm, cluster, placement)
    print(
        f"warm-up on {warm.name} (numba compile or cache load): {time.perf_counter() - start:.2f} s"
    )

    prepared = PreparedGraph(graph, cluster)
    bounds = lower_bounds(graph, cluster)
    print(
        f"lower bounds: critical path {bounds.critical_path * 1e3:.1f} ms, "
        f"work / D {bounds.work * 1e3:.1f} ms\n"
    )
    print(
        f"{'placer':<12} {'first s':>8} {'median s':>9} {'target':>7}  {'step ms':>9}  valid  peak GB"
    )
    placements = {}
    for name, placer in PLACERS.items():
        try:
            first, median, placement = timed(lambda p=placer: p(graph, cluster), args.repeats)
        except ValueError as e:
            print(f"{name:<12} failed: {e}")
            continue
        placements[name] = placement
        m = prepared.evaluate(Decision(placement=np.asarray(placement)))
        target = TARGETS.get(name)
        mark = "" if target is None else f"{'<' if median < target else '>='}{target:g}s"
        print(
            f"{name:<12} {first:8.2f} {median:9.2f} {mark:>7}  {m.step_time * 1e3:9.1f}  "
            f"{'yes' if m.valid else 'NO ':<5}  {m.peak_memory.max() / 1e9:7.2f}"
        )

    base = placements.get("heft")
    if base is None:
        return
    print(f"\n{'scheduler (on heft placement)':<30} {'median s':>9}  {'step ms':>9}  valid")
    for name, scheduler in SCHEDULERS.items():
        _, median, priority = timed(lambda s=scheduler: s(graph, cluster, base), args.repeats)
        m = prepared.evaluate(Decision(placement=base, priority=np.asarray(priority)))
        print(f"{name:<30} {median:9.2f}  {m.step_time * 1e3:9.1f}  {'yes' if m.valid else 'NO'}")


if __name__ == "__main__":
    main()
