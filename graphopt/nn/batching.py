"""From padded observations to typed tensors, and to one disjoint big graph (PyG-style batch).

The environments (:mod:`graphopt.encoding`) pad every observation to ``max_ops`` op slots and
``max_edges`` edge slots; Stable-Baselines3 stores them as they come or cast to ``float32``. This
module undoes both, without a Python loop over ops or edges:

1. :func:`graph_batch` turns a batch of observations (tensors of any dtype) into a
   :class:`GraphBatch` with proper dtypes (ids and counts as ``int64``, masks as ``bool``).
2. :func:`pack` strips the padding with the counts and concatenates the ``B`` graphs into one
   disjoint graph of ``N = sum_b n_b`` nodes, as ``torch_geometric.data.Batch`` would: graph ``b``
   owns the node ids ``[ptr_b, ptr_b + n_b)`` with ``ptr_b = sum_{c<b} n_c``, and its edges are
   shifted by ``ptr_b``. Padding slots of a graph are always the trailing ones (the encoder writes
   real ops first), so a boolean mask ``arange(L) < n_b`` selects the real ops in order.
3. :func:`to_padded` scatters per-node rows of the packed graph back to a ``(B, L, d)`` tensor with
   ``L = max_b n_b``: the networks never compute on more padding than the batch needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

OBS_KEYS = (
    "op_features",
    "op_type",
    "edge_index",
    "device_features",
    "device_mask",
    "graph_features",
    "counts",
)
"""Observation keys the policy reads (``op_mask``, ``edge_features`` are implied or unused)."""


@dataclass(frozen=True)
class GraphBatch:
    """A batch of ``B`` padded observations as typed tensors.

    Shapes:
        - op_features: ``(B, M, F)`` float32, ``M = max_ops``.
        - op_type: ``(B, M)`` int64.
        - edge_index: ``(B, 2, E)`` int64, ``E = max_edges``.
        - device_features: ``(B, MAX_DEVICES, 5)`` float32.
        - device_mask: ``(B, MAX_DEVICES)`` bool.
        - graph_features: ``(B, 8)`` float32.
        - num_ops, num_edges: ``(B,)`` int64.
    """

    op_features: Tensor
    op_type: Tensor
    edge_index: Tensor
    device_features: Tensor
    device_mask: Tensor
    graph_features: Tensor
    num_ops: Tensor
    num_edges: Tensor
    hint: Tensor | None = None
    """``(B, A)`` int64: the environment's hint (the reference decision laid out as an action,
    ``-1`` where absent), or None when the observations carry no hint."""
    fusion_mask: Tensor | None = None
    """``(B, M)`` bool: the op slots whose fusion bit may be 1 (observation key ``fusion_mask`` of
    the fusion and joint environments), or None."""
    op_context: Tensor | None = None
    """``(B, M, K)`` float32: per-op features of the reference decision's schedule (observation
    key ``op_context`` of the environments with a decoder, :func:`envs.one_shot.schedule_context`),
    or None."""

    @property
    def size(self) -> int:
        """Number of graphs ``B``."""
        return int(self.num_ops.shape[0])

    @property
    def max_ops(self) -> int:
        """Number of op slots ``M`` of the observations."""
        return int(self.op_features.shape[1])

    def select(self, index: Tensor) -> GraphBatch:
        """The sub-batch of graphs ``index`` (``(G,)`` int64)."""
        return GraphBatch(
            **{  # type: ignore[arg-type]
                k: None if getattr(self, k) is None else getattr(self, k)[index]
                for k in self.__dataclass_fields__
            }
        )

    @staticmethod
    def cat(batches: list[GraphBatch]) -> GraphBatch:
        """Concatenate batches of the same ``max_ops`` / ``max_edges``."""
        return GraphBatch(
            **{  # type: ignore[arg-type]
                k: None
                if getattr(batches[0], k) is None
                else torch.cat([getattr(b, k) for b in batches])
                for k in GraphBatch.__dataclass_fields__
            }
        )


def graph_batch(obs: Mapping[str, Tensor]) -> GraphBatch:
    """Typed :class:`GraphBatch` from a batch of observation tensors (any dtype, e.g. SB3's float32).

    Args:
        obs: the keys of :data:`OBS_KEYS`, each with a leading batch dimension. Float copies of
            integers are exact: ids and counts stay far below ``2**24``.
    """
    missing = [k for k in OBS_KEYS if k not in obs]
    if missing:
        raise ValueError(
            f"observation lacks {missing}; expected the keys of graphopt.encoding.observation_space "
            f"(obs_mode='full'), got {sorted(obs)}"
        )
    counts = obs["counts"].long()
    return GraphBatch(
        op_features=obs["op_features"].float(),
        op_type=obs["op_type"].long(),
        edge_index=obs["edge_index"].long(),
        device_features=obs["device_features"].float(),
        device_mask=obs["device_mask"] > 0.5,
        graph_features=obs["graph_features"].float(),
        num_ops=counts[:, 0],
        num_edges=counts[:, 1],
        hint=obs["hint"].long() if "hint" in obs else None,
        fusion_mask=obs["fusion_mask"] > 0.5 if "fusion_mask" in obs else None,
        op_context=obs["op_context"].float() if "op_context" in obs else None,
    )


def obs_to_tensors(
    obs: Mapping[str, np.ndarray], device: torch.device | str = "cpu"
) -> dict[str, Tensor]:
    """One unbatched numpy observation (``encode(...).observation``) as a batch of one (copied:
    encoded observations are read-only)."""
    return {k: torch.tensor(np.asarray(v), device=device).unsqueeze(0) for k, v in obs.items()}


@dataclass(frozen=True)
class PackedGraphs:
    """``B`` graphs as one disjoint graph (padding removed).

    Shapes:
        - op_features: ``(N, F)``, ``N = sum_b n_b``.
        - op_type: ``(N,)`` int64.
        - edge_index: ``(2, E')`` int64, ``E' = sum_b e_b``, producer -> consumer, node ids of
          the packed graph (directed, as in the observation).
        - batch: ``(N,)`` graph of each node.
        - node_mask: ``(B, L)`` bool, ``L = max_b n_b``: slot ``i`` of graph ``b`` is real.
    """

    op_features: Tensor
    op_type: Tensor
    edge_index: Tensor
    batch: Tensor
    node_mask: Tensor

    @property
    def num_nodes(self) -> int:
        return int(self.op_type.shape[0])

    @property
    def num_graphs(self) -> int:
        return int(self.node_mask.shape[0])


def pack(batch: GraphBatch) -> PackedGraphs:
    """Strip the padding of ``batch`` and concatenate its graphs (vectorised, no loop over ops)."""
    n, e = batch.num_ops, batch.num_edges
    device = n.device
    num_graphs = batch.size
    max_n = int(n.max()) if num_graphs else 0
    max_e = int(e.max()) if num_graphs else 0
    node_mask = torch.arange(max_n, device=device) < n[:, None]  # (B, L)
    op_features = batch.op_features[:, :max_n][node_mask]
    op_type = batch.op_type[:, :max_n][node_mask]
    offsets = torch.cumsum(n, 0) - n  # first node id of each graph
    edge_mask = torch.arange(max_e, device=device) < e[:, None]  # (B, E_max)
    shifted = batch.edge_index[:, :, :max_e] + offsets[:, None, None]  # (B, 2, E_max)
    edge_index = shifted.transpose(0, 1)[:, edge_mask]  # (2, E')
    graph_of_node = torch.repeat_interleave(torch.arange(num_graphs, device=device), n)
    return PackedGraphs(op_features, op_type, edge_index, graph_of_node, node_mask)


def to_padded(x: Tensor, packed: PackedGraphs) -> Tensor:
    """Rows of the packed graph ``(N, d)`` back to ``(B, L, d)``; padding rows are zero."""
    mask = packed.node_mask
    num_graphs, max_n = mask.shape
    flat = torch.nonzero(mask.reshape(-1), as_tuple=False).squeeze(1)
    out = x.new_zeros(num_graphs * max_n, x.shape[-1]).index_copy(0, flat, x)
    return out.view(num_graphs, max_n, x.shape[-1])


def stack_observations(observations: list[Mapping[str, np.ndarray]]) -> dict[str, Tensor]:
    """Unbatched observations of different sizes (each encoded with its own ``max_ops`` and
    ``max_edges``, e.g. unpadded) as one batch: the keys of :data:`OBS_KEYS`, op and edge axes
    padded to the largest (padding: ``-1`` features and endpoints, op type 0, as
    :mod:`graphopt.encoding` pads)."""
    if not observations:
        raise ValueError("stack_observations needs at least one observation")
    most_ops = max(o["op_features"].shape[0] for o in observations)
    most_edges = max(o["edge_index"].shape[1] for o in observations)
    out: dict[str, Tensor] = {}
    for key in OBS_KEYS:
        arrays = [np.asarray(o[key]) for o in observations]
        if key in ("op_features", "op_type"):
            fill = 0 if key == "op_type" else -1
            arrays = [
                np.pad(
                    a, [(0, most_ops - a.shape[0])] + [(0, 0)] * (a.ndim - 1), constant_values=fill
                )
                for a in arrays
            ]
        elif key == "edge_index":
            arrays = [
                np.pad(a, [(0, 0), (0, most_edges - a.shape[1])], constant_values=-1)
                for a in arrays
            ]
        out[key] = torch.from_numpy(np.stack(arrays))
    return out
