"""The compiled engine against its readable twin (``reference.py``) on seeded random cases."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest
from conftest import unit_cluster
from reference import fusion_violation, simulate_reference

from graphopt.graph import CompGraph
from graphopt.hardware import MODEL_OPTIONS, Cluster, Device
from graphopt.op_classes import OP_CLASSES
from graphopt.sim import PreparedGraph
from graphopt.sim.fusion_rules import FusionRules
from graphopt.typing import Decision

NUM_CASES = 240


EFFICIENCY = (
    {},
    {},
    {"U": {"compute": 0.5, "memory": 2.0}, "elementwise": {"memory": 0.25}},
    {"reduction": {"compute": 0.25, "memory": 0.5}, "T": {"memory": 0.7}},
)
"""Efficiency tables a random device draws from (half of them none)."""


def random_case(seed: int) -> tuple[CompGraph, Cluster, Decision]:
    """A random DAG, cluster and decision. Integer-valued costs on unit devices make many events
    coincide, which exercises the tie-breaking rules; some ops are measured (some at 0 s); some
    devices have efficiency entries for an op type and an op class (drawn from a second
    generator, so that the other draws stay those of the seed)."""
    rng = np.random.default_rng(seed)
    extra = np.random.default_rng(seed + 1_000_000)
    n = int(rng.integers(1, 40))
    density = rng.uniform(0.02, 0.3)
    src, dst = np.nonzero(np.triu(rng.random((n, n)) < density, k=1))
    integer = rng.random() < 0.5
    if integer:
        flops = rng.integers(0, 5, n).astype(float)
        nbytes = rng.integers(0, 5, n).astype(float)
        out = rng.integers(0, 4, n).astype(float)
        ebytes = rng.integers(0, 6, len(src)).astype(float)
    else:
        flops = rng.lognormal(0, 1, n)
        nbytes = rng.lognormal(0, 1, n)
        out = rng.lognormal(0, 1, n)
        ebytes = rng.lognormal(0, 1, len(src))
    params = np.where(rng.random(n) < 0.3, rng.integers(1, 20, n), 0).astype(float)
    measured = {}
    if rng.random() < 0.4:
        meas = rng.integers(0, 4, n).astype(float)
        meas[rng.random(n) < 0.3] = np.nan
        measured["fast"] = meas
    graph = CompGraph.from_arrays(
        name=f"rand{seed}",
        op_names=[f"op{i}" for i in range(n)],
        op_types=extra.choice(["T", "U"], size=n).tolist(),
        op_classes=rng.choice(OP_CLASSES, size=n, p=[0.72, 0.06, 0.06, 0.1, 0.03, 0.03]).tolist(),
        flops=flops,
        bytes_accessed=nbytes,
        output_bytes=out,
        param_bytes=params,
        edge_src=src.tolist(),
        edge_dst=dst.tolist(),
        edge_bytes=ebytes,
        measured=measured,
    )
    num_dev = int(rng.integers(1, 5))
    memory = float(rng.choice([1e9, rng.uniform(5, 60)]))
    devices = tuple(
        Device(
            name=f"d{i}",
            kind=str(rng.choice(["fast", "slow"])),
            peak_flops=float(rng.choice([1.0, 2.0])),
            mem_bandwidth=float(rng.choice([1.0, 4.0, 1e30])),
            memory=memory,
            launch_overhead=float(rng.choice([0.0, 0.5])),
            efficiency=EFFICIENCY[int(extra.integers(0, len(EFFICIENCY)))],
        )
        for i in range(num_dev)
    )
    bw = rng.choice([1.0, 2.0, 8.0], size=(num_dev, num_dev))
    lat = rng.choice([0.0, 0.5, 1.0], size=(num_dev, num_dev))
    np.fill_diagonal(bw, np.inf)
    np.fill_diagonal(lat, 0.0)
    cluster = Cluster(name="rand", devices=devices, bandwidth=bw, latency=lat)
    one_device = rng.random() < 0.6  # so that fused kernels often pass rule 2c
    decision = Decision(
        placement=np.zeros(n, np.int64) if one_device else rng.integers(0, num_dev, n),
        priority=rng.integers(0, int(rng.integers(1, 4)), n),
        fusion=(rng.random(n) < rng.choice([0.0, 0.1, 0.3])).astype(np.int64),
    )
    return graph, cluster, decision


MODELS = list(itertools.product(*MODEL_OPTIONS.values()))
"""Every combination of the cluster's model options (contention, route, send, copies)."""


def with_model(cluster: Cluster, seed: int, model: tuple[str, ...]) -> Cluster:
    """``cluster`` under the model options ``model`` (in :data:`MODEL_OPTIONS` order); under
    via-host the host is a device chosen by the seed."""
    options = dict(zip(MODEL_OPTIONS, model, strict=True))
    host = (
        cluster.devices[seed % cluster.num_devices].name if options["route"] == "via-host" else None
    )
    return dataclasses.replace(cluster, host=host, **options)


def spread(graph: CompGraph, decision: Decision, seed: int, num_devices: int) -> Decision:
    """``decision``, or where it keeps every op on device 0, a random placement over all the
    devices without fusion: transfers are what the link models change."""
    if decision.placement.any() or num_devices == 1:
        return decision
    rng = np.random.default_rng(seed + 2_000_000)
    placement = rng.integers(0, num_devices, graph.num_ops)
    return Decision(placement, decision.priority, np.zeros(graph.num_ops, np.int64))


def assert_agree(graph: CompGraph, cluster: Cluster, decision: Decision, label: str) -> str:
    """Engine and twin give the same result (every figure, kernel and transfer); returns the
    twin's status."""
    ref = simulate_reference(graph, cluster, decision)
    fast = PreparedGraph(graph, cluster).evaluate(decision, schedule=True)
    assert fast.valid == (ref.status == "ok"), label
    if ref.status == "illegal_fusion":
        assert math.isinf(fast.step_time) and "illegal fusion" in fast.reason, label
        return ref.status
    assert fast.step_time == ref.step_time, label
    assert ("out of memory" in fast.reason) == (ref.status == "oom"), label
    if ref.status == "oom":
        assert f"device {ref.oom_device} " in fast.reason, label
    np.testing.assert_allclose(fast.busy_time, ref.busy_time, rtol=1e-12, err_msg=label)
    np.testing.assert_allclose(fast.peak_memory, ref.peak_memory, rtol=1e-9, err_msg=label)
    assert fast.bytes_moved == pytest.approx(ref.bytes_moved, rel=1e-12), label
    kernels = {k.ops[-1]: (k.device, k.start, k.end) for k in fast.schedule.kernels}
    assert kernels == ref.kernels, label
    transfers = [
        (t.producer, t.src, t.dst, t.nbytes, t.start, t.end) for t in fast.schedule.transfers
    ]
    assert sorted(transfers) == sorted(ref.transfers), label
    return ref.status


@pytest.mark.parametrize("chunk", range(8))
def test_engine_matches_reference(chunk: int) -> None:
    statuses = set()
    for seed in range(chunk, NUM_CASES, 8):
        graph, cluster, decision = random_case(seed)
        statuses.add(assert_agree(graph, cluster, decision, f"seed {seed}"))
    assert "ok" in statuses


def _model_param(model: tuple[str, ...]) -> object:
    """``model`` as a parameter; with ``colocation: enforce`` in the expensive set: the random
    graphs have no colocation groups, so rule 0 (a check in Python, not in the engine) has nothing
    to check and each such case repeats its ``hint`` twin (tests/graphopt/test_constraints.py
    tests rule 0)."""
    marks = (
        [pytest.mark.expensive]
        if dict(zip(MODEL_OPTIONS, model, strict=True))["colocation"] != "hint"
        else []
    )
    return pytest.param(model, id="-".join(model), marks=marks)


@pytest.mark.parametrize("model", [_model_param(m) for m in MODELS])
def test_engine_matches_reference_under_every_model(model: tuple[str, ...]) -> None:
    statuses = set()
    for seed in range(0, NUM_CASES, 3):
        graph, cluster, decision = random_case(seed)
        cluster = with_model(cluster, seed, model)
        decision = spread(graph, decision, seed, cluster.num_devices)
        statuses.add(assert_agree(graph, cluster, decision, f"seed {seed}, {model}"))
    assert {"ok", "oom"} <= statuses


def test_every_model_option_changes_some_random_case() -> None:
    """Each option of the engine on its own changes the outcome of some of the cases above (the
    step time, the bytes moved or the peak memory), or the agreement tests would not test it.
    ``colocation`` is no engine option: ``enforce`` is rule 0, a placement check made in Python
    before the engine runs (tests/graphopt/test_constraints.py)."""
    defaults = tuple(choices[0] for choices in MODEL_OPTIONS.values())
    for position, (name, choices) in enumerate(MODEL_OPTIONS.items()):
        if name == "colocation":
            continue
        model = defaults[:position] + (choices[1],) + defaults[position + 1 :]
        changed = 0
        for seed in range(0, NUM_CASES, 3):
            graph, cluster, decision = random_case(seed)
            decision = spread(graph, decision, seed, cluster.num_devices)
            a = simulate_reference(graph, with_model(cluster, seed, defaults), decision)
            b = simulate_reference(graph, with_model(cluster, seed, model), decision)
            changed += (a.step_time, a.bytes_moved, a.peak_memory) != (
                b.step_time,
                b.bytes_moved,
                b.peak_memory,
            )
        assert changed >= 5, model


def test_random_cases_cover_every_outcome() -> None:
    """The random cases must exercise OOM, illegal fusion, valid runs and valid fused kernels, and
    every fusion rule, or the tests above are weak."""
    statuses, rules, fused_ok = [], set(), 0
    for seed in range(NUM_CASES):
        graph, cluster, decision = random_case(seed)
        statuses.append(simulate_reference(graph, cluster, decision).status)
        rules.add(fusion_violation(graph, list(decision.placement), list(decision.fusion), 4)[0])
        fused_ok += statuses[-1] == "ok" and bool(decision.fusion.any())
    assert {"ok", "oom", "illegal_fusion"} <= set(statuses)
    assert rules == {0, 1, 2, 3, 4, 5} and fused_ok > 10
    assert statuses.count("ok") > NUM_CASES // 3


@pytest.mark.parametrize("max_io", [4, 96])
def test_fusion_rules_match_reference(max_io: int) -> None:
    for seed in range(NUM_CASES):
        graph, _, decision = random_case(seed)
        rules = FusionRules(graph, max_io=max_io)
        fast = rules.violation(decision.placement, decision.fusion)
        ref = fusion_violation(graph, list(decision.placement), list(decision.fusion), max_io)
        assert fast == ref, f"seed {seed}"
        if fast[0]:
            assert "illegal fusion (rule 2" in rules.describe(*fast)


def test_unit_cluster_helper_is_uniform() -> None:
    cluster = unit_cluster(3)
    assert cluster.num_devices == 3 and np.all(cluster.bandwidth[~np.eye(3, dtype=bool)] == 10.0)
