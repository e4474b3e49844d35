"""A trained cost network as a :class:`graphopt.typing.CostModel`: a drop-in reward source.

``LearnedCostModel.load("runs/costmodel/NAME_0/model.pt")`` can be passed as ``cost_model=`` to
any environment (and to ``graphopt train --cost-model``). What it reports for a decision:

- ``step_time``: ``exp`` of the network's predicted log step time (seconds, when the network was
  trained on simulator step times);
- ``busy_time``: per device, the sum of its ops' times (exact for unfused ops; fused kernels in
  the simulator save launch overheads);
- ``peak_memory``: per device, the parameter bytes of its ops: a lower bound of the simulator's
  peak (activations are not predicted); above a device's capacity the decision is invalid (OOM);
- ``bytes_moved``: the simulator's rule 5 exactly: each output sent once per remote device that
  consumes it, sized by the largest edge to that device.

What it does not do: detect out-of-memory decisions caused by activations, and detect illegal
fusion (a fusion that creates a cycle between kernels); the network's prediction for such a
decision is whatever it extrapolates. Check a policy trained on learned rewards with the
simulator (``graphopt eval`` always does).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from cachetools import LRUCache

from graphopt import rundir
from graphopt.costmodel.data import from_decisions
from graphopt.costmodel.features import (
    DECISION_FEATURES,
    PRIOR,
    STATIC_FEATURES,
    SUMMARY_FEATURES,
    DecisionFeaturizer,
)
from graphopt.costmodel.fit import GraphTensors, load_checkpoint
from graphopt.costmodel.model import CostNet
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim.estimate import device_param_bytes
from graphopt.typing import Decision, IntArray, Measurement

EXPECTED_FEATURES = {
    "kind": "graphopt",
    "node_features": len(STATIC_FEATURES),
    "config_features": len(DECISION_FEATURES),
    "summary_features": len(SUMMARY_FEATURES),
    "static_names": list(STATIC_FEATURES),
    "decision_names": list(DECISION_FEATURES),
    "summary_names": list(SUMMARY_FEATURES),
    "prior_column": SUMMARY_FEATURES.index(PRIOR),
}


@dataclass
class _Prepared:
    featurizer: DecisionFeaturizer
    tensors: GraphTensors
    static: torch.Tensor
    param_bytes: np.ndarray


class LearnedCostModel:
    """Prices decisions with a trained :class:`CostNet` (see the module docstring).

    Args:
        net: a network trained on graphopt decisions (``kind == "graphopt"``).
        max_batch_nodes: nodes per forward pass in :meth:`evaluate_batch` (memory bound).
        cache_size: prepared (graph, cluster) pairs kept.
    """

    def __init__(
        self, net: CostNet, max_batch_nodes: int = 2_000_000, cache_size: int = 64
    ) -> None:
        self.net = net.eval()
        self.max_batch_nodes = max_batch_nodes
        self.cache_size = cache_size
        self._cache: LRUCache[tuple[str, str], _Prepared] = LRUCache(maxsize=cache_size)

    @classmethod
    def load(cls, path: str | Path, **kwargs: int) -> LearnedCostModel:
        """Load a checkpoint (a ``model.pt`` file or a cost-model run directory).

        Raises:
            ValueError: no checkpoint there, or one trained on another feature layout (e.g. on
                TpuGraphs layouts, which cannot price graphopt decisions).
        """
        net, _ = load_checkpoint(rundir.resolve_cost_model(path), expect=EXPECTED_FEATURES)
        return cls(net, **kwargs)

    def _prepare(self, graph: CompGraph, cluster: Cluster) -> _Prepared:
        key = (graph.fingerprint, cluster.fingerprint)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        empty = np.zeros((0, graph.num_ops), dtype=np.int64)
        samples = from_decisions(graph, cluster, empty, empty, empty, np.zeros(0))
        tensors = GraphTensors.of(samples)
        with torch.no_grad():
            static = self.net.static(tensors.node_feat, tensors.opcode)
        assert samples.cluster is not None
        prepared = _Prepared(
            samples.configs.featurizer,  # type: ignore[attr-defined]
            tensors,
            static,
            np.asarray(graph.param_bytes, dtype=np.float64),
        )
        self._cache[key] = prepared
        return prepared

    def predict_batch(
        self,
        graph: CompGraph,
        cluster: Cluster,
        placements: IntArray,
        priorities: IntArray | None = None,
        fusions: IntArray | None = None,
    ) -> np.ndarray:
        """``(B,)`` predicted step times (seconds) of ``B`` decisions given as ``(B, N)`` arrays."""
        p = self._prepare(graph, cluster)
        placements = np.atleast_2d(np.asarray(placements, dtype=np.int64))
        b, n = placements.shape
        step = max(1, self.max_batch_nodes // max(n, 1))
        out = []
        with torch.no_grad():
            for lo in range(0, b, step):
                sl = slice(lo, min(lo + step, b))
                feat = p.featurizer(
                    placements[sl],
                    None if priorities is None else np.asarray(priorities)[sl],
                    None if fusions is None else np.asarray(fusions)[sl],
                )
                t = p.tensors
                total = self.net.segment_sum(
                    p.static, t.edges, t.config_node_ids, torch.as_tensor(feat)
                )
                summary = torch.as_tensor(p.featurizer.summary(placements[sl]))
                out.append(torch.exp(self.net.head(total, n, summary)).double().numpy())
        return np.concatenate(out) if out else np.zeros(0)

    def evaluate(self, graph: CompGraph, cluster: Cluster, decision: Decision) -> Measurement:
        """The :class:`Measurement` of one decision (see the module docstring for each field)."""
        n, d = graph.num_ops, cluster.num_devices
        zeros = np.zeros(n, dtype=np.int64)
        place = zeros if decision.placement is None else np.asarray(decision.placement, np.int64)
        prio = zeros if decision.priority is None else np.asarray(decision.priority, np.int64)
        fuse = zeros if decision.fusion is None else np.asarray(decision.fusion, np.int64)
        for name, arr in (("placement", place), ("priority", prio), ("fusion", fuse)):
            if arr.shape != (n,):
                raise ValueError(
                    f"{name} has shape {arr.shape}; expected ({n},) for graph {graph.name!r}"
                )
        p = self._prepare(graph, cluster)
        step = float(self.predict_batch(graph, cluster, place[None], prio[None], fuse[None])[0])
        times = p.featurizer.op_time[np.arange(n), place]
        busy = np.bincount(place, weights=times, minlength=d).astype(np.float64)
        params = device_param_bytes(place[None], p.param_bytes, d)[0]
        over = np.flatnonzero(params > cluster.memory)
        valid = over.size == 0
        reason = ""
        if not valid:
            k = int(over[0])
            reason = (
                f"OOM on device {k} ({cluster.devices[k].name}): parameters alone take "
                f"{params[k] / 2**30:.2f} GiB of {cluster.memory[k] / 2**30:.2f} GiB"
            )
        return Measurement(
            step_time=step,
            busy_time=busy,
            peak_memory=params,
            bytes_moved=_bytes_moved(graph, place, d),
            valid=valid,
            reason=reason,
        )


def _bytes_moved(graph: CompGraph, place: IntArray, num_devices: int) -> float:
    """Simulator rule 5: each output sent once per remote consumer device, largest edge size."""
    src, dst = np.asarray(graph.edge_src), np.asarray(graph.edge_dst)
    cross = place[src] != place[dst]
    if not cross.any():
        return 0.0
    key = src[cross] * num_devices + place[dst[cross]]
    nbytes = np.asarray(graph.edge_bytes, dtype=np.float64)[cross]
    order = np.lexsort((-nbytes, key))
    first = np.ones(order.size, dtype=bool)
    first[1:] = key[order][1:] != key[order][:-1]
    return float(nbytes[order][first].sum())
