"""PipeDream's planner (Narayanan, Harlap, Phanishayee, Seshadri, Devanur, Ganger, Gibbons and
Zaharia, "PipeDream: Generalized Pipeline Parallelism for DNN Training", SOSP 2019, section 3.1),
on graphopt's chain of op groups (:mod:`~graphopt.baselines.contiguous`).

PipeDream's optimizer cuts a chain of layers into contiguous stages and balances the pipeline:
its dynamic program minimises the time of the slowest stage, where a stage costs the larger of
its compute time and the time to send the activations (forward) and gradients (backward) across
the cut into it::

    A(j, m) = min over i < j of max(A(i, m - 1), C(i -> stage m), T(i + 1 .. j on stage m))

Here the layers are the chain's groups (a layer's forward and backward ops together), stage ``m``
runs on the ``m``-th device, fastest first (by the whole graph's time on it, ties by index), so
``T`` is the groups' summed time on that device; ``C`` is the bytes of the group edges crossing
the cut, forward edges over the link from the previous stage's device and backward edges over
the link back (``latency + bytes / bandwidth`` each way that carries any bytes, on the cluster's
route: two hops through the host under ``route: via-host``). An edge that
skips stages crosses every cut between, as activations are passed along PipeDream's pipeline.
Each stage must fit its device's memory (the charge of :mod:`~graphopt.baselines.contiguous`,
with the activation fraction relaxed as for Tarnawski's program). graphopt places each op on one
device, so PipeDream's replicated (data-parallel) stages are left out: every stage has one
worker. The number of stages is the one with the least slowest-stage time (ties to fewer), as
PipeDream picks its configuration for throughput; the best-heuristic chain then scores the
placement for latency.
"""

from __future__ import annotations

import numpy as np

from graphopt.baselines.contiguous import (
    MAX_STAGES,
    Chain,
    build_chain,
    device_order,
    relaxed_split,
)
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim.links import link_arrays, transfer_times
from graphopt.typing import FloatArray, IntArray


def cut_bytes(chain: Chain) -> tuple[FloatArray, FloatArray]:
    """``(forward, backward)``, each ``(G + 1,)``: the bytes of the group edges crossing the cut
    before group ``i``, from a lower group to a higher one and the other way."""
    g = chain.num_groups
    out = []
    for src, dst in ((chain.edge_src, chain.edge_dst), (chain.edge_dst, chain.edge_src)):
        ahead = src < dst
        delta = np.zeros(g + 2)
        np.add.at(delta, src[ahead] + 1, chain.edge_bytes[ahead])
        np.add.at(delta, dst[ahead] + 1, -chain.edge_bytes[ahead])
        out.append(np.maximum(np.cumsum(delta)[: g + 1], 0.0))
    return out[0], out[1]


def boundary_times(chain: Chain, cluster: Cluster, order: IntArray) -> FloatArray:
    """``(K, G + 1)``: the time to cross the cut before group ``i`` into stage ``k`` (from the
    device of stage ``k - 1``); row 0 is 0. Priced on the cluster's route
    (:func:`~graphopt.sim.links.link_arrays`: under ``route: via-host`` a cut between two
    non-host devices pays both hops through the host)."""
    forward, backward = cut_bytes(chain)
    lat, bw = link_arrays(cluster)
    out = np.zeros((len(order), chain.num_groups + 1))
    for k in range(1, len(order)):
        p, q = order[k - 1], order[k]
        out[k] = np.where(forward > 0, transfer_times(lat, bw, p, q, forward), 0.0) + np.where(
            backward > 0, transfer_times(lat, bw, q, p, backward), 0.0
        )
    return out


def pipedream_planner(graph: CompGraph, cluster: Cluster) -> IntArray:
    """PipeDream's planner without replication (module docstring).

    Raises:
        ValueError: the parameters alone fit no split of the chain onto the devices.
    """
    if graph.num_ops == 0:
        return np.zeros(0, dtype=np.int64)
    chain = build_chain(graph, cluster)
    order = device_order(chain)[:MAX_STAGES]
    work = np.ascontiguousarray(chain.work[:, order].T)
    boundary = boundary_times(chain, cluster, order)
    return relaxed_split(
        graph, cluster, chain, order, work, who="PipeDream planner", boundary=boundary
    )
