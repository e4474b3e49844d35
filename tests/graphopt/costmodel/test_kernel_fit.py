"""The kernel model: boundary bytes by hand, and a fit that learns a known law of fused kernels."""

from __future__ import annotations

import numpy as np
import pytest

from graphopt.costmodel.kernel_fit import (
    KERNEL_FEATURES,
    boundary_bytes,
    fit_kernel_model,
    kernel_features,
    member_times,
    op_indices,
)
from graphopt.graph import CompGraph, Op
from graphopt.hardware import Device
from graphopt.measure.kernels import KernelProfile

DEVICE = Device("cpu0", "cpu-test", peak_flops=1e11, mem_bandwidth=2e10, memory=1e10,
                launch_overhead=2e-6)  # fmt: skip


def chain(name: str, sizes: list[int]) -> CompGraph:
    """Per size, mm -> relu -> add (the add also reads the mm), a chain across sizes."""
    ops, edges = [], []
    for k, n in enumerate(sizes):
        out = 4.0 * n * n
        ops += [
            Op(f"mm{k}", "mm", flops=2.0 * n**3, bytes_accessed=3 * out, output_bytes=out),
            Op(f"relu{k}", "relu", bytes_accessed=2 * out, output_bytes=out),
            Op(f"add{k}", "add", bytes_accessed=3 * out, output_bytes=out),
        ]
        edges += [
            (f"mm{k}", f"relu{k}", out),
            (f"relu{k}", f"add{k}", out),
            (f"mm{k}", f"add{k}", out),
        ]
        if k:
            edges.append((f"add{k - 1}", f"mm{k}", out))
    return CompGraph.build(name, ops, edges)


def law(graph: CompGraph, groups: list[list[int]]) -> list[float]:
    """Measured kernels: a library matmul at half its roofline, a fused pointwise kernel at its
    boundary bytes' bandwidth time plus 3 us."""
    times = []
    for g in groups:
        if graph.op_types[g[0]] == "mm":
            times.append(2 * DEVICE.roofline_time(float(graph.flops[g].sum()), 0.0))
        else:
            times.append(boundary_bytes(graph, g) / DEVICE.mem_bandwidth + 3e-6)
    return times


def profile_of(graph: CompGraph) -> KernelProfile:
    groups = [[3 * k] for k in range(graph.num_ops // 3)] + [
        [3 * k + 1, 3 * k + 2] for k in range(graph.num_ops // 3)
    ]
    return KernelProfile(
        name=graph.name,
        kind=DEVICE.kind,
        groups=[[graph.op_names[i] for i in g] for g in groups],
        seconds=law(graph, groups),
        extern=[len(g) == 1 for g in groups],
        kernel_names=["aten::mm" if len(g) == 1 else "cpp_fused_add_relu_0" for g in groups],
        step_seconds=float(sum(law(graph, groups))),
        eager_seconds=float(sum(law(graph, groups))),
        unmatched_ops=[],
        settings={},
    )


def test_boundary_bytes_by_hand() -> None:
    g = chain("g", [8, 16])  # ops: mm0 relu0 add0 mm1 relu1 add1
    out0, out1 = 4.0 * 64, 4.0 * 256
    # relu0 + add0: reads mm0 (once, though both read it); add0 leaves (read by mm1).
    assert boundary_bytes(g, [1, 2]) == out0 + out0
    # mm1 + relu1 + add1: reads add0; add1 is a graph output.
    assert boundary_bytes(g, [3, 4, 5]) == out0 + out1
    # relu1 alone: reads mm1, read outside by add1.
    assert boundary_bytes(g, [4]) == out1 + out1


def test_features_have_the_documented_columns() -> None:
    g = chain("g", [8, 16])
    x, main = kernel_features(g, [[0], [1, 2]], [True, False], DEVICE, member_times(g, DEVICE))
    assert x.shape == (2, len(KERNEL_FEATURES))
    assert main == ["mm", "relu"]  # the member with the most FLOPs, else the first
    col = KERNEL_FEATURES.index
    assert x[1, col("members")] == 2 and x[1, col("n_elementwise")] == 2
    assert x[0, col("extern")] == 1.0 and np.isnan(x[0, col("main_type")])
    assert np.exp(x[1, col("log_roofline")]) == pytest.approx(
        DEVICE.roofline_time(0.0, boundary_bytes(g, [1, 2]))
    )
    # The base: the members' own (roofline) times, summed.
    assert np.exp(x[1, col("log_base")]) == pytest.approx(
        float(DEVICE.roofline_time(g.flops[1:3], g.bytes_accessed[1:3]).sum())
    )


def test_fit_learns_the_law_on_unseen_sizes() -> None:
    train = [chain(f"t{s}", [s, 2 * s, 4 * s]) for s in (8, 12, 16, 24, 32, 48, 64)]
    model = fit_kernel_model([(g, profile_of(g)) for g in train], DEVICE)
    test = chain("test", [20, 40, 80])
    profile = profile_of(test)
    groups = op_indices(test, profile)
    predicted = model.predict(test, groups, profile.extern, DEVICE, member_times(test, DEVICE))
    measured = np.asarray(profile.seconds)
    assert np.median(np.abs(predicted - measured) / measured) < 0.2
    # The members' own times are off by 2x on every matmul: the model learned the law.
    x = kernel_features(test, groups, profile.extern, DEVICE, member_times(test, DEVICE))[0]
    base = np.exp(x[:, KERNEL_FEATURES.index("log_base")])
    assert np.median(np.abs(base - measured) / measured) > 0.3


def test_a_profile_of_another_model_is_refused() -> None:
    profile = profile_of(chain("a", [8]))
    with pytest.raises(ValueError, match="does not hold"):
        op_indices(CompGraph.build("b", [Op("x", "relu")], []), profile)
    with pytest.raises(ValueError, match="at least one"):
        fit_kernel_model([], DEVICE)
