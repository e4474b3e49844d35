"""Inductor's fusion beside the fusers: simulated speed-up over no fusion on the PyTorch zoo.

For each zoo model (training graphs by default), every op on device 0 of the cluster (default
``v100-nvlink-4``), topological order, prints the step-time ratio ``none / fuser`` of:

- ``xla``, ``greedy``: :func:`graphopt.baselines.fusion.xla_fusion` and ``greedy_fusion``;
- ``ind``: Inductor's kernels as bits (:func:`graphopt.baselines.inductor.inductor_fusion`),
  ``illegal`` when one breaks a fusion rule (the simulator refuses the decision);
- ``ind-legal``: the same with every kernel that breaks a rule split back into single ops
  (``legal_only=True``);

and for Inductor: ``rules`` (kernels split back, by rule: ``2a`` an opaque op fused, ``2b`` two
heroes, ``2b*`` data movement beside a contraction, ``cyc`` a cycle), ``groups`` (Inductor's
kernels of two or more graphopt ops), ``multi-red`` (kernels running reduction loops of two or
more ops), ``match`` (share of the ops found in a kernel by name), ``unexpr`` (edges inside an
Inductor kernel the bits cannot express / all such edges), ``ind s`` (Inductor's lowering and
scheduling; the capture before it in parentheses) and ``greedy s``.

Target (issue "Fusion a compiler could actually do"): Inductor's groups legal on every zoo model,
and the speed-up of Inductor's fusion over none beside xla's and greedy's.

Run: ``python bench/bench_inductor.py [--models SPEC,...] [--mode train|forward] [--cluster C]``.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

import numpy as np

from graphopt.baselines.fusion import greedy_fusion, no_fusion, xla_fusion
from graphopt.baselines.inductor import drop_illegal, graph_groups, inductor_bits
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster, get_cluster
from graphopt.sim import simulate
from graphopt.sim.fusion_rules import RULE_CLASS, RULE_DEVICE, RULE_HEROES, RULE_IO, RULE_LAYOUT
from graphopt.typing import Decision
from graphopt.workloads import resolve_graphs

MODELS = (
    "torch:resnet?depth=50&batch=32",
    "torch:inception?batch=16",
    "torch:transformer?layers=2&batch=8",
    "torch:lstm?seq=16",
    "torch:wavenet",
)
"""Realistic sizes (image 224/299, d_model 512, hidden 512, 4096 samples) that Inductor
schedules in under half a minute each on two CPU cores."""

RULE_NAMES = {
    RULE_CLASS: "2a",
    RULE_HEROES: "2b",
    RULE_LAYOUT: "2b*",
    RULE_DEVICE: "2c",
    RULE_IO: "2d",
    -1: "cyc",
}


def _step(graph: CompGraph, cluster: Cluster, bits: np.ndarray) -> float:
    """Simulated step time, every op on device 0; ``inf`` for an illegal fusion."""
    zeros = np.zeros(graph.num_ops, dtype=np.int64)
    m = simulate(graph, cluster, Decision(placement=zeros, priority=zeros, fusion=bits))
    return m.step_time if m.valid else float("inf")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default=",".join(MODELS), help="comma-separated torch: specs")
    p.add_argument("--mode", default="train", choices=("train", "forward"))
    p.add_argument("--cluster", default="v100-nvlink-4")
    p.add_argument("--greedy-budget", type=int, default=200)
    args = p.parse_args()
    cluster = get_cluster(args.cluster)
    print(
        f"{args.mode} graphs, all ops on device 0 of {cluster.name}; "
        "speed-ups are step-time ratios none / fuser"
    )
    header = (
        f"{'model':<36}{'ops':>6}{'xla':>7}{'greedy':>8}{'ind':>9}{'ind-legal':>10}"
        f"{'rules':>14}{'groups':>8}{'multi-red':>10}{'match':>7}{'unexpr':>11}"
        f"{'ind s':>14}{'greedy s':>10}"
    )
    print(header)
    for spec in [s.strip() for s in args.models.split(",") if s.strip()]:
        source = (
            spec if args.mode == "train" else spec + ("&" if "?" in spec else "?") + "mode=forward"
        )
        graph = resolve_graphs(source)[0]
        n = graph.num_ops
        zeros = np.zeros(n, dtype=np.int64)
        decision = Decision(placement=zeros, priority=zeros)

        none = _step(graph, cluster, no_fusion(graph, cluster, decision))
        xla = _step(graph, cluster, xla_fusion(graph, cluster, decision))
        began = time.perf_counter()
        greedy_bits = greedy_fusion(graph, cluster, decision, budget=args.greedy_budget)
        greedy_s = time.perf_counter() - began
        greedy = _step(graph, cluster, greedy_bits)
        bits, stats = inductor_bits(graph, decision)
        groups = graph_groups(graph)
        legal, found = drop_illegal(graph, bits, zeros)
        ind, ind_legal = _step(graph, cluster, bits), _step(graph, cluster, legal)
        rules = Counter(RULE_NAMES.get(rule, str(rule)) for rule, _, _ in found)
        rules_text = " ".join(f"{k}:{v}" for k, v in sorted(rules.items())) or "legal"
        ind_text = "illegal" if ind == float("inf") else f"{none / ind:.3f}"
        unexpr = f"{stats['unexpressed_edges']}/{stats['intra_group_edges']}"
        took = f"{groups.seconds:.1f} ({groups.capture_seconds:.1f})"
        print(
            f"{spec:<36}{n:>6}{none / xla:>7.3f}{none / greedy:>8.3f}{ind_text:>9}"
            f"{none / ind_legal:>10.3f}{rules_text:>14}{stats['fused_groups']:>8}"
            f"{stats['multi_reduction_groups']:>10}{stats['match_rate']:>7.3f}{unexpr:>11}"
            f"{took:>14}{greedy_s:>10.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
