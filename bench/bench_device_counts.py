"""A placement policy on clusters of other device counts than it was trained on, zero-shot.

A placement-edit policy reads one row per candidate move (features of any graph and any
cluster), and a GO placement policy trained with ``policy_kwargs: {device_agnostic: true}`` scores
each op against each device's embedded row, so a run of either, trained on one device count,
runs on any. For each cluster of ``--counts`` V100s (NVLink-like
links, 25 GB/s, 5 us: a uniform stand-in for the DGX-1V presets, which exist only for 2, 4 and 8)
and ``hetero-cpu-2gpu``, per graph: the best heuristic's step time and the speed-up over it of the
policy's greedy episode (no simulator call but the final one) and of ``--sample`` sampled
episodes, then geometric means. Target (issue "learning that pays"): above the best heuristic
on 2, 3, 6 and 8 devices.

Run: ``python bench/bench_device_counts.py RUN [--graphs G] [--counts 2,3,4,6,8] [--sample 8]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from envs.base import resolve_graph_list
from graphopt import rundir
from graphopt.eval.compare import geomean_speedup
from graphopt.eval.evaluate import load_run
from graphopt.hardware import DEVICE_SPECS, Cluster, Device, get_cluster
from graphopt.train.config import load_config
from policies.rollout import run_policy


def v100s(count: int) -> Cluster:
    """``count`` V100 (SXM2) devices joined by identical 25 GB/s, 5 us links."""
    devices = tuple(Device(name=f"gpu{i}", **DEVICE_SPECS["V100-SXM2-16GB"]) for i in range(count))
    bw = np.full((count, count), 25e9)
    lat = np.full((count, count), 5e-6)
    return Cluster(f"v100-uniform-{count}", devices, bw, lat)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("run")
    p.add_argument("--graphs", default="suite:heldout-small")
    p.add_argument("--counts", default="2,3,4,6,8")
    p.add_argument("--sample", type=int, default=8)
    args = p.parse_args()
    path = rundir.check_run_dir(args.run)
    config = load_config(path / rundir.CONFIG_FILE)
    graphs = resolve_graph_list(args.graphs)
    clusters = [v100s(int(c)) for c in args.counts.split(",")] + [get_cluster("hetero-cpu-2gpu")]
    print(f"run {path}: trained on {config.cluster}; speed-up over the best heuristic")
    print(f"{'cluster':<20}{'graph':<22}{'greedy':>9}{f'sample:{args.sample}':>11}{'s':>7}")
    for cluster in clusters:
        _, _, model, env, _ = load_run(path, graphs, cluster, seed=0)
        greedy, sampled = [], []
        for i, graph in enumerate(graphs):
            began = time.perf_counter()
            g = run_policy(model, env, i, "greedy", seed=0).speedup
            s = run_policy(model, env, i, f"sample:{args.sample}", seed=0).speedup
            greedy.append(g)
            sampled.append(s)
            print(
                f"{cluster.name:<20}{graph.name[:21]:<22}{g:>9.4f}{s:>11.4f}"
                f"{time.perf_counter() - began:>7.1f}",
                flush=True,
            )
        print(
            f"{cluster.name:<20}{'geomean':<22}{geomean_speedup(greedy):>9.4f}{geomean_speedup(sampled):>11.4f}"
        )


if __name__ == "__main__":
    main()
