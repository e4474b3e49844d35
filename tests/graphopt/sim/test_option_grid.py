"""Every cluster model option, the estimate and HEFT-lc against the simulator (issue targets:
the estimate ranks 200 random placements like the simulator, Kendall tau >= 0.9; the estimate's
and HEFT-lc's own predicted step times within 5% of the simulated ones, median).

Measured (``python bench/bench_option_ratios.py``, ``docs/results/link_options.md``): the 5%
targets hold under every combination; tau >= 0.9 does not. The estimate is an insertion list
schedule in topological order, the simulator an event-driven one (devices start the ready
kernel of lowest priority, links serve first come first served), and the two orders differ
most where relayed sends queue on the host's links: over four graphs, tau 0.82-0.86 in the 32
combinations with ``contention: link`` and ``route: via-host``, at least 0.9 in the 96 others
(on this file's two graphs the lowest is 0.73). :data:`TAU_FLOOR` pins the level reached, so
that a change that loosens the ranking fails.

The normal suite runs a representative subset (:data:`REPRESENTATIVE`: the defaults, each
option changed alone, the presets' settings, everything changed); the whole grid (every
combination of the six model options and two ``op_times``) is ``expensive``.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import kendalltau

from graphopt.baselines.heft import heft_schedule
from graphopt.graph import CompGraph
from graphopt.hardware import MODEL_OPTIONS, Cluster, Device
from graphopt.sim import Simulator
from graphopt.sim.estimate import PlacementEstimate
from graphopt.typing import Decision
from graphopt.workloads.random_dags import layered_dag, series_parallel_dag

OPTIONS = {**MODEL_OPTIONS, "op_times": ("roofline", "calibrated")}
DEFAULTS = {name: values[0] for name, values in OPTIONS.items()}
REPRESENTATIVE = [
    DEFAULTS,
    *({**DEFAULTS, name: values[1]} for name, values in OPTIONS.items()),
    {**DEFAULTS, "contention": "none", "send": "per-consumer", "dispatch": "fcfs"},  # doppler
    {**DEFAULTS, "route": "via-host", "copies": "free"},  # accel-host
    {name: values[1] for name, values in OPTIONS.items()},
]
GRID = [dict(zip(OPTIONS, values, strict=True)) for values in itertools.product(*OPTIONS.values())]
SAMPLES = 200
TOLERANCE = 0.05
"""The estimate's and HEFT-lc's predicted / simulated step time: within 5%, median."""
TAU_FLOOR = 0.65
"""The lowest Kendall tau (median over the graphs) measured under any combination, with a
margin; the issue's target, 0.9, is missed under contention and via-host (module docstring)."""


def option_cluster(options: dict[str, str]) -> Cluster:
    """A host CPU (device 0) and three accelerators: PCIe to the host, NVLink between the
    accelerators, memory that never binds (as ``bench/bench_option_ratios.py``)."""
    eff = (("contraction", 0.7, 1.0), ("elementwise", 1.0, 0.8))
    eff = eff if options["op_times"] == "calibrated" else ()
    devices = (Device("cpu", "CPU", 2e12, 1e11, 1e15, 1e-5, efficiency=eff),) + tuple(
        Device(f"gpu{i}", "V100", 15e12, 9e11, 1e15, 5e-6, efficiency=eff) for i in range(3)
    )
    bandwidth, latency = np.full((4, 4), 50e9), np.full((4, 4), 5e-6)
    bandwidth[0, :] = bandwidth[:, 0] = 12e9
    latency[0, :] = latency[:, 0] = 1e-5
    return Cluster("option-grid", devices, bandwidth, latency, **options)


def graphs(count: int) -> list[CompGraph]:
    return [(layered_dag if k % 2 == 0 else series_parallel_dag)(60, seed=k) for k in range(count)]


def check(options: dict[str, str], count: int) -> None:
    cluster = option_cluster(options)
    sim = Simulator()
    taus, estimate_ratios, lc_ratios = [], [], []
    for graph in graphs(count):
        place = np.random.default_rng(0).integers(0, 4, size=(SAMPLES, graph.num_ops))
        estimate = PlacementEstimate(graph, cluster)(place)
        step = np.array(
            [sim.evaluate(graph, cluster, Decision(placement=p)).step_time for p in place]
        )
        taus.append(kendalltau(estimate, step).statistic)
        estimate_ratios.append(np.median(estimate / step))
        lc = heft_schedule(graph, cluster, contention=True)
        simulated = sim.evaluate(graph, cluster, Decision(placement=lc.placement)).step_time
        lc_ratios.append(lc.makespan / simulated)
    assert abs(np.median(estimate_ratios) - 1.0) <= TOLERANCE, (options, estimate_ratios)
    assert abs(np.median(lc_ratios) - 1.0) <= TOLERANCE, (options, lc_ratios)
    assert np.median(taus) >= TAU_FLOOR, (options, taus)


@pytest.mark.parametrize("options", REPRESENTATIVE, ids=lambda o: ",".join(o.values()))
def test_estimate_and_heft_lc_follow_the_simulator_under_the_options(options):
    check(options, count=2)


@pytest.mark.expensive
@pytest.mark.parametrize("options", GRID, ids=lambda o: ",".join(o.values()))
def test_estimate_and_heft_lc_follow_the_simulator_under_every_combination(options):
    check(options, count=4)
