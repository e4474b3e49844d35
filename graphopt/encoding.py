"""Fixed-shape observations of a (graph, cluster) pair, padded to ``max_ops`` / ``max_edges``.

Every array has a fixed shape so that any Gymnasium agent can consume it. Padding values never
collide with real values: real op and edge features are ``>= 0`` and padded with ``-1``; real op
types are ``>= 1`` and padded with ``0``; edge endpoints are ``>= 0`` and padded with ``-1``.

==================  ===========================  =================================================
key                 shape, dtype                 content
==================  ===========================  =================================================
``op_features``     (max_ops, 13) float32        per op, see :data:`OP_FEATURES`; padding -1
``op_type``         (max_ops,) int64             op-type id in ``[1, NUM_OP_TYPES)``; padding 0
``op_mask``         (max_ops,) int8              1 for a real op, 0 for padding
``edge_index``      (2, max_edges) int64         ``[producer, consumer]`` op indices; padding -1
``edge_features``   (max_edges, 1) float32       ``log10(1 + bytes) / 10``; padding -1
``device_features`` (MAX_DEVICES, 5) float32     per device, see :data:`DEVICE_FEATURES`; pad -1
``device_mask``     (MAX_DEVICES,) int8          1 for a real device
``graph_features``  (8,) float32                 see :data:`GRAPH_FEATURES`
``counts``          (2,) int64                   ``[num_ops, num_edges]``
==================  ===========================  =================================================

Op-type ids: ``1 + crc32(type) mod (NUM_OP_TYPES - 1)``, stable across runs and machines; distinct
types may share an id (the policy also sees each op's costs).

Memory per observation (:func:`observation_bytes`): 61 bytes per op slot plus 20 bytes per edge
slot, plus a few hundred bytes; at the default ``max_edges = 4 * max_ops`` that is about 141 bytes
per op slot: 2.8 MB at ``max_ops = 20,000``, so a PPO rollout of 2,048 such samples takes about
5.8 GB (SB3 stores observations as float32, the same size). For graphs too large to keep thousands
of copies in a rollout buffer, the environments offer ``obs_mode="id"``: the observation is then
only the graph's index in the environment's graph list, and the policy reads the encoding once per
distinct graph from :meth:`envs.one_shot.GraphOptEnv.encoded_graphs` (memory bounded by the number of
distinct graphs, not the number of samples).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
from gymnasium import spaces

from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim import PreparedGraph
from graphopt.typing import Decision, FloatArray

NUM_OP_TYPES = 512
MAX_DEVICES = 16
MAX_OPS = 2**20
"""The most op slots an encoding has (1,048,576: about 148 MB an observation at the default edge
slots); a larger ``max_ops`` is refused before anything is allocated."""
MAX_EDGES = 8 * MAX_OPS
"""The most edge slots an encoding has (twice the default ``4 * max_ops`` at :data:`MAX_OPS`)."""

OP_FEATURES = (
    ("flops", "log10(1 + FLOPs) / 13"),
    ("bytes", "log10(1 + bytes accessed) / 10"),
    ("output_bytes", "log10(1 + output bytes) / 10"),
    ("param_bytes", "log10(1 + parameter bytes) / 10"),
    ("fastest_time", "log10(1 + fastest op time over devices in µs) / 7"),
    ("time_spread", "log10(slowest / fastest op time over devices) / 3"),
    ("in_degree", "log2(1 + in-degree) / 8"),
    ("out_degree", "log2(1 + out-degree) / 8"),
    ("position", "topological index / (N - 1)"),
    ("depth", "longest path (in ops) from a source / max over ops"),
    ("in_bytes", "log10(1 + bytes on in-edges) / 10"),
    ("out_bytes", "log10(1 + bytes on out-edges) / 10"),
    ("measured", "1 if the op has a measured time for a device kind of the cluster"),
)
DEVICE_FEATURES = (
    ("peak_flops", "log10(peak FLOP/s) / 15"),
    ("mem_bandwidth", "log10(bytes/s) / 12"),
    ("memory", "log10(bytes) / 11"),
    ("launch_overhead", "launch overhead in µs / 10"),
    ("mean_out_bandwidth", "log10(mean bandwidth of links leaving the device) / 12"),
)
GRAPH_FEATURES = (
    ("num_devices", "devices / 16"),
    ("num_ops", "log10(ops) / 5"),
    ("total_flops", "log10(1 + FLOPs) / 15"),
    ("total_params", "log10(1 + parameter bytes) / 11"),
    ("mean_link_bandwidth", "log10(mean link bytes/s) / 12"),
    ("mean_link_latency", "mean link latency in µs / 10"),
    ("compute_to_comm", "log10(mean op time / mean edge transfer time) / 3"),
    ("heterogeneous", "1 if the devices are of more than one kind"),
)


def op_type_id(op_type: str) -> int:
    """Stable id in ``[1, NUM_OP_TYPES)`` for an op-type name."""
    return 1 + zlib.crc32(op_type.encode()) % (NUM_OP_TYPES - 1)


def check_sizes(max_ops: int, max_edges: int) -> None:
    """Refuse padding sizes outside ``0..MAX_OPS`` op slots and ``0..MAX_EDGES`` edge slots.

    Raises:
        ValueError: naming the size, the bound and the fix.
    """
    if not 0 <= max_ops <= MAX_OPS:
        raise ValueError(
            f"max_ops {max_ops:,} is outside 0..{MAX_OPS:,} (graphopt.encoding.MAX_OPS); give a "
            "max_ops of at least the largest graph's op count, at most that bound"
        )
    if not 0 <= max_edges <= MAX_EDGES:
        raise ValueError(
            f"max_edges {max_edges:,} is outside 0..{MAX_EDGES:,} (graphopt.encoding.MAX_EDGES); "
            "choose graphs with fewer edges"
        )


def observation_space(max_ops: int, max_edges: int) -> spaces.Dict:
    """The Gymnasium space of :func:`encode` for these sizes.

    Raises:
        ValueError: sizes beyond :data:`MAX_OPS` or :data:`MAX_EDGES` (:func:`check_sizes`).
    """
    check_sizes(max_ops, max_edges)
    f32 = np.float32
    return spaces.Dict(
        {
            "op_features": spaces.Box(-1.0, np.inf, (max_ops, len(OP_FEATURES)), f32),
            "op_type": spaces.Box(0, NUM_OP_TYPES - 1, (max_ops,), np.int64),
            "op_mask": spaces.Box(0, 1, (max_ops,), np.int8),
            "edge_index": spaces.Box(-1, max_ops - 1, (2, max_edges), np.int64),
            "edge_features": spaces.Box(-1.0, np.inf, (max_edges, 1), f32),
            "device_features": spaces.Box(-1.0, np.inf, (MAX_DEVICES, len(DEVICE_FEATURES)), f32),
            "device_mask": spaces.Box(0, 1, (MAX_DEVICES,), np.int8),
            "graph_features": spaces.Box(-np.inf, np.inf, (len(GRAPH_FEATURES),), f32),
            "counts": spaces.Box(0, max(max_ops, max_edges), (2,), np.int64),
        }
    )


def observation_bytes(max_ops: int, max_edges: int) -> int:
    """Bytes of one observation of these sizes."""
    space = observation_space(max_ops, max_edges)
    return sum(
        int(np.prod(s.shape or ())) * np.dtype(s.dtype).itemsize for s in space.spaces.values()
    )


@dataclass(frozen=True)
class EncodedGraph:
    """A graph's observation arrays (read-only) and the facts the environment needs."""

    graph: CompGraph
    observation: dict[str, np.ndarray]


def encode(graph: CompGraph, cluster: Cluster, max_ops: int, max_edges: int) -> EncodedGraph:
    """Encode ``graph`` on ``cluster`` as padded arrays (see the module docstring).

    Raises:
        ValueError: the graph has more ops than ``max_ops`` or more edges than ``max_edges``, or
            the cluster more than ``MAX_DEVICES`` devices; sizes beyond :data:`MAX_OPS` or
            :data:`MAX_EDGES` (:func:`check_sizes`).
    """
    n, e, d = graph.num_ops, graph.num_edges, cluster.num_devices
    check_sizes(max_ops, max_edges)
    if n > max_ops:
        raise ValueError(
            f"graph {graph.name!r} has {n:,} ops but max_ops is {max_ops:,}; "
            f"pass max_ops >= {n} (or choose smaller graphs)"
        )
    if e > max_edges:
        raise ValueError(
            f"graph {graph.name!r} has {e:,} edges but max_edges is {max_edges:,}; "
            f"pass max_edges >= {e}"
        )
    if d > MAX_DEVICES:
        raise ValueError(
            f"cluster {cluster.name!r} has {d} devices; at most {MAX_DEVICES} are supported"
        )

    times = PreparedGraph(graph, cluster).op_time
    fastest = times.min(axis=1) if n else np.zeros(0)
    slowest = times.max(axis=1) if n else np.zeros(0)
    indeg = np.bincount(graph.edge_dst, minlength=n)
    outdeg = np.bincount(graph.edge_src, minlength=n)
    in_bytes = np.bincount(graph.edge_dst, weights=graph.edge_bytes, minlength=n)
    out_bytes = np.bincount(graph.edge_src, weights=graph.edge_bytes, minlength=n)
    depth = _depth(graph)
    kinds = set(cluster.kinds)
    measured = np.zeros(n)
    for kind, values in graph.measured.items():
        if kind in kinds:
            measured = np.maximum(measured, ~np.isnan(values))

    feats = np.full((max_ops, len(OP_FEATURES)), -1.0, dtype=np.float32)
    if n:
        cols = [
            np.log10(1 + graph.flops) / 13,
            np.log10(1 + graph.bytes_accessed) / 10,
            np.log10(1 + graph.output_bytes) / 10,
            np.log10(1 + graph.param_bytes) / 10,
            np.log10(1 + fastest * 1e6) / 7,
            np.log10(np.maximum(slowest, 1e-12) / np.maximum(fastest, 1e-12)) / 3,
            np.log2(1 + indeg) / 8,
            np.log2(1 + outdeg) / 8,
            np.arange(n) / max(n - 1, 1),
            depth / max(int(depth.max()), 1),
            np.log10(1 + in_bytes) / 10,
            np.log10(1 + out_bytes) / 10,
            measured,
        ]
        feats[:n] = np.stack(cols, axis=1)
    op_type = np.zeros(max_ops, dtype=np.int64)
    ids = {t: op_type_id(t) for t in set(graph.op_types)}
    op_type[:n] = [ids[t] for t in graph.op_types]
    op_mask = np.zeros(max_ops, dtype=np.int8)
    op_mask[:n] = 1
    edge_index = np.full((2, max_edges), -1, dtype=np.int64)
    edge_index[0, :e] = graph.edge_src
    edge_index[1, :e] = graph.edge_dst
    edge_feats = np.full((max_edges, 1), -1.0, dtype=np.float32)
    edge_feats[:e, 0] = np.log10(1 + graph.edge_bytes) / 10

    off = ~np.eye(d, dtype=bool)
    bw = np.where(off, cluster.bandwidth, np.nan)
    out_bw = np.nanmean(bw, axis=1) if d > 1 else np.full(d, 1e12)
    dev = np.full((MAX_DEVICES, len(DEVICE_FEATURES)), -1.0, dtype=np.float32)
    dev[:d] = np.stack(
        [
            np.log10(cluster.peak_flops) / 15,
            np.log10(cluster.mem_bandwidth) / 12,
            np.log10(cluster.memory) / 11,
            cluster.launch_overhead * 1e6 / 10,
            np.log10(out_bw) / 12,
        ],
        axis=1,
    )
    dev_mask = np.zeros(MAX_DEVICES, dtype=np.int8)
    dev_mask[:d] = 1
    mean_bw = float(np.mean(cluster.bandwidth[off])) if d > 1 else 1e12
    mean_lat = float(np.mean(cluster.latency[off])) if d > 1 else 0.0
    mean_time = float(fastest.mean()) if n else 0.0
    mean_edge = float(graph.edge_bytes.mean()) / mean_bw + mean_lat if e else 0.0
    ratio = np.log10(max(mean_time, 1e-12) / max(mean_edge, 1e-12)) / 3 if e and n else 0.0
    graph_feats = np.array(
        [
            d / 16,
            np.log10(max(n, 1)) / 5,
            np.log10(1 + graph.flops.sum()) / 15,
            np.log10(1 + graph.param_bytes.sum()) / 11,
            np.log10(mean_bw) / 12,
            mean_lat * 1e6 / 10,
            ratio,
            float(len(kinds) > 1),
        ],
        dtype=np.float32,
    )
    obs: dict[str, np.ndarray] = {
        "op_features": feats,
        "op_type": op_type,
        "op_mask": op_mask,
        "edge_index": edge_index,
        "edge_features": edge_feats,
        "device_features": dev,
        "device_mask": dev_mask,
        "graph_features": graph_feats,
        "counts": np.array([n, e], dtype=np.int64),
    }
    for arr in obs.values():
        arr.setflags(write=False)
    return EncodedGraph(graph=graph, observation=obs)


def _depth(graph: CompGraph) -> np.ndarray:
    """Longest path, in ops, from any source to each op (ops are in topological order)."""
    depth = np.zeros(graph.num_ops, dtype=np.int64)
    indptr, preds, _ = graph.predecessors_csr
    for i in range(graph.num_ops):
        lo, hi = indptr[i], indptr[i + 1]
        if hi > lo:
            depth[i] = depth[preds[lo:hi]].max() + 1
    return depth


CONTEXT_FEATURES = (
    "critical",  # 1 on the critical path of the reference's schedule
    "slack",  # symlog of its slack, % of the step
    "wait",  # symlog of how long it waited for its device, % of the step
    "transfer",  # symlog of the transfer time of its output, % of the step
    "start",  # its start, as a share of the step
    "duration",  # symlog of its kernel's duration, % of the step
)
"""Per-op features of a decision's simulated schedule (:func:`schedule_context`): what a network
steering a decoder reads of the reference decision it departs from."""


def symlog(x: FloatArray) -> FloatArray:
    """``sign(x) * log(1 + 10 |x|)``: 0.1 -> 0.69, 1 -> 2.4, 100 -> 6.9."""
    return np.sign(x) * np.log1p(10.0 * np.abs(x))


def schedule_context(graph: CompGraph, cluster: Cluster, decision: Decision) -> np.ndarray:
    """``(N, len(CONTEXT_FEATURES))`` float32: the features of :data:`CONTEXT_FEATURES` for every
    op of ``decision``'s simulated schedule (one simulation; zeros for an illegal fusion)."""
    from graphopt.sim.critical import timeline_times

    n = graph.num_ops
    out = np.zeros((n, len(CONTEXT_FEATURES)), dtype=np.float32)
    m, timeline = PreparedGraph(graph, cluster).evaluate_timeline(decision)
    if timeline is None or n == 0 or m.step_time <= 0:
        return out
    placement = decision.filled(n).placement
    assert placement is not None  # filled() sets every array
    t = timeline_times(graph, placement, timeline)
    scale = 100.0 / t.step
    out[:, 0] = t.critical(1e-6)
    out[:, 1] = symlog(t.slack * scale)
    out[:, 2] = symlog(t.wait * scale)
    out[:, 3] = symlog(t.transfer * scale)
    out[:, 4] = t.start / t.step
    out[:, 5] = symlog((t.end - t.start) * scale)
    return out
