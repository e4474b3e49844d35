"""Simulator speed: the compiled engine, its batch API and the pure-Python reference, one process.

Usage: python bench/bench_sim.py [--graph NAME] [--cluster PRESET] [--repeats N] [--batch B]

Prints ops/s for one decision at a time and for a batch of decisions (per-graph preparation
reused), and the fast path's speed-up over the readable reference (tests/graphopt/sim/reference.py)
measured on the same graph and decision. Decisions: a contiguous split of the topological order over
the devices (communication only at the cuts), random priorities in [0, 4), and fusion of half of the
elementwise ops whose one consumer is an elementwise op on the same device (always legal: the
fusion rules refuse sources, and fusion across devices); plus a worst case with a uniformly random
placement, where most edges cross devices.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "graphopt" / "sim"))

from reference import simulate_reference  # noqa: E402

from graphopt.hardware import get_cluster  # noqa: E402
from graphopt.sim import PreparedGraph  # noqa: E402
from graphopt.typing import Decision  # noqa: E402
from graphopt.workloads import get_graph  # noqa: E402


def decisions(
    graph, num_devices: int, rng: np.random.Generator, random_placement: bool
) -> Decision:
    n = graph.num_ops
    if random_placement:
        placement = rng.integers(0, num_devices, n)
    else:
        placement = np.arange(n, dtype=np.int64) * num_devices // max(n, 1)
    priority = rng.integers(0, 4, n)
    single_consumer = np.bincount(graph.edge_src, minlength=n) == 1
    consumer = np.zeros(n, dtype=np.int64)
    consumer[graph.edge_src] = graph.edge_dst  # the one consumer, where there is one
    elementwise = np.array(graph.op_classes) == "elementwise"
    fusable = (
        single_consumer & elementwise & elementwise[consumer] & (placement[consumer] == placement)
    )
    fusion = (fusable & (rng.random(n) < 0.5)).astype(np.int64)
    return Decision(placement=placement, priority=priority, fusion=fusion)


def timed(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--graph", default="rnnlm-8")
    parser.add_argument("--cluster", default="v100-nvlink-8")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--skip-reference", action="store_true")
    args = parser.parse_args()

    start = time.perf_counter()
    graph = get_graph(args.graph)
    build = time.perf_counter() - start
    cluster = get_cluster(args.cluster)
    n = graph.num_ops
    print(
        f"graph {graph.name}: {n:,} ops, {graph.num_edges:,} edges (built in {build:.2f} s); "
        f"cluster {cluster.name}: {cluster.num_devices} devices"
    )

    start = time.perf_counter()
    prepared = PreparedGraph(graph, cluster)
    prep = time.perf_counter() - start
    rng = np.random.default_rng(0)
    prepared.evaluate(
        decisions(graph, cluster.num_devices, rng, False)
    )  # JIT warm-up (cached on disk)
    print(f"per-graph preparation: {prep * 1e3:.1f} ms (done once, reused by every evaluation)")

    for label, random_placement in (("contiguous split", False), ("random placement", True)):
        decision = decisions(graph, cluster.num_devices, np.random.default_rng(1), random_placement)
        t_one, m = timed(lambda d=decision: prepared.evaluate(d), args.repeats)
        assert m.valid, m.reason  # an invalid decision would time the fusion rules, not the loop
        print(
            f"\n[{label}] step {m.step_time * 1e3:.2f} ms, valid={m.valid}, "
            f"{m.bytes_moved / 1e9:.2f} GB moved"
        )
        print(f"  fast, one decision : {t_one * 1e3:8.2f} ms  = {n / t_one / 1e6:6.2f} M ops/s")
        rows = [
            decisions(graph, cluster.num_devices, np.random.default_rng(s), random_placement)
            for s in range(args.batch)
        ]
        pl = np.stack([d.placement for d in rows])
        pr = np.stack([d.priority for d in rows])
        fu = np.stack([d.fusion for d in rows])
        t_batch, _ = timed(
            lambda pl=pl, pr=pr, fu=fu: prepared.evaluate_batch(pl, pr, fu),
            max(3, args.repeats // 8),
        )
        print(
            f"  fast, batch of {args.batch:3d} : {t_batch / args.batch * 1e3:8.2f} ms/decision "
            f"= {n * args.batch / t_batch / 1e6:6.2f} M ops/s"
        )
        if args.skip_reference:
            continue
        t_ref, ref = timed(lambda d=decision: simulate_reference(graph, cluster, d), 1)
        assert ref.step_time == m.step_time, "reference and fast path disagree"
        print(f"  reference (Python) : {t_ref * 1e3:8.0f} ms  = {n / t_ref / 1e6:6.3f} M ops/s")
        print(
            f"  speed-up of the fast path over the reference: {t_ref / t_one:,.0f}x "
            "(same step time)"
        )


if __name__ == "__main__":
    main()
