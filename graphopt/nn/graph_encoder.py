"""Node embeddings of the ops: op-type embedding + op features, then GraphSAGE (GO, step 1).

Each op ``i`` starts from

.. math::
    \\mathbf{h}_i^{(0)} = \\mathbf{E}[t_i] + \\mathbf{W}_f \\mathbf{x}_i + \\mathbf{b}_f

(``t_i`` its op-type id, ``E`` an embedding table whose row 0, the padding id, stays zero;
``x_i`` its 13 scaled features, :data:`graphopt.encoding.OP_FEATURES`), then goes through ``L``
GraphSAGE layers (Hamilton et al., 2017, ``torch_geometric.nn.SAGEConv``, mean aggregation) over
the edges taken in both directions, each with a residual connection and LayerNorm:

.. math::
    \\mathbf{h}_i^{(l+1)} = \\mathrm{LN}\\Big(\\mathbf{h}_i^{(l)} + \\mathrm{ReLU}\\big(
        \\mathbf{W}_1 \\mathbf{h}_i^{(l)} + \\mathbf{W}_2 \\cdot
        \\mathrm{mean}_{j \\in \\mathcal{N}(i) \\cup \\mathcal{N}^{-1}(i)} \\mathbf{h}_j^{(l)}\\big)\\Big)

so producers see consumers and consumers see producers. A tensor sent to several consumers and
parallel edges count once per edge (as in ``SAGEConv`` with an ``edge_index``).

Performance: the mean over neighbours is one sparse CSR matrix product
(``torch.sparse.mm(adj, h, reduce="mean")``, which ``SAGEConv`` calls when given a sparse
adjacency). The CSR matrix is built once per forward pass (one stable ``argsort`` of the edge
targets) and shared by all layers. On an 86k-op, 309k-directed-edge graph it is ~4x faster than the
gather/scatter path of an ``edge_index`` on two CPU cores. Both give the same result.
"""

from __future__ import annotations

import warnings

import torch
from torch import Tensor, nn
from torch_geometric.nn import SAGEConv

from graphopt.encoding import NUM_OP_TYPES, OP_FEATURES
from graphopt.nn.batching import PackedGraphs


def bidirectional(edge_index: Tensor) -> Tensor:
    """``edge_index`` ``(2, E)`` concatenated with its flip: ``(2, 2E)``."""
    return torch.cat([edge_index, edge_index.flip(0)], dim=1)


def mean_adjacency(
    edge_index: Tensor, num_nodes: int, dtype: torch.dtype = torch.float32
) -> Tensor:
    """Sparse CSR ``(N, N)`` matrix ``A`` with ``A[dst, src] = 1`` per edge (duplicates kept).

    ``torch.sparse.mm(A, h, reduce="mean")`` is then the mean over the in-neighbours of each node
    (zero for a node without any), the aggregation of ``SAGEConv(aggr="mean")``.
    """
    src, dst = edge_index[0], edge_index[1]
    order = torch.argsort(dst, stable=True)
    crow = torch.zeros(num_nodes + 1, dtype=torch.long, device=edge_index.device)
    crow[1:] = torch.cumsum(torch.bincount(dst, minlength=num_nodes), 0)
    values = torch.ones(src.numel(), dtype=dtype, device=edge_index.device)
    with warnings.catch_warnings():  # "sparse CSR support is in beta": it is what SAGEConv uses
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(
            crow, src[order], values, (num_nodes, num_nodes), check_invariants=False
        )


class GraphEncoder(nn.Module):
    """Op-type embedding + feature projection + GraphSAGE layers (residual, LayerNorm).

    Args:
        hidden: width ``d`` of the node embeddings (default 64).
        num_layers: GraphSAGE layers (default 2); 0 keeps the input embedding.
        num_op_types: size of the op-type table (default :data:`graphopt.encoding.NUM_OP_TYPES`).
        num_op_features: op features per op (default 13).
        dropout: dropout on each layer's update (default 0: PPO's ratios prefer a deterministic
            network).

    Shapes:
        - input: a :class:`~graphopt.nn.batching.PackedGraphs` with ``N`` nodes.
        - output: ``(N, d)`` node embeddings.
    """

    def __init__(
        self,
        hidden: int = 64,
        num_layers: int = 2,
        num_op_types: int = NUM_OP_TYPES,
        num_op_features: int = len(OP_FEATURES),
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.type_embedding = nn.Embedding(num_op_types, hidden, padding_idx=0)
        self.feature_proj = nn.Linear(num_op_features, hidden)
        self.convs = nn.ModuleList(SAGEConv(hidden, hidden, aggr="mean") for _ in range(num_layers))
        self.norms = nn.ModuleList(nn.LayerNorm(hidden) for _ in range(num_layers))
        self.dropout = nn.Dropout(dropout)

    def forward(self, packed: PackedGraphs) -> Tensor:
        h = self.type_embedding(packed.op_type) + self.feature_proj(packed.op_features)
        if len(self.convs) == 0 or packed.num_nodes == 0:
            return h
        adj = mean_adjacency(bidirectional(packed.edge_index), packed.num_nodes, h.dtype)
        for conv, norm in zip(self.convs, self.norms, strict=True):
            h = norm(h + self.dropout(torch.relu_(conv(h, adj))))
        return h
