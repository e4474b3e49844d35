"""Decoder speed (graphopt.decoders): one decode of every task's decoder, timed beside the
heuristic it generalises in the same process.

Usage: python bench/bench_decoders.py [--graphs gnmt-8,amoebanet-small] [--cluster PRESET] [--repeats N]

Targets (issue: the GO network steering a decoder): a placement decode of gnmt-8 (86k ops) in at
most 2 s and of a 2k-op graph in at most 50 ms. Prints, per graph: the median time of the
placement decoder with random outputs (every op released, random shifts and affinities: the
slowest path), with an anchor and 1% of the ops released, of the heft-lc placer it reduces to
with zero outputs, and of the scheduling and fusion decoders; the numba functions are compiled
once before timing.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from graphopt.baselines.heft import heft_contention
from graphopt.decoders.fusion import decode_fusion
from graphopt.decoders.placement import PlacementInputs, decode_placement
from graphopt.decoders.scheduling import decode_priorities
from graphopt.hardware import get_cluster
from graphopt.typing import Decision
from graphopt.workloads import resolve_graphs


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", default="gnmt-8,random-sp-2000-s0,amoebanet-small")
    parser.add_argument("--cluster", default="v100-nvlink-4")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    cluster = get_cluster(args.cluster)
    rng = np.random.default_rng(0)
    warm = resolve_graphs("txl-tiny")[0]
    decode_placement(warm, cluster, contention=True)  # compile
    print(f"cluster {cluster.name}, median of {args.repeats} runs")
    print(
        "| graph (ops) | placement, all released | 1% released of an anchor | heft-lc | scheduling | fusion |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for graph in resolve_graphs(args.graphs):
        row = time_graph(graph, cluster, rng, args.repeats)
        cells = " | ".join(f"{t * 1e3:,.1f} ms" for t in row)
        print(f"| {graph.name} ({graph.num_ops:,}) | {cells} |", flush=True)


def time_graph(graph, cluster, rng: np.random.Generator, repeats: int) -> list[float]:
    """Median seconds of the five decodes of the table's row for ``graph``."""
    n, d = graph.num_ops, cluster.num_devices
    free = PlacementInputs(shift=rng.normal(size=n), affinity=rng.normal(size=(n, d)))
    anchor = heft_contention(graph, cluster)
    gate = np.where(rng.random(n) < 0.01, 1.0, -1.0)
    anchored = PlacementInputs(affinity=rng.normal(size=(n, d)), gate=gate, anchor=anchor)
    decision = Decision(placement=anchor)
    base = np.arange(n)
    shift, score = rng.normal(size=n), rng.normal(size=n)
    return [
        median_time(lambda: decode_placement(graph, cluster, free, contention=True), repeats),
        median_time(lambda: decode_placement(graph, cluster, anchored, contention=True), repeats),
        median_time(lambda: heft_contention(graph, cluster), repeats),
        median_time(lambda: decode_priorities(base, shift), repeats),
        median_time(lambda: decode_fusion(graph, cluster, decision, score), repeats),
    ]


if __name__ == "__main__":
    main()
