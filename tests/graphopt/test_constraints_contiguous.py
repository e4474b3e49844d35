"""The contiguity rule of :mod:`graphopt.constraints` (the cluster option ``contiguous: true``):
the check, its message, the projection, bad input, and every method keeping it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from constrained_cases import contiguous_case

from graphopt.baselines.constrained import STAGE_AWARE
from graphopt.baselines.estimate_search import estimate_search
from graphopt.baselines.exact import solve_exact
from graphopt.baselines.placement import PLACERS
from graphopt.baselines.search import random_search, simulated_annealing
from graphopt.baselines.staged import measure_chain
from graphopt.blocks import block_dag, is_contiguous, singleton_devices
from graphopt.constraints import constraints
from graphopt.decoders.placement import PlacementInputs, decode_placement
from graphopt.decoders.search import search_placements
from graphopt.decoders.stepwise import step_graph
from graphopt.graph import CompGraph, Op
from graphopt.hardware import Cluster, Device
from graphopt.sim import PreparedGraph, Simulator
from graphopt.typing import Decision

CASES = 300
FIRST = 12
"""Graphs of the first part, run by every suite (the rest run with the expensive tests)."""


def chain(n: int = 4, **op_fields) -> CompGraph:
    ops = [Op(f"o{i}", "X", flops=1e12, **op_fields) for i in range(n)]
    return CompGraph.build("chain", ops, [(f"o{i}", f"o{i + 1}", 1e3) for i in range(n - 1)])


def cluster_of(*kinds: str, memory: float = 16e9) -> Cluster:
    devices = tuple(Device(f"d{i}", k, 1e13, 5e11, memory, 5e-6) for i, k in enumerate(kinds))
    n = len(devices)
    return Cluster("c", devices, np.full((n, n), 1e10), np.full((n, n), 1e-6), contiguous=True)


def keeps(graph: CompGraph, cluster: Cluster, placement: object) -> bool:
    """The rule checked independently of :mod:`graphopt.constraints`: blocks whole, and the
    stages acyclic with :func:`graphopt.blocks.is_contiguous` (networkx)."""
    placement = np.asarray(placement, dtype=np.int64)
    dag = block_dag(graph)
    device = np.full(dag.num_blocks, -1)
    device[dag.block] = placement
    if not np.array_equal(device[dag.block], placement):
        return False
    alone = np.flatnonzero(singleton_devices(cluster))
    return is_contiguous(dag, device, singletons=alone)


class Recording:
    """A simulator that keeps every placement it prices (what a search tried)."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.tried: list[np.ndarray] = []

    def evaluate(self, graph: CompGraph, cluster: Cluster, decision: Decision):
        self.tried.append(np.asarray(decision.placement))
        return self.sim.evaluate(graph, cluster, decision)


def test_chain_stages_named_op_and_message() -> None:
    g, c = chain(), cluster_of("GPU", "GPU")
    rules = constraints(g, c)
    assert rules.active and rules.contiguous
    assert rules.violation(np.array([0, 0, 1, 1])) == ""
    assert rules.violation(np.array([1, 1, 0, 0])) == ""  # device names need no order
    reason = rules.violation(np.array([0, 1, 0, 0]))
    assert reason.startswith("placement constraint: op 'o2' on device 0 (d0) follows op 'o1'")
    assert "contiguous: true" in reason and "\n" not in reason
    assert list(rules.violations(np.array([[0, 0, 1, 1], [0, 1, 0, 0], [1, 0, 1, 0]]))) == [
        False,
        True,
        True,
    ]
    m = PreparedGraph(g, c).evaluate(Decision(placement=np.array([0, 1, 0, 0])))
    assert not m.valid and m.reason == reason


def test_a_block_runs_on_one_device() -> None:
    g = chain(4)
    g = replace(g, layer=("a", "a", "b", "b"))
    rules = constraints(g, cluster_of("GPU", "GPU"))
    reason = rules.violation(np.array([0, 1, 1, 1]))
    assert "the block of op 'o0' is split" in reason and "op 'o1' on device 1" in reason
    assert rules.members(np.array([1])).tolist() == [0, 1]
    # the same placement is fine without the option
    assert (
        constraints(g, replace(cluster_of("GPU", "GPU"), contiguous=False)).violation(
            np.array([0, 1, 1, 1])
        )
        == ""
    )


def test_cpus_beside_accelerators_are_one_stage_per_block() -> None:
    g, c = chain(4), cluster_of("CPU", "GPU", "GPU")
    rules = constraints(g, c)
    assert rules.violation(np.array([0, 1, 0, 2])) == ""  # the CPU's blocks are apart
    assert rules.violation(np.array([1, 0, 1, 2])) != ""  # the path leaves d1 and comes back
    assert rules.violation(np.array([0, 0, 0, 0])) == ""
    # a cluster of CPUs only: each is one stage
    assert constraints(g, cluster_of("CPU", "CPU")).violation(np.array([0, 1, 0, 1])) != ""


def test_projection_is_identity_on_contiguous_and_contiguous_on_any() -> None:
    rng = np.random.default_rng(0)
    for seed in range(60):
        graph, cluster = contiguous_case(seed)
        rules = constraints(graph, cluster)
        for _ in range(5):
            drawn = rng.integers(0, cluster.num_devices, graph.num_ops)
            projected = rules.project(drawn)
            assert rules.violation(projected) == "", (graph.name, drawn)
            assert keeps(graph, cluster, projected)
            assert np.array_equal(rules.project(projected), projected)
            # the scipy check agrees with the networkx one
            ok = rules.allowed is None or rules.allowed[np.arange(graph.num_ops), drawn].all()
            expected = not (ok and keeps(graph, cluster, drawn))
            assert bool(rules.violations(drawn[None])[0]) == expected


def test_bad_input_one_line() -> None:
    # a layer that holds a CPU-only op and a GPU-only op: no device for the block
    ops = [Op("a", "X", flops=1, layer="L", allowed=("CPU",)), Op("b", "X", layer="L")]
    ops.append(Op("c", "X", allowed=("GPU",), layer="L"))
    g = CompGraph.build("g", ops, [("a", "b", 1.0), ("b", "c", 1.0)])
    with pytest.raises(ValueError, match=r"no contiguous split .* the block of op 'a'") as e:
        constraints(g, cluster_of("CPU", "GPU"))
    assert "\n" not in str(e.value)
    # A (GPU) -> B (CPU only) -> C (GPU) with one accelerator, three blocks: B is a stage of its
    # own between the accelerator's blocks
    ops = [Op("a", "X", allowed=("GPU",)), Op("b", "X", allowed=("CPU",))]
    ops.append(Op("c", "X", allowed=("GPU",)))
    g = CompGraph.build("g", ops, [("a", "b", 1.0), ("b", "c", 1.0)])
    with pytest.raises(ValueError, match=r"no contiguous split .* found"):
        constraints(g, cluster_of("CPU", "GPU"))
    assert constraints(g, cluster_of("CPU", "GPU", "GPU")).fallback.tolist() == [1, 0, 2]
    # parameters over every device's memory
    g = replace(chain(2), layer=("L", "L"), param_bytes=np.array([6.0, 6.0]))
    with pytest.raises(ValueError, match=r"op 'o0' \(colour class 'L'\) .* holds 0.000 GB of") as e:
        constraints(g, cluster_of("GPU", "GPU", memory=10.0))
    assert "\n" not in str(e.value)


def test_cli_refuses_a_graph_without_a_contiguous_split(tmp_path, capsys) -> None:
    from graphopt.cli import main

    ops = [Op("a", "X", allowed=("GPU",)), Op("b", "X", allowed=("CPU",))]
    ops.append(Op("c", "X", allowed=("GPU",)))
    CompGraph.build("g", ops, [("a", "b", 1.0), ("b", "c", 1.0)]).save(tmp_path / "g.json")
    cluster_of("CPU", "GPU").save(tmp_path / "c.yaml")
    assert "contiguous: true" in (tmp_path / "c.yaml").read_text()
    # the command's entry point in this process (a subprocess would only import torch again)
    code = main(["simulate", str(tmp_path / "g.json"), "--cluster", str(tmp_path / "c.yaml")])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "no contiguous split" in lines[0], err


def test_refusals_are_one_line_and_name_what_keeps_it() -> None:
    graph, cluster = contiguous_case(3)
    for name in ("round-robin", "metis", "heft", "heft-lc", "m-etf"):
        with pytest.raises(ValueError, match=f"^{name} places ops without regard") as e:
            PLACERS[name](graph, cluster)
        assert STAGE_AWARE in str(e.value)
    with pytest.raises(ValueError, match="solve_exact does not model contiguous stages"):
        solve_exact(graph, cluster)
    with pytest.raises(ValueError, match=r"step-wise decoder .*\(contiguous: true\)"):
        step_graph(graph, cluster)


# --- target: with contiguous: true, no method returns a violating decision ----------------------


@pytest.mark.parametrize(
    "part",
    # the first FIRST graphs in every run; all CASES where the expensive tests run (CI)
    [0, *(pytest.param(part, marks=pytest.mark.expensive) for part in range(1, 5))],
)
def test_no_method_returns_a_violating_decision(part: int) -> None:
    """Random graphs with random colour classes: every placer of the registry (or its refusal,
    for those that scatter ops), the best-heuristic chain, random search, annealing, the
    search through the placement decoder (hot, so that it accepts moves), the estimate search
    and the placement decoder. The environments: ``tests/envs/test_placement_constraints.py``."""
    sim = Simulator()
    blind = set(PLACERS) - set(STAGE_AWARE.split(", "))
    bounds = [0, FIRST, *(FIRST + (CASES - FIRST) * k // 4 for k in range(1, 5))]
    for seed in range(bounds[part], bounds[part + 1]):
        graph, cluster = contiguous_case(seed)
        for name, placer in PLACERS.items():
            try:
                placement = placer(graph, cluster)
            except ValueError as e:
                assert name in blind or "fit no" in str(e), (name, graph.name, e)
                continue
            assert name not in blind
            assert keeps(graph, cluster, placement), (name, graph.name, placement)
        chain_, score, best = measure_chain(graph, cluster, "placement", sim)
        assert best.decision is not None
        assert keeps(graph, cluster, best.decision.placement)
        rng = np.random.default_rng(seed)
        for search in (random_search, simulated_annealing):
            found = search(graph, cluster, "placement", 12, seed, start=best.decision)
            assert keeps(graph, cluster, found.decision.placement), search.__name__
        recording = Recording(sim)
        search_placements(graph, cluster, best.decision, 12, seed=seed, cost_model=recording)
        assert len(recording.tried) == 12
        assert all(keeps(graph, cluster, p) for p in recording.tried), "decoder search"
        est = estimate_search(
            graph, cluster, rng.integers(0, cluster.num_devices, graph.num_ops), 8
        )
        assert keeps(graph, cluster, est.placement), "estimate_search"
        inputs = PlacementInputs(
            shift=rng.normal(size=graph.num_ops),
            affinity=rng.normal(size=(graph.num_ops, cluster.num_devices)) * 50,
            gate=rng.normal(size=graph.num_ops),
            anchor=rng.integers(0, cluster.num_devices, graph.num_ops),
        )
        decoded = decode_placement(graph, cluster, inputs, colocation=bool(seed % 2))
        assert keeps(graph, cluster, decoded), "decode_placement"
