"""graphopt.nn.graph_encoder: shapes, PyG equivalence, permutation equivariance, edge cases."""

from __future__ import annotations

import torch

from graphopt.nn.batching import PackedGraphs
from graphopt.nn.graph_encoder import GraphEncoder, bidirectional, mean_adjacency

torch.set_num_threads(1)


def _packed(n: int = 30, e: int = 60, seed: int = 0) -> PackedGraphs:
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, n, (2, e), generator=gen) if n else torch.zeros(2, 0).long()
    return PackedGraphs(
        op_features=torch.rand(n, 13, generator=gen),
        op_type=torch.randint(1, 512, (n,), generator=gen),
        edge_index=edge_index,
        batch=torch.zeros(n, dtype=torch.long),
        node_mask=torch.ones(1, n, dtype=torch.bool),
    )


def _with_edge_index(enc: GraphEncoder, p: PackedGraphs) -> torch.Tensor:
    """Slow twin: PyG's own gather/scatter path with an edge_index instead of the CSR matrix."""
    h = enc.type_embedding(p.op_type) + enc.feature_proj(p.op_features)
    ei = bidirectional(p.edge_index)
    for conv, norm in zip(enc.convs, enc.norms, strict=True):
        h = norm(h + torch.relu(conv(h, ei)))
    return h


def test_shapes_and_padding_embedding():
    enc = GraphEncoder(hidden=16, num_layers=2)
    assert enc(_packed()).shape == (30, 16)
    assert torch.all(enc.type_embedding.weight[0] == 0)  # padding id


def test_csr_aggregation_matches_pyg_edge_index():
    torch.manual_seed(0)
    enc = GraphEncoder(hidden=16, num_layers=3)
    p = _packed(40, 100)
    torch.testing.assert_close(enc(p), _with_edge_index(enc, p), atol=1e-5, rtol=1e-5)


def test_mean_adjacency_is_the_mean_over_neighbours():
    ei = torch.tensor([[0, 0, 1, 2, 2], [1, 2, 2, 0, 0]])  # parallel edges 2->0 count twice
    adj = mean_adjacency(ei, 4)
    x = torch.tensor([[1.0], [10.0], [100.0], [1000.0]])
    out = torch.sparse.mm(adj, x, "mean")
    assert out.squeeze(1).tolist() == [100.0, 1.0, 5.5, 0.0]


def test_gradients_flow():
    enc = GraphEncoder(hidden=8)
    enc(_packed()).sum().backward()
    assert all(p.grad is not None for p in enc.parameters())


def test_permutation_equivariance():
    torch.manual_seed(0)
    enc = GraphEncoder(hidden=16, num_layers=2).eval()
    p = _packed(25, 50)
    perm = torch.randperm(25)  # new node i is old node perm[i]
    inv = torch.argsort(perm)
    q = PackedGraphs(
        op_features=p.op_features[perm],
        op_type=p.op_type[perm],
        edge_index=inv[p.edge_index],
        batch=p.batch,
        node_mask=p.node_mask,
    )
    torch.testing.assert_close(enc(q), enc(p)[perm], atol=1e-5, rtol=1e-5)


def test_no_edges_and_no_nodes():
    enc = GraphEncoder(hidden=8)
    assert torch.isfinite(enc(_packed(5, 0))).all()
    assert enc(_packed(0, 0)).shape == (0, 8)
