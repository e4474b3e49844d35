"""The link figures the heuristics price sends with (``graphopt.baselines._costs.link_arrays``):
the cluster's own, and under ``route: via-host`` the two hops through the host."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from graphopt.baselines._costs import link_arrays
from graphopt.graph import CompGraph, Op
from graphopt.hardware import get_cluster
from graphopt.sim import simulate
from graphopt.typing import Decision


def test_direct_route_is_the_cluster_and_via_host_is_two_hops() -> None:
    direct = get_cluster("hetero-cpu-2gpu")  # cpu0, gpu0, gpu1
    latency, bandwidth = link_arrays(direct)
    assert (latency == direct.latency).all() and (bandwidth == direct.bandwidth).all()
    relay = replace(direct, route="via-host")
    latency, bandwidth = link_arrays(relay)
    lat, bw = direct.latency, direct.bandwidth
    for s, t in ((1, 2), (2, 1)):  # between the GPUs: through cpu0
        assert latency[s, t] == lat[s, 0] + lat[0, t]
        assert 1.0 / bandwidth[s, t] == pytest.approx(1.0 / bw[s, 0] + 1.0 / bw[0, t])
    for s, t in ((0, 1), (1, 0), (0, 2), (2, 0)):  # to or from the host: its own link
        assert latency[s, t] == lat[s, t] and bandwidth[s, t] == bw[s, t]
    assert (np.diag(latency) == 0).all() and np.isinf(np.diag(bandwidth)).all()


def test_two_hop_price_is_the_simulated_relayed_send() -> None:
    """A chain a -> b, a on gpu0 and b on gpu1: the simulator relays the tensor through the host,
    and the two-hop figures price that send exactly."""
    ops = [Op("a", "matmul", flops=1e9, output_bytes=4e6), Op("b", "matmul", flops=1e9)]
    graph = CompGraph.build("pair", ops, [("a", "b", 4e6)])
    relay = replace(get_cluster("hetero-cpu-2gpu"), route="via-host")
    latency, bandwidth = link_arrays(relay)
    placement = np.array([1, 2])
    step = simulate(graph, relay, Decision(placement=placement)).step_time
    solo = simulate(graph, relay, Decision(placement=np.array([1, 1]))).step_time
    send = latency[1, 2] + 4e6 / bandwidth[1, 2]
    assert step == pytest.approx(solo + send, rel=1e-12)
