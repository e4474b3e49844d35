"""Placement baselines: every op on one device; ops dealt to devices in turn; a contiguous split
of the topological order balanced by compute (the "human expert" pipeline split); and, in their
own modules, METIS (:mod:`~graphopt.baselines.metis`), HEFT and its link-contention-aware
variant (:mod:`~graphopt.baselines.heft`), Baechi's m-TOPO and m-ETF
(:mod:`~graphopt.baselines.baechi`), Tarnawski et al.'s latency greedy and max-load dynamic
program (:mod:`~graphopt.baselines.tarnawski`) and PipeDream's planner
(:mod:`~graphopt.baselines.pipedream_planner`).

Each placer takes ``(graph, cluster)`` and returns an ``int64`` array of device indices, one per op
in topological order. All of them are deterministic. :data:`PLACERS` maps the names the CLI
accepts to them; every one there but ``single`` (the fixed reference: device 0) and Tarnawski
et al.'s two algorithms is wrapped by :func:`~graphopt.baselines.monotone.monotone`, so that
adding a device of a new class to a cluster never makes its result worse (``single`` keeps its
result when devices are added after device 0). Tarnawski et al.'s greedy and dynamic program
return the paper's own member, as the paper does: no sub-cluster, no simulation.

Under ``contiguous: true`` (:mod:`graphopt.constraints`) the layer split cuts the blocks of the
block DAG (:mod:`graphopt.blocks`) instead of the colour classes, so that each stage is an ideal;
the placers that scatter ops by design refuse such a cluster
(:func:`~graphopt.baselines.constrained.stage_blind`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from graphopt.baselines.baechi import m_etf, m_topo
from graphopt.baselines.constrained import constrained, stage_blind
from graphopt.baselines.heft import heft, heft_contention
from graphopt.baselines.metis import metis
from graphopt.baselines.monotone import monotone
from graphopt.baselines.pipedream_planner import pipedream_planner
from graphopt.baselines.tarnawski import latency_greedy, max_load_dp
from graphopt.blocks import block_dag, op_groups
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim import PreparedGraph
from graphopt.typing import IntArray


def single_device(graph: CompGraph, cluster: Cluster, device: int = 0) -> IntArray:
    """Every op on ``device`` (default 0): the reference every speed-up is measured against."""
    if not 0 <= device < cluster.num_devices:
        raise ValueError(
            f"device {device} is outside [0, {cluster.num_devices}) for {cluster.name!r}"
        )
    return np.full(graph.num_ops, device, dtype=np.int64)


def round_robin(graph: CompGraph, cluster: Cluster) -> IntArray:
    """Op ``i`` on device ``i mod D``: perfectly balanced op counts, no regard for communication."""
    return np.arange(graph.num_ops, dtype=np.int64) % cluster.num_devices


def contiguous_split(graph: CompGraph, cluster: Cluster) -> IntArray:
    """Cut the graph's layers, in topological order, into ``D`` contiguous stages of about equal
    compute time: the "human expert" pipeline split of the placement papers.

    Ops are grouped by colocation group, else by layer, else alone (so a layer's forward op, its
    gradient ops and its weight update stay together); groups are ordered by their first op.
    Under ``contiguous: true`` the groups are the blocks of the block DAG, in its topological
    order, so that every stage is contiguous (:mod:`graphopt.blocks`). A
    group's weight is the summed mean time of its ops over the cluster's devices (measured, else
    roofline, as the simulator computes it). Group ``g`` goes to stage ``floor(D * m_g / W)`` where
    ``m_g`` is the weight of the groups before it plus half its own and ``W`` the total, so each
    stage gets about ``W / D``.
    """
    n, num_dev = graph.num_ops, cluster.num_devices
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if cluster.contiguous:
        dag = block_dag(graph)
        group, count = dag.block, dag.num_blocks
    else:
        group, count = op_groups(graph)
    op_weight = PreparedGraph(graph, cluster).op_time.mean(axis=1)
    weight: np.ndarray = np.bincount(group, weights=op_weight, minlength=count)
    total = float(weight.sum())
    if total <= 0.0:
        weight = np.ones(count)
        total = float(count)
    middle = np.cumsum(weight) - weight / 2
    stage = np.minimum((middle / total * num_dev).astype(np.int64), num_dev - 1)
    return stage[group]


PLACERS: dict[str, Callable[[CompGraph, Cluster], IntArray]] = {
    "single": constrained(single_device),
    "round-robin": stage_blind("round-robin", monotone(constrained(round_robin))),
    "split": monotone(constrained(contiguous_split)),
    "metis": stage_blind("metis", monotone(constrained(metis))),
    "heft": stage_blind("heft", monotone(constrained(heft))),
    "heft-lc": stage_blind("heft-lc", monotone(constrained(heft_contention))),
    "m-topo": monotone(constrained(m_topo)),
    "m-etf": stage_blind("m-etf", monotone(constrained(m_etf))),
    "tarnawski-greedy": constrained(latency_greedy),
    "tarnawski-dp": constrained(max_load_dp),
    "pipedream": monotone(constrained(pipedream_planner)),
}
"""Placement baselines by name (the names the CLI accepts); the order is the best-heuristic
chain's order of equals. Each keeps the placement constraints of the graph and cluster
(:func:`~graphopt.baselines.constrained.constrained`: a projection, the identity without
constraints; ``single`` then moves a restricted op off device 0), or, under ``contiguous:
true``, refuses the cluster (:func:`~graphopt.baselines.constrained.stage_blind`)."""
