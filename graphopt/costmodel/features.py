"""Per-op input features of the learned cost model for graphopt graphs and decisions.

Two kinds of features reach the model (see :mod:`graphopt.costmodel.model`):

- **static** op features, one row per op, fixed for a graph on a cluster: the 13 columns of
  :data:`graphopt.encoding.OP_FEATURES` (FLOPs, bytes, op time, degrees, position, ...), the same ones
  the policy sees, and the op-type id of :func:`graphopt.encoding.op_type_id`;
- **decision** features, one row per op and per decision (:data:`DECISION_FEATURES`): the device
  the op runs on, how long it takes there, how loaded that device is, its priority and fusion bit,
  and how many bytes and seconds of transfers the placement puts on its edges.

and, once per decision, a few **summary** features (:data:`SUMMARY_FEATURES`): the load of the
busiest device, the spread of the loads, the total transfer time, the critical path with the
placement's op times and transfer times (no contention), the length of a list schedule in
topological order (:func:`graphopt.sim.estimate.path_lengths`), and the length of a contention-aware insertion
schedule (:func:`graphopt.sim.estimate.contention_schedule`) -- the quantities a step time is made of, which a sum or
mean over ops cannot express (a maximum over devices or paths).

The per-op features are computed for a whole batch of decisions at once with ``numpy`` (``O(B
(N + E))``, no Python loop over ops); the critical path and the list schedule come from one
``numba`` sweep over ops in topological order, the insertion schedule from a second one.
``tests/graphopt/costmodel/test_features.py`` holds the per-op twins.
"""

from __future__ import annotations

import numpy as np

from graphopt.encoding import MAX_DEVICES, OP_FEATURES, encode, op_type_id
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim.estimate import INSERTION_WINDOW, PlacementEstimate, estimate_links, path_lengths
from graphopt.sim.links import transfer_times_by_inverse
from graphopt.typing import IntArray

NUM_OPCODES = 512
"""Size of the op-type vocabulary (ids as in :func:`graphopt.encoding.op_type_id`, 0 unused)."""

STATIC_FEATURES = tuple(name for name, _ in OP_FEATURES)

DECISION_FEATURES = (
    *(f"device_{d}" for d in range(MAX_DEVICES)),  # one-hot of the op's device
    "log_time",  # log10(1 + op time on its device in µs) / 7
    "time_share",  # op time on its device / mean fastest op time of the graph
    "device_load",  # total op time on the op's device / total fastest op time of the graph
    "priority",  # priority level / the decision's highest level (0 when all are 0)
    "fused",  # the op's fusion bit
    "cross_in_bytes",  # log10(1 + bytes arriving from other devices) / 10
    "cross_out_bytes",  # log10(1 + bytes sent to other devices) / 10
    "cross_in_share",  # fraction of in-edges that cross devices
    "cross_in_time",  # seconds of transfers into the op / mean fastest op time of the graph
)
"""Names of the decision-feature columns, in order."""


SUMMARY_FEATURES = (
    "max_load",  # busiest device's total op time / total fastest op time
    "load_spread",  # standard deviation of the device loads / mean device load
    "transfer_time",  # total seconds of cross-device transfers / total fastest op time
    "critical_path",  # longest path with op times on their devices and transfers / total
    "log_critical_path",  # log10 of the critical path in µs / 7
    "log_max_load",  # log10 of the busiest device's time in µs / 7
    "max_link_load",  # busiest directed link's transfer seconds / total fastest op time
    "analytic",  # max(max_load, critical_path, max_link_load): a no-contention estimate
    "list_schedule",  # schedule length of a list schedule in topological order / total
    "log_list_schedule",  # log10 of it in µs / 7
    "contention_schedule",  # insertion schedule with link contention (contention_schedule) / total
    "log_contention_schedule",  # log10 of it in µs / 7
)
"""Names of the per-decision summary columns, in order."""

PRIOR = "log_contention_schedule"
"""The summary column whose log the network's output is added to (``NetLayout.prior_column``,
decoded to seconds by :func:`graphopt.costmodel.model.log_seconds`): the contention-aware
insertion schedule, an analytic estimate that ignores memory, priorities,
fusion and the simulator's dynamic dispatch; the network learns a correction to it."""


def encode_seconds(seconds: np.ndarray) -> np.ndarray:
    """``log10(1 + microseconds) / 7``: the log-scale encoding of times among the features (about
    1 at 10 s); :func:`graphopt.costmodel.model.log_seconds` decodes it."""
    return np.log10(1 + seconds * 1e6) / 7


def static_features(graph: CompGraph, cluster: Cluster) -> tuple[np.ndarray, IntArray]:
    """``(node_feat (N, 13) float32, opcode (N,) int64)`` of ``graph`` on ``cluster``."""
    n = graph.num_ops
    enc = encode(graph, cluster, max_ops=max(n, 1), max_edges=max(graph.num_edges, 1))
    feat = np.array(enc.observation["op_features"][:n], dtype=np.float32)
    ids = {t: op_type_id(t) for t in set(graph.op_types)}
    opcode = np.array([ids[t] for t in graph.op_types], dtype=np.int64)
    return feat, opcode


class DecisionFeaturizer:
    """Turns batches of decisions on one (graph, cluster) into ``(B, N, F)`` feature arrays.

    Args:
        graph: the graph; ops in topological order.
        cluster: the cluster the decisions place ops on (at most ``MAX_DEVICES`` devices).

    Raises:
        ValueError: a cluster with more than ``MAX_DEVICES`` devices.
    """

    def __init__(self, graph: CompGraph, cluster: Cluster) -> None:
        if cluster.num_devices > MAX_DEVICES:
            raise ValueError(
                f"cluster {cluster.name!r} has {cluster.num_devices} devices; the learned cost "
                f"model supports at most {MAX_DEVICES}"
            )
        self.graph = graph
        self.cluster = cluster
        self.estimate = PlacementEstimate(graph, cluster, INSERTION_WINDOW)
        self.op_time = self.estimate.op_time  # (N, D) s
        self.total = max(float(self.op_time.min(axis=1).sum()), 1e-12)
        self.mean = self.total / max(graph.num_ops, 1)
        self.src = np.asarray(graph.edge_src, dtype=np.int64)
        self.dst = np.asarray(graph.edge_dst, dtype=np.int64)
        self.nbytes = np.asarray(graph.edge_bytes, dtype=np.float64)
        self.in_degree = np.bincount(self.dst, minlength=graph.num_ops)
        # per-edge prices on the cluster's route (two hops under via-host, one figure)
        self.latency, self.inv_bw = estimate_links(cluster, route=None)
        self.pred_ptr, self.pred_src, self.pred_edge = graph.predecessors_csr
        self.succ_ptr, self.succ_dst = graph.successors_csr

    @property
    def num_features(self) -> int:
        return len(DECISION_FEATURES)

    def insertion_schedule(self, placement: IntArray) -> np.ndarray:
        """``(B,)`` seconds: the contention-aware insertion schedule (:func:`contention_schedule`)
        of ``B`` placements ``(B, N)``: the analytic step-time estimate (and the learned model's
        prior)."""
        return self.estimate.schedule(placement)

    def summary(self, placement: IntArray) -> np.ndarray:
        """``(B, len(SUMMARY_FEATURES))`` float32 summary of ``B`` placements ``(B, N)``."""
        place = np.ascontiguousarray(placement, dtype=np.int64)
        b, n = place.shape
        d = self.cluster.num_devices
        t = self.op_time[np.arange(n)[None, :], place]
        rows = np.arange(b)[:, None]
        load = np.bincount(
            (rows * d + place).reshape(-1), weights=t.reshape(-1), minlength=b * d
        ).reshape(b, d)
        if self.src.size:
            ps, pd = place[:, self.src], place[:, self.dst]
            comm = transfer_times_by_inverse(
                self.latency, self.inv_bw, ps, pd, self.nbytes[None, :]
            )
            transfer = comm.sum(axis=1)
            link_index = ((rows * d + ps) * d + pd).reshape(-1)
            links = np.bincount(link_index, weights=comm.reshape(-1), minlength=b * d * d)
            link_load = links.reshape(b, d * d).max(axis=1)
        else:
            transfer = link_load = np.zeros(b)
        lengths = path_lengths(
            place,
            self.op_time,
            self.pred_ptr,
            self.pred_src,
            self.pred_edge,
            self.nbytes,
            self.latency,
            self.inv_bw,
        )
        cp, listed = lengths[:, 0], lengths[:, 1]
        booked = self.insertion_schedule(place)
        mean = np.maximum(load.mean(axis=1), 1e-12)
        out = np.stack(
            [
                load.max(axis=1) / self.total,
                load.std(axis=1) / mean,
                transfer / self.total,
                cp / self.total,
                encode_seconds(cp),
                encode_seconds(load.max(axis=1)),
                link_load / self.total,
                np.maximum.reduce([load.max(axis=1), cp, link_load]) / self.total,
                listed / self.total,
                encode_seconds(listed),
                booked / self.total,
                encode_seconds(booked),
            ],
            axis=1,
        )
        return out.astype(np.float32)

    def __call__(
        self,
        placement: IntArray | None,
        priority: IntArray | None = None,
        fusion: IntArray | None = None,
    ) -> np.ndarray:
        """Features of ``B`` decisions, each argument ``(B, N)`` (``None``: all zero).

        Returns:
            ``(B, N, len(DECISION_FEATURES))`` float32.
        """
        given = [a for a in (placement, priority, fusion) if a is not None]
        if not given:
            raise ValueError("pass at least one of placement, priority, fusion")
        b = np.asarray(given[0]).shape[0]
        n, d = self.graph.num_ops, self.cluster.num_devices
        zeros = np.zeros((b, n), dtype=np.int64)
        place = zeros if placement is None else np.asarray(placement, dtype=np.int64)
        prio = zeros if priority is None else np.asarray(priority, dtype=np.int64)
        fuse = zeros if fusion is None else np.asarray(fusion, dtype=np.int64)
        for name, arr in (("placement", place), ("priority", prio), ("fusion", fuse)):
            if arr.shape != (b, n):
                raise ValueError(f"{name} has shape {arr.shape}; expected ({b}, {n})")
        if place.size and (place.min() < 0 or place.max() >= d):
            raise ValueError(
                f"placement entries must lie in [0, {d}) for cluster {self.cluster.name!r}"
            )

        out = np.zeros((b, n, len(DECISION_FEATURES)), dtype=np.float32)
        rows = np.arange(b)[:, None]
        out[rows, np.arange(n)[None, :], place] = 1.0  # one-hot device
        col = MAX_DEVICES
        t = self.op_time[np.arange(n)[None, :], place]  # (B, N) seconds
        out[..., col] = encode_seconds(t)
        out[..., col + 1] = t / self.mean
        flat = (rows * d + place).reshape(-1)
        load = np.bincount(flat, weights=t.reshape(-1), minlength=b * d).reshape(b, d)
        out[..., col + 2] = np.take_along_axis(load, place, axis=1) / self.total
        top = prio.max(axis=1, keepdims=True) if n else np.zeros((b, 1))
        out[..., col + 3] = prio / np.maximum(top, 1)
        out[..., col + 4] = fuse
        if self.src.size:
            ps, pd = place[:, self.src], place[:, self.dst]  # (B, E)
            cross = ps != pd
            cbytes = np.where(cross, self.nbytes[None, :], 0.0)
            seconds = transfer_times_by_inverse(
                self.latency, self.inv_bw, ps, pd, self.nbytes[None, :]
            )
            at_dst = (rows * n + self.dst[None, :]).reshape(-1)
            at_src = (rows * n + self.src[None, :]).reshape(-1)

            def per_op(index: np.ndarray, weights: np.ndarray) -> np.ndarray:
                return np.bincount(index, weights=weights.reshape(-1), minlength=b * n).reshape(
                    b, n
                )

            out[..., col + 5] = np.log10(1 + per_op(at_dst, cbytes)) / 10
            out[..., col + 6] = np.log10(1 + per_op(at_src, cbytes)) / 10
            out[..., col + 7] = per_op(at_dst, cross.astype(np.float64)) / np.maximum(
                self.in_degree, 1
            )
            out[..., col + 8] = per_op(at_dst, seconds) / self.mean
        return out
