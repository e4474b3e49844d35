"""Fusion: how much the fusers gain under the fusion rules, what search finds beyond them, how fast.

For each graph, on the best placement and schedule of the heuristic chain
(:mod:`graphopt.baselines.staged`), prints:

- ``xla/none``, ``greedy/none``: each fuser's speed-up over no fusion (GO's Table 3 measures
  TensorFlow's default fusion at 0.98-1.27x over none on its models);
- ``rs@64``: random search at 64 simulator evaluations over the best fusion heuristic;
- ``sa@K``: simulated annealing from the best heuristic at ``K`` evaluations (default 4096) over it;
- the wall time of the greedy fuser.

Targets (issue "Fusion a compiler could actually do"): xla/none in [1.00, 1.40] on every GO family
graph; rs@64 never above 1.02; sa@4096 in [1.00, 1.20]. ``--task joint`` gives the same table for
the joint task (placement, schedule and fusion searched together; heuristics: the whole chain).

Run: ``python bench/bench_fusion.py [--graphs SPEC] [--cluster C] [--task fusion|joint]``.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from graphopt.baselines.fusion import FUSERS
from graphopt.baselines.search import random_search, simulated_annealing
from graphopt.baselines.staged import MeasuringScore, run_chain
from graphopt.hardware import get_cluster
from graphopt.sim import Simulator
from graphopt.typing import Decision
from graphopt.workloads import resolve_graphs

GO_FAMILIES = "rnnlm-2,gnmt-2,txl-2,inception-v3,amoebanet,wavenet-2"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--graphs", default=GO_FAMILIES)
    p.add_argument("--cluster", default="v100-nvlink-4")
    p.add_argument("--task", default="fusion", choices=("fusion", "joint"))
    p.add_argument("--anneal", type=int, default=4096, help="annealing evaluations (0: skip)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    cluster = get_cluster(args.cluster)
    sim = Simulator()
    print(f"task {args.task} on {cluster.name}; speed-ups are step-time ratios")
    header = f"{'graph':<16}{'ops':>7}{'xla/none':>10}{'greedy/none':>13}{'best':>8}"
    header += f"{'rs@64':>8}{'sa@' + str(args.anneal):>9}{'greedy s':>10}{'sa s':>8}"
    print(header)
    rows = []
    for graph in resolve_graphs(args.graphs):
        score = MeasuringScore(sim, graph, cluster)
        chain = run_chain(graph, cluster, "scheduling", score)
        assert chain.best is not None and chain.best.decision is not None
        base = chain.best.decision
        times = {}
        for name, fuser in FUSERS.items():
            began = time.perf_counter()
            try:
                bits = fuser(graph, cluster, base)
            except ValueError:  # inductor: only for graphs imported from PyTorch
                continue
            took = time.perf_counter() - began
            m = sim.evaluate(graph, cluster, Decision(base.placement, base.priority, bits))
            times[name] = (m.step_time if m.valid else math.inf, took, bits)
        best_name = min(("none", "xla", "greedy"), key=lambda k: times[k][0])
        best_time, _, best_bits = times[best_name]
        start = Decision(base.placement, base.priority, best_bits)
        rs = random_search(graph, cluster, args.task, 64, args.seed, start=start)
        sa_ratio, sa_wall = math.nan, math.nan
        if args.anneal > 0:
            began = time.perf_counter()
            sa = simulated_annealing(graph, cluster, args.task, args.anneal, args.seed, start=start)
            sa_wall = time.perf_counter() - began
            sa_ratio = best_time / sa.measurement.step_time
        none = times["none"][0]
        row = (
            none / times["xla"][0],
            none / times["greedy"][0],
            best_time / rs.measurement.step_time,
            sa_ratio,
        )
        rows.append(row)
        print(
            f"{graph.name:<16}{graph.num_ops:>7}{row[0]:>10.3f}{row[1]:>13.3f}{best_name:>8}"
            f"{row[2]:>8.3f}{row[3]:>9.3f}{times['greedy'][1]:>10.2f}{sa_wall:>8.1f}"
        )
    geo = np.exp(np.log(np.array(rows)).mean(axis=0))
    print(f"{'geomean':<23}{geo[0]:>10.3f}{geo[1]:>13.3f}{'':>8}{geo[2]:>8.3f}{geo[3]:>9.3f}")
    ok_xla = all(1.0 <= r[0] <= 1.4 for r in rows)
    ok_rs = all(r[2] <= 1.02 for r in rows)
    ok_sa = all(1.0 <= r[3] <= 1.2 for r in rows) if args.anneal > 0 else None
    print(f"targets: xla/none in [1, 1.4] {ok_xla}; rs@64 <= 1.02 {ok_rs}; sa in [1, 1.2] {ok_sa}")


if __name__ == "__main__":
    main()
