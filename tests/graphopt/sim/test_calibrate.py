"""The roofline fitted to measured op times: known efficiencies are recovered."""

from __future__ import annotations

import numpy as np
import pytest

from graphopt.graph import CompGraph
from graphopt.hardware import Cluster, Device
from graphopt.sim import simulate
from graphopt.sim.calibrate import EFFICIENCIES, calibrate, source_of

DEVICE = Device(
    "cpu0", "cpu-test", peak_flops=1e11, mem_bandwidth=2e10, memory=1e10, launch_overhead=1e-6
)


def closest(value: float) -> float:
    """The grid point of EFFICIENCIES nearest ``value`` (what an exact fit can return)."""
    grid = np.asarray(EFFICIENCIES)
    return float(grid[np.argmin(np.abs(np.log(grid / value)))])


TRUTH = {
    # op type: (class, compute, memory) the "machine" runs at, on the fit's grid
    "mm": ("contraction", closest(0.8), 1.0),
    "convolution": ("contraction", closest(0.4), 1.0),
    "add": ("elementwise", 1.0, closest(1.5)),
    "tanh": ("elementwise", 1.0, closest(0.12)),
    "sum": ("reduction", 1.0, closest(0.5)),
}
OVERHEAD = 5e-6


def measured_graph(family: str, seed: int, types: list[str], n: int = 40) -> CompGraph:
    """A chain of ``n`` ops of ``types`` whose measured times follow :data:`TRUTH` exactly."""
    rng = np.random.default_rng(seed)
    op_types = [types[i % len(types)] for i in range(n)]
    classes = [TRUTH[t][0] for t in op_types]
    flops = np.array([rng.uniform(1e6, 1e8) if c == "contraction" else 0.0 for c in classes])
    nbytes = rng.uniform(1e4, 1e7, n)
    compute = np.array([TRUTH[t][1] for t in op_types])
    memory = np.array([TRUTH[t][2] for t in op_types])
    times = OVERHEAD + np.maximum(
        flops / (DEVICE.peak_flops * compute), nbytes / (DEVICE.mem_bandwidth * memory)
    )
    return CompGraph.from_arrays(
        name=f"{family}-{seed}",
        op_names=[f"op{i}" for i in range(n)],
        op_types=op_types,
        op_classes=classes,
        flops=flops,
        bytes_accessed=nbytes,
        output_bytes=nbytes / 3,
        param_bytes=np.zeros(n),
        edge_src=list(range(n - 1)),
        edge_dst=list(range(1, n)),
        edge_bytes=np.full(n - 1, 1e3),
        measured={DEVICE.kind: times},
        metadata={"zoo": family},
    )


GRAPHS = [
    measured_graph("a", 0, ["mm", "add", "tanh", "sum"]),
    measured_graph("b", 1, ["mm", "convolution", "add", "tanh"]),
    measured_graph("c", 2, ["convolution", "add", "sum", "tanh"]),
]


def test_recovers_overhead_and_efficiencies() -> None:
    fit = calibrate(GRAPHS, DEVICE)
    assert fit.device.launch_overhead == pytest.approx(OVERHEAD, abs=1e-9)
    table = {key: (c, m) for key, c, m in fit.device.efficiency}
    for op_type, (_, compute, memory) in TRUTH.items():
        c, m = table[op_type]
        assert c == pytest.approx(compute, rel=1e-3), op_type  # rounded to 4 digits
        assert m == pytest.approx(memory, rel=1e-3), op_type
    assert {"contraction", "elementwise", "reduction"} <= set(table)
    assert fit.ops == 120 and fit.sources == 3
    assert abs(fit.after_seconds - fit.measured_seconds) < 1e-3 * fit.measured_seconds
    assert abs(fit.before_seconds - fit.measured_seconds) > 0.3 * fit.measured_seconds


def test_simulator_with_the_fitted_device_predicts_an_unseen_graph() -> None:
    unseen = measured_graph("d", 7, ["mm", "convolution", "add", "tanh", "sum"])
    truth = float(np.sum(unseen.measured[DEVICE.kind]))
    data = unseen.to_json_dict()
    data["measured"] = {}
    bare = CompGraph.from_json_dict(data)
    fitted = calibrate(GRAPHS, DEVICE).device
    one = np.full((1, 1), np.inf)
    plain = simulate(bare, Cluster("c", (DEVICE,), one, np.zeros((1, 1)))).step_time
    calibrated = simulate(bare, Cluster("c", (fitted,), one, np.zeros((1, 1)))).step_time
    assert abs(calibrated - truth) < 0.05 * truth
    assert abs(plain - truth) > 0.3 * truth


def test_a_type_seen_in_one_family_keeps_its_class_entry() -> None:
    # convolution only in family "b" (twice), mm in a and c: min_sources=2 drops convolution.
    graphs = [
        measured_graph("a", 0, ["mm", "add"]),
        measured_graph("b", 1, ["convolution", "add"]),
        measured_graph("b", 2, ["convolution", "add"]),
        measured_graph("c", 3, ["mm", "add"]),
    ]
    keys = {key for key, _, _ in calibrate(graphs, DEVICE).device.efficiency}
    assert "mm" in keys and "convolution" not in keys and "contraction" in keys
    keys_one = {key for key, _, _ in calibrate(graphs, DEVICE, min_sources=1).device.efficiency}
    assert "convolution" in keys_one


def test_source_of_joins_forward_and_training_graphs() -> None:
    g = GRAPHS[0]
    assert source_of(g) == "a"
    data = g.to_json_dict()
    data["metadata"] = {}
    data["name"] = "torch:x?batch=2 (training)"
    assert source_of(CompGraph.from_json_dict(data)) == "torch:x?batch=2"


def test_bad_input_is_refused() -> None:
    other = Device("cpu0", "other-kind", 1e11, 2e10, 1e10, 1e-6)
    with pytest.raises(ValueError, match="no op of these 3 graph.* measured time for device kind"):
        calibrate(GRAPHS, other)
    with pytest.raises(ValueError, match="min_ops and min_sources must be >= 1"):
        calibrate(GRAPHS, DEVICE, min_ops=0)


def test_times_whose_sum_overflows_are_refused_naming_the_op() -> None:
    data = GRAPHS[1].to_json_dict()
    data["measured"] = {DEVICE.kind: [1.7e308, *GRAPHS[1].measured[DEVICE.kind][1:]]}
    huge = CompGraph.from_json_dict(data)
    with pytest.raises(
        ValueError,
        match=r"device kind 'cpu-test' cannot be summed .*: op 'b-1/op0' measured 1\.7e\+308 s",
    ):
        calibrate([GRAPHS[0], huge], DEVICE)
