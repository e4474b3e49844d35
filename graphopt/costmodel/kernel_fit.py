"""A learned model of a fused kernel's time from its member ops, trained on Inductor's measured
kernels (:mod:`graphopt.measure.kernels`).

The simulator prices a fused kernel from its members' op times (rule 4 of :mod:`graphopt.sim`:
``max(sum - (m - 1) * launch_overhead, max)``); a compiled kernel can run far from that (a
convolution Inductor hands to oneDNN with packed weights, pointwise ops that never touch memory
between them). This model learns the ratio from measured kernels:

- **Base**: the sum of the members' op times (``member_seconds``: what the simulator prices each
  op at, eager; measured where measured). The model predicts the kernel's time as a multiple of
  it, so a kernel is priced *from its members*, and errors in the op times carry over in
  proportion instead of adding up: a speed-up (unfused over compiled) depends on the predicted
  ratios much more than on the op times.
- **Features** of a kernel (:data:`KERNEL_FEATURES`, :func:`kernel_features`): its member count
  and the count per op class, whether it is a library call, the type of its member with the most
  FLOPs (categorical), ``log`` of the base and of its largest member's time, ``log1p`` of its
  summed FLOPs, of its members' summed bytes, of the bytes crossing its boundary (every input
  read from outside the kernel, every output read outside or left as a graph output) and of its
  largest output, its roofline time on the device (summed FLOPs and boundary bytes), the sum of
  its members' roofline times, and the device's peak FLOP/s, bandwidth and launch overhead.
- **Target**: the log of the measured time over the base.
- **Model**: LightGBM with :data:`~graphopt.costmodel.op_fit.PARAMS` (one thread,
  deterministic), each kernel weighted by the square root of its time.

Used by ``bench/bench_kernels.py`` (leave one family out, and the compiled step it predicts);
the simulator does not take it yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from graphopt.costmodel.op_fit import PARAMS
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster, Device
from graphopt.measure.kernels import KernelProfile
from graphopt.op_classes import CONTRACTION, DATA_MOVEMENT, ELEMENTWISE, REDUCTION
from graphopt.sim.simulator import PreparedGraph

CLASSES = (CONTRACTION, ELEMENTWISE, REDUCTION, DATA_MOVEMENT)
KERNEL_FEATURES = (
    "members",
    *(f"n_{c}" for c in CLASSES),
    "extern",
    "main_type",
    "log_base",
    "log_max_member",
    "log_flops",
    "log_bytes",
    "log_boundary_bytes",
    "log_max_output",
    "log_roofline",
    "log_member_roofline",
    "log_peak_flops",
    "log_bandwidth",
    "log_overhead",
)
"""Names of the columns :func:`kernel_features` returns (``main_type`` categorical)."""


def boundary_bytes(graph: CompGraph, members: Sequence[int]) -> float:
    """Bytes crossing the kernel of ``members``: each distinct producer outside it read by a member
    (its output bytes), plus each member's output read outside it or by nobody (a graph output)."""
    inside = {int(m) for m in members}
    pred_ptr, pred_src, _ = graph.predecessors_csr
    succ_ptr, succ_dst = graph.successors_csr
    read: set[int] = set()
    leaving: set[int] = set()
    for m in inside:
        read.update(int(u) for u in pred_src[pred_ptr[m] : pred_ptr[m + 1]] if u not in inside)
        readers = succ_dst[succ_ptr[m] : succ_ptr[m + 1]]
        if len(readers) == 0 or any(int(v) not in inside for v in readers):
            leaving.add(m)
    out = graph.output_bytes
    return float(sum(out[u] for u in read) + sum(out[m] for m in leaving))


def kernel_features(
    graph: CompGraph,
    groups: Sequence[Sequence[int]],
    extern: Sequence[bool],
    device: Device,
    member_seconds: np.ndarray,
) -> tuple[np.ndarray, list[str]]:
    """Per kernel (``groups``: op indices of ``graph``; ``extern``: library calls), the columns of
    :data:`KERNEL_FEATURES` (``main_type`` left ``NaN``: the caller codes it) and each kernel's
    main type; ``member_seconds`` holds every op's time (the base is column ``log_base``)."""
    classes = np.asarray(graph.op_classes)
    member_roofline = device.roofline_time(graph.flops, graph.bytes_accessed)
    rows, main_types = [], []
    for members, lib in zip(groups, extern, strict=True):
        idx = np.asarray(members, dtype=np.int64)
        flops = float(graph.flops[idx].sum())
        boundary = boundary_bytes(graph, list(idx))
        main = int(idx[np.argmax(graph.flops[idx])]) if flops > 0 else int(idx[0])
        main_types.append(graph.op_types[main])
        roofline = device.roofline_time(flops, boundary)
        times = member_seconds[idx]
        rows.append(
            [
                len(idx),
                *(float(np.sum(classes[idx] == c)) for c in CLASSES),
                float(lib),
                np.nan,
                np.log(float(times.sum())),
                np.log(float(times.max())),
                np.log1p(flops),
                np.log1p(float(graph.bytes_accessed[idx].sum())),
                np.log1p(boundary),
                np.log1p(float(graph.output_bytes[idx].max())),
                np.log(roofline),
                np.log(float(member_roofline[idx].sum())),
                np.log(device.peak_flops),
                np.log(device.mem_bandwidth),
                np.log(max(device.launch_overhead, 1e-9)),
            ]
        )
    return np.asarray(rows, dtype=np.float64).reshape(len(rows), len(KERNEL_FEATURES)), main_types


def op_indices(graph: CompGraph, profile: KernelProfile) -> list[list[int]]:
    """``profile``'s groups as op indices of ``graph`` (the graph of the same model).

    Raises:
        ValueError: a group names an op the graph does not hold.
    """
    index = {n: i for i, n in enumerate(graph.op_names)}
    missing = [n for g in profile.groups for n in g if n not in index]
    if missing:
        raise ValueError(
            f"kernel profile {profile.name!r} names ops graph {graph.name!r} does not hold "
            f"(first: {missing[:3]}); measure both from the same model"
        )
    return [[index[n] for n in g] for g in profile.groups]


def member_times(graph: CompGraph, device: Device) -> np.ndarray:
    """Every op's time on ``device`` as the simulator prices it unfused (rule 3 of
    :mod:`graphopt.sim`: its measured time for the device's kind where there is one, else the
    device's roofline with its efficiency table), read from the simulator's prepared graph."""
    one = Cluster(device.name, (device,), np.zeros((1, 1)), np.zeros((1, 1)))
    return PreparedGraph(graph, one).op_time[:, 0]


@dataclass
class KernelModel:
    """A fitted kernel model (:func:`fit_kernel_model`); :meth:`predict` gives seconds."""

    booster: Any
    types: list[str]  # the main types seen in training; others are coded as unseen

    def predict(
        self,
        graph: CompGraph,
        groups: Sequence[Sequence[int]],
        extern: Sequence[bool],
        device: Device,
        member_seconds: np.ndarray,
    ) -> np.ndarray:
        """Each kernel's predicted time on ``device``, seconds, from its members' times
        ``member_seconds`` (one per op of ``graph``)."""
        x, main = kernel_features(graph, groups, extern, device, member_seconds)
        code = {t: i for i, t in enumerate(self.types)}
        x[:, KERNEL_FEATURES.index("main_type")] = [code.get(t, len(self.types)) for t in main]
        return np.exp(x[:, KERNEL_FEATURES.index("log_base")] + self.booster.predict(x))


def fit_kernel_model(
    samples: Sequence[tuple[CompGraph, KernelProfile]], device: Device, *, rounds: int = 300
) -> KernelModel:
    """Fit a :class:`KernelModel` on measured kernels: each sample a graph and the kernel profile
    of the same model measured on ``device``'s kind; the members' times are
    :func:`member_times` (the graph's measured eager op times).

    Raises:
        ValueError: no samples, or a profile that does not match its graph (:func:`op_indices`).
    """
    import lightgbm as lgb

    if not samples:
        raise ValueError("fit_kernel_model needs at least one measured kernel profile")
    blocks: list[np.ndarray] = []
    mains: list[str] = []
    targets: list[np.ndarray] = []
    weights: list[np.ndarray] = []
    for graph, profile in samples:
        groups = op_indices(graph, profile)
        x, main = kernel_features(
            graph, groups, profile.extern, device, member_times(graph, device)
        )
        seconds = np.asarray(profile.seconds, dtype=np.float64)
        keep = seconds > 0
        base = np.exp(x[:, KERNEL_FEATURES.index("log_base")])
        blocks.append(x[keep])
        mains.extend(t for t, k in zip(main, keep, strict=True) if k)
        targets.append(np.log(seconds[keep] / base[keep]))
        weights.append(np.sqrt(seconds[keep]))
    types = sorted(set(mains))
    code = {t: i for i, t in enumerate(types)}
    x = np.concatenate(blocks)
    x[:, KERNEL_FEATURES.index("main_type")] = [code[t] for t in mains]
    data = lgb.Dataset(
        x,
        label=np.concatenate(targets),
        weight=np.concatenate(weights),
        feature_name=list(KERNEL_FEATURES),
        categorical_feature=["main_type"],
        free_raw_data=False,
    )
    params = {**PARAMS, "min_data_in_leaf": 5}
    booster = lgb.train(params, data, num_boost_round=rounds)
    return KernelModel(booster, types)
