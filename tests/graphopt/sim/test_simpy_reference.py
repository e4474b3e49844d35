"""The engine against a SimPy model of the setting of DOPPLER's and GiPH's simulators:
``contention: none`` (a cross-device edge is a fixed delay from its producer's end),
``dispatch: fcfs`` (a device runs its ops in the order they became ready), ``route: direct``,
sends per device or per consuming op. The model is written the way those simulators are, as
SimPy processes and events, and shares nothing with the engine or its twin (``reference.py``)
but the op times, which it takes from :class:`~graphopt.sim.PreparedGraph` (rules 3-4 are the
twin's to check; this model checks rules 5-7 under these options). Every op has a positive time
and every link a positive latency, so no two jobs of one resource start at one instant.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections import defaultdict

import numpy as np
import pytest

from graphopt.graph import CompGraph
from graphopt.hardware import Cluster, Device, get_cluster
from graphopt.sim import PreparedGraph
from graphopt.typing import Decision
from graphopt.workloads import resolve_graphs

simpy = pytest.importorskip("simpy", reason='the SimPy reference needs pip install "graphopt[dev]"')

NUM_GRAPHS = 200


class EndOfInstant(simpy.events.Event):
    """Fires at the current time after every event already due at that time, and after those
    that they trigger in turn: SimPy orders the events of one time by priority (``URGENT``, then
    ``NORMAL``, which every other event here has) before insertion order, and this one is
    scheduled one priority lower, as :class:`simpy.events.Timeout` schedules itself. Rule 7:
    every job ending at an instant completes before a device picks its next job."""

    def __init__(self, env: simpy.Environment) -> None:
        super().__init__(env)
        self._ok = True
        self._value = None
        env.schedule(self, simpy.events.NORMAL + 1)


@dataclasses.dataclass
class SimpyResult:
    step_time: float
    busy_time: list[float]
    bytes_moved: float
    ops: dict[int, tuple[int, float, float]]
    """op -> (device, start, end)"""
    transfers: list[tuple[int, int, int, float, float, float]]
    """(producer, src, dst, bytes, start, end)"""


def simulate_simpy(graph: CompGraph, cluster: Cluster, placement: list[int]) -> SimpyResult:
    """The step of ``graph`` under ``placement`` (no fusion) on ``cluster``, whose options must
    be ``contention: none``, ``route: direct`` and ``dispatch: fcfs``."""
    assert (cluster.contention, cluster.route, cluster.dispatch) == ("none", "direct", "fcfs")
    op_time = PreparedGraph(graph, cluster).op_time
    env = simpy.Environment()
    result = SimpyResult(0.0, [0.0] * cluster.num_devices, 0.0, {}, [])
    finished = [env.event() for _ in range(graph.num_ops)]
    edges = list(
        zip(
            graph.edge_src.tolist(), graph.edge_dst.tolist(), graph.edge_bytes.tolist(), strict=True
        )
    )
    arrived = {(u, v): env.event() for u, v, _ in edges}  # an edge's data is on v's device

    def send(u: int, dst: int, nbytes: float, satisfies: list[tuple[int, int]]):
        """u's output (``nbytes``) to device ``dst`` once u has finished, however busy the link."""
        yield finished[u]
        src, start = placement[u], env.now
        yield env.timeout(cluster.latency[src, dst] + nbytes / cluster.bandwidth[src, dst])
        result.transfers.append((u, src, dst, nbytes, start, env.now))
        result.bytes_moved += nbytes
        for edge in satisfies:
            arrived[edge].succeed()

    remote: dict[tuple[int, int], list[tuple[int, float]]] = defaultdict(list)
    for u, v, nbytes in edges:
        if placement[u] == placement[v]:
            arrived[(u, v)] = finished[u]
        elif cluster.send == "per-consumer":
            env.process(send(u, placement[v], nbytes, [(u, v)]))
        else:
            remote[(u, placement[v])].append((v, nbytes))
    for (u, dst), consumers in remote.items():  # one send per device: the largest edge
        size = max(nbytes for _, nbytes in consumers)
        env.process(send(u, dst, size, [(u, v) for v, _ in consumers]))

    inputs: list[list[simpy.Event]] = [[] for _ in range(graph.num_ops)]
    for u, v, _ in edges:
        inputs[v].append(arrived[(u, v)])
    ready: list[list[tuple[float, int]]] = [[] for _ in range(cluster.num_devices)]
    wake: list[simpy.Event | None] = [None] * cluster.num_devices

    def op(v: int):
        """Waits for every input, then joins its device's queue: (time it became ready, index)."""
        yield env.all_of(inputs[v])
        d = placement[v]
        heapq.heappush(ready[d], (env.now, v))
        if wake[d] is not None and not wake[d].triggered:
            wake[d].succeed()

    def device(d: int):
        """Runs one op at a time, first come first served, without preemption."""
        while True:
            if not ready[d]:
                wake[d] = env.event()
                yield wake[d]
            yield EndOfInstant(env)
            _, v = heapq.heappop(ready[d])
            start, duration = env.now, float(op_time[v, d])
            yield env.timeout(duration)
            result.ops[v] = (d, start, env.now)
            result.busy_time[d] += duration
            finished[v].succeed()

    for v in range(graph.num_ops):
        env.process(op(v))
    for d in range(cluster.num_devices):
        env.process(device(d))
    env.run()
    assert len(result.ops) == graph.num_ops
    result.step_time = max((end for _, _, end in result.ops.values()), default=0.0)
    return result


def random_case(seed: int) -> tuple[CompGraph, Cluster, Decision]:
    """A random DAG on a random cluster with the simulator setting of DOPPLER, sends per device
    or per consumer, and a random placement and priorities (which fcfs ignores)."""
    rng = np.random.default_rng(10_000 + seed)
    n = int(rng.integers(1, 40))
    src, dst = np.nonzero(np.triu(rng.random((n, n)) < rng.uniform(0.03, 0.3), k=1))
    integer = seed % 2 == 0  # integer costs: many events at one instant, which tests the ties
    draw = (lambda size: rng.integers(1, 5, size).astype(float)) if integer else rng.lognormal
    graph = CompGraph.from_arrays(
        name=f"simpy{seed}",
        op_names=[f"op{i}" for i in range(n)],
        op_types=["T"] * n,
        op_classes=["elementwise"] * n,
        flops=draw(size=n),
        bytes_accessed=draw(size=n),
        output_bytes=draw(size=n),
        param_bytes=np.zeros(n),
        edge_src=src.tolist(),
        edge_dst=dst.tolist(),
        edge_bytes=np.where(rng.random(len(src)) < 0.2, 0.0, draw(size=len(src))),
    )
    num_dev = int(rng.integers(1, 6))
    devices = tuple(
        Device(
            name=f"d{i}",
            kind="k",
            peak_flops=float(rng.choice([1.0, 2.0])),
            mem_bandwidth=float(rng.choice([1.0, 4.0])),
            memory=1e12,
            launch_overhead=float(rng.choice([0.0, 0.5])),
        )
        for i in range(num_dev)
    )
    cluster = Cluster(
        name="simpy",
        devices=devices,
        bandwidth=rng.choice([1.0, 2.0, 8.0], size=(num_dev, num_dev)),
        latency=rng.choice([0.25, 0.5, 1.0], size=(num_dev, num_dev)),
        contention="none",
        send="per-consumer" if seed % 4 < 2 else "per-device",
        dispatch="fcfs",
    )
    decision = Decision(placement=rng.integers(0, num_dev, n), priority=rng.integers(0, 5, n))
    return graph, cluster, decision


def assert_matches_simpy(graph: CompGraph, cluster: Cluster, decision: Decision, label: str):
    """The engine's result equals the SimPy model's exactly: step time, busy times, and the
    device, start and end of every op and transfer; bytes moved up to rounding (summed in
    another order)."""
    want = simulate_simpy(graph, cluster, decision.placement.tolist())
    got = PreparedGraph(graph, cluster).evaluate(decision, schedule=True)
    assert got.valid and got.schedule is not None, label
    assert got.step_time == want.step_time, label
    np.testing.assert_array_equal(got.busy_time, want.busy_time, err_msg=label)
    assert got.bytes_moved == pytest.approx(want.bytes_moved, rel=1e-12), label  # summing order
    ops = {k.ops[-1]: (k.device, k.start, k.end) for k in got.schedule.kernels}
    assert ops == want.ops, label
    transfers = [
        (t.producer, t.src, t.dst, t.nbytes, t.start, t.end) for t in got.schedule.transfers
    ]
    assert sorted(transfers) == sorted(want.transfers), label


def test_engine_matches_simpy_on_random_graphs() -> None:
    differ = 0  # cases where the default model (link contention, priorities) gives another step
    for seed in range(NUM_GRAPHS):
        graph, cluster, decision = random_case(seed)
        assert_matches_simpy(graph, cluster, decision, f"seed {seed}")
        default = dataclasses.replace(cluster, contention="link", dispatch="priority")
        step = PreparedGraph(graph, default).evaluate(decision).step_time
        differ += step != PreparedGraph(graph, cluster).evaluate(decision).step_time
    assert differ >= NUM_GRAPHS // 5  # the options matter on these cases


@pytest.mark.parametrize("preset", ["doppler-4", "doppler-8"])
def test_doppler_presets_match_simpy(preset: str) -> None:
    """The published-setting presets on the tiny suite, under a random and a round-robin
    placement."""
    cluster = get_cluster(preset)
    rng = np.random.default_rng(0)
    for graph in resolve_graphs("suite:tiny"):
        for placement in (
            rng.integers(0, cluster.num_devices, graph.num_ops),
            np.arange(graph.num_ops) % cluster.num_devices,
        ):
            decision = Decision(placement=placement)
            assert_matches_simpy(graph, cluster, decision, f"{preset} {graph.name}")
