"""Placement constraints: the checks, the violation, the projection, and the property that no
method ever returns a placement that breaks them (500 random constrained graphs)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from constrained_cases import random_case

from graphopt.baselines.estimate_search import estimate_search
from graphopt.baselines.placement import PLACERS
from graphopt.baselines.search import random_search, simulated_annealing
from graphopt.baselines.staged import measure_chain
from graphopt.constraints import constraints
from graphopt.decoders.placement import PlacementInputs, decode_placement
from graphopt.graph import CompGraph, Op
from graphopt.hardware import Cluster, Device, get_cluster
from graphopt.sim import PreparedGraph, Simulator
from graphopt.typing import Decision


def chain_graph(allowed: list[tuple[str, ...]], colocation: list[str] | None = None) -> CompGraph:
    """``a -> b -> c -> ...``: one op per entry of ``allowed``."""
    names = [chr(ord("a") + i) for i in range(len(allowed))]
    coloc = colocation or [""] * len(allowed)
    ops = [
        Op(name, "MatMul", 1e9, 1e6, 1e6, param_bytes=1e6, allowed=kinds, colocation=group)
        for name, kinds, group in zip(names, allowed, coloc, strict=True)
    ]
    return CompGraph.build(
        "chain", ops, [(a, b, 1e6) for a, b in zip(names, names[1:], strict=False)]
    )


def cluster_of(*kinds: str, colocation: str = "hint", memory: float = 16e9) -> Cluster:
    """One device per kind, the first kinds the fastest; uniform links."""
    devices = tuple(
        Device(f"{kind.lower()}{i}", kind, 1e13 / (1 + i), 5e11, memory, 5e-6)
        for i, kind in enumerate(kinds)
    )
    n = len(devices)
    return Cluster(
        "c", devices, np.full((n, n), 1e10), np.full((n, n), 1e-5), colocation=colocation
    )


# ------------------------------------------------------------------ the rules by hand
def test_no_constraints_is_inactive_and_projection_is_identity() -> None:
    g = chain_graph([(), (), ()])
    rules = constraints(g, cluster_of("GPU", "CPU"))
    assert not rules.active and rules.allowed is None and rules.group is None
    placement = np.array([1, 0, 1])
    assert rules.violation(placement) == ""
    assert np.array_equal(rules.project(placement), placement)
    # colocation groups under the default hint constrain nothing
    hinted = chain_graph([(), (), ()], ["x", "x", ""])
    assert not constraints(hinted, cluster_of("GPU", "CPU")).active


def test_allowed_kinds_mask_violation_and_projection() -> None:
    # b may run only on the CPU (device 1); c on GPU or CPU
    g = chain_graph([(), ("CPU",), ("CPU", "GPU"), ("TPU",)])
    c = cluster_of("GPU", "CPU", "TPU")
    rules = constraints(g, c)
    assert rules.allowed is not None
    assert rules.allowed.tolist() == [
        [True, True, True],
        [False, True, False],
        [True, True, False],
        [False, False, True],
    ]
    assert rules.violation(np.array([0, 1, 0, 2])) == ""
    reason = rules.violation(np.array([0, 0, 2, 2]))
    assert "op 'b'" in reason and "CPU" in reason and "device 0 (gpu0" in reason
    # b goes to its producer's device when allowed there, else the fastest allowed device (the
    # CPU); c follows its producer b to the CPU; d must go to the TPU.
    assert rules.project(np.array([0, 0, 2, 0])).tolist() == [0, 1, 1, 2]
    assert rules.project(np.array([1, 0, 0, 2])).tolist() == [1, 1, 0, 2]
    assert rules.violations(np.array([[0, 1, 0, 2], [0, 0, 0, 2]])).tolist() == [False, True]


def test_enforced_colocation_moves_groups_as_one() -> None:
    g = chain_graph([(), (), ("CPU", "GPU"), ()], ["x", "x", "y", "y"])
    c = cluster_of("GPU", "CPU", "TPU", colocation="enforce")
    rules = constraints(g, c)
    assert rules.group is not None and rules.group_names == ("x", "y")
    assert rules.members(0).tolist() == [0, 1]
    assert rules.members([1, 2]).tolist() == [0, 1, 2, 3]
    # y's ops may share only the GPU or the CPU
    assert rules.choices(3).tolist() == [True, True, False]
    reason = rules.violation(np.array([0, 1, 1, 1]))
    assert "colocation group 'x' is split" in reason and "op 'b'" in reason
    # x: one member each on devices 2 and 0, tie to the lower index; y: c is on the TPU, which
    # it may not use, so it first moves to its producer's device 0, then y joins it there
    assert rules.project(np.array([2, 0, 2, 1])).tolist() == [0, 0, 0, 0]
    assert rules.project(np.array([1, 1, 1, 1])).tolist() == [1, 1, 1, 1]


def test_unsatisfiable_constraints_name_the_op_or_group() -> None:
    c = cluster_of("GPU", "CPU")
    with pytest.raises(ValueError, match=r"op 'b' may run only on device kind\(s\) TPU.*has none"):
        constraints(chain_graph([(), ("TPU",)]), c)
    enforced = replace(c, colocation="enforce")
    apart = chain_graph([("GPU",), ("CPU",)], ["x", "x"])
    constraints(apart, c)  # a hint: fine
    with pytest.raises(ValueError, match="colocation group 'x' cannot be placed on one device"):
        constraints(apart, enforced)
    small = cluster_of("GPU", "CPU", colocation="enforce", memory=1.5e6)
    with pytest.raises(ValueError, match="colocation group 'x' holds 0.002 GB of parameters"):
        constraints(chain_graph([(), ()], ["x", "x"]), small)
    # the simulator refuses the pair as well (the command line's exit 2)
    with pytest.raises(ValueError, match="op 'b'"):
        PreparedGraph(chain_graph([(), ("TPU",)]), c)


def test_simulator_marks_violations_invalid_single_and_batched() -> None:
    g = chain_graph([(), ("CPU",), ()], ["", "x", "x"])
    c = cluster_of("GPU", "CPU", colocation="enforce")
    prepared = PreparedGraph(g, c)
    m = prepared.evaluate(Decision(placement=np.array([0, 0, 0])))
    assert not m.valid and m.step_time == np.inf and "op 'b'" in m.reason
    split = prepared.evaluate(Decision(placement=np.array([0, 1, 0])))
    assert not split.valid and "colocation group 'x' is split" in split.reason
    ok = prepared.evaluate(Decision(placement=np.array([0, 1, 1])))
    assert ok.valid
    batch = prepared.evaluate_batch(np.array([[0, 0, 0], [0, 1, 0], [0, 1, 1]]))
    assert batch.valid.tolist() == [False, False, True]
    assert batch.status.tolist() == [3, 3, 0]
    assert batch.step_time[2] == ok.step_time
    # the same graph unconstrained prices the valid placement the same
    free = replace(g, allowed=())
    assert PreparedGraph(free, replace(c, colocation="hint")).evaluate(
        Decision(placement=np.array([0, 1, 1]))
    ).step_time == pytest.approx(ok.step_time, rel=0, abs=0)


def test_graph_file_column_round_trip_and_bad_length(tmp_path) -> None:
    g = chain_graph([(), ("CPU", "GPU"), ()])
    path = g.save(tmp_path / "g.json")
    again = CompGraph.load(path)
    assert again.allowed == ((), ("CPU", "GPU"), ()) and again.fingerprint == g.fingerprint
    assert chain_graph([(), (), ()]).allowed == ()  # no restricted op: no column
    assert "allowed" not in chain_graph([(), (), ()]).to_json_dict()["ops"]
    data = g.to_json_dict()
    for version in (2, 3):  # the column is optional in files of either version
        assert CompGraph.from_json_dict({**data, "version": version}).allowed == g.allowed
    data["ops"]["allowed"] = [[], ["CPU"]]
    with pytest.raises(ValueError, match="column 'allowed' has 2 entries, expected 3"):
        CompGraph.from_json_dict(data)
    data["ops"]["allowed"] = [[], "CPU", []]
    with pytest.raises(ValueError, match="op 'b' has allowed = 'CPU'"):
        CompGraph.from_json_dict(data)


# ------------------------------------------------------------------ the property
CASES = 500
BOUNDS = (0, 60, 170, 280, 390, CASES)
"""Seeds of each part: the first 60 in every run, all 500 where the expensive tests run (CI)."""


def assert_keeps(graph: CompGraph, cluster: Cluster, placement: object, method: str) -> None:
    reason = constraints(graph, cluster).violation(np.asarray(placement))
    assert reason == "", f"{method} on {graph.name}: {reason}"


@pytest.mark.parametrize(
    "part",
    [0, *(pytest.param(part, marks=pytest.mark.expensive) for part in range(1, len(BOUNDS) - 1))],
)
def test_no_method_returns_a_violating_placement(part: int) -> None:
    """500 random constrained graphs (:data:`BOUNDS` per part): every placer and the best-heuristic chain,
    random search and annealing, the estimate search and the placement decoder keep the
    constraints."""
    sim = Simulator()
    for seed in range(BOUNDS[part], BOUNDS[part + 1]):
        graph, cluster = random_case(seed)
        chain, score, best = measure_chain(graph, cluster, "placement", sim)
        placed = {c.method for c in chain.candidates if c.decision is not None}
        assert placed >= {"single", "round-robin", "heft"}, (graph.name, chain.candidates)
        for c in chain.candidates:
            if c.decision is not None:
                assert_keeps(graph, cluster, c.decision.placement, c.method)
        assert best.decision is not None and score.of(best).valid
        start = best.decision
        rng = np.random.default_rng(seed)
        for search in (random_search, simulated_annealing):
            found = search(graph, cluster, "placement", 12, seed, start=start)
            assert_keeps(graph, cluster, found.decision.placement, search.__name__)
            assert found.measurement.valid
        est = estimate_search(
            graph, cluster, rng.integers(0, cluster.num_devices, graph.num_ops), 8
        )
        assert_keeps(graph, cluster, est.placement, "estimate_search")
        inputs = PlacementInputs(
            shift=rng.normal(size=graph.num_ops),
            affinity=rng.normal(size=(graph.num_ops, cluster.num_devices)) * 50,
            gate=rng.normal(size=graph.num_ops),
            anchor=rng.integers(0, cluster.num_devices, graph.num_ops),
        )
        decoded = decode_placement(graph, cluster, inputs, colocation=bool(seed % 2))
        assert_keeps(graph, cluster, decoded, "decode_placement")


def test_every_placer_of_the_registry_keeps_constraints_on_presets() -> None:
    """The registry's placers one by one (outside the chain) on a preset with a CPU."""
    cluster = replace(get_cluster("hetero-cpu-2gpu"), colocation="enforce")
    for seed in range(6):
        graph, _ = random_case(seed)
        kinds = tuple(("CPU",) if a == ("CPU",) else () for a in graph.allowed)
        graph = replace(graph, allowed=kinds if any(kinds) else ((("CPU",),) + kinds[1:]))
        for name, placer in PLACERS.items():
            assert_keeps(graph, cluster, placer(graph, cluster), name)


def test_exact_optimum_keeps_constraints() -> None:
    """CP-SAT bars the devices an op may not use and ties enforced groups (a few small cases)."""
    from graphopt.baselines.exact import solve_exact

    for seed in range(6):
        graph, cluster = random_case(seed)
        result = solve_exact(graph, cluster, time_limit=5.0)
        assert result.decision is not None, (graph.name, result.status)
        assert_keeps(graph, cluster, result.decision.placement, "solve_exact")
        assert result.measurement is not None and result.measurement.valid


def test_simulator_cache_tells_apart_graphs_that_differ_only_in_groups() -> None:
    """The graph's fingerprint leaves colocation out; under enforce the cache key adds it."""
    grouped = chain_graph([(), (), ()], ["x", "x", ""])
    ungrouped = replace(grouped, colocation=("", "", ""))
    assert grouped.fingerprint == ungrouped.fingerprint
    c = cluster_of("GPU", "CPU", colocation="enforce")
    sim, split = Simulator(), Decision(placement=np.array([0, 1, 1]))
    assert not sim.evaluate(grouped, c, split).valid
    assert sim.evaluate(ungrouped, c, split).valid


def test_heft_and_the_decoder_bar_devices_in_their_loop() -> None:
    """HEFT's list schedule never picks a barred device (no projection needed for the kinds),
    and neither does the decoder for its free ops."""
    from graphopt.baselines.heft import heft

    for seed in range(40):
        graph, cluster = random_case(seed)
        rules = constraints(graph, cluster)
        if rules.allowed is None:
            continue
        for placement in (heft(graph, cluster), decode_placement(graph, cluster)):
            assert rules.allowed[np.arange(graph.num_ops), placement].all(), graph.name
