"""graphopt.nn.batching: typed batches, packing into one disjoint graph, scattering back."""

from __future__ import annotations

import torch
from go_testing import encoded_obs

from graphopt.nn.batching import GraphBatch, graph_batch, pack, to_padded


def _random_batch(
    sizes: list[tuple[int, int]], max_ops: int = 12, max_edges: int = 20
) -> GraphBatch:
    gen = torch.Generator().manual_seed(0)
    b = len(sizes)
    feats = torch.full((b, max_ops, 13), -1.0)
    types = torch.zeros(b, max_ops, dtype=torch.long)
    edges = torch.full((b, 2, max_edges), -1, dtype=torch.long)
    for i, (n, e) in enumerate(sizes):
        feats[i, :n] = torch.rand(n, 13, generator=gen)
        types[i, :n] = torch.randint(1, 50, (n,), generator=gen)
        if n:
            edges[i, :, :e] = torch.randint(0, n, (2, e), generator=gen)
    counts = torch.tensor(sizes, dtype=torch.long)
    obs = {
        "op_features": feats,
        "op_type": types,
        "edge_index": edges,
        "device_features": torch.rand(b, 16, 5, generator=gen),
        "device_mask": torch.ones(b, 16, dtype=torch.int8),
        "graph_features": torch.rand(b, 8, generator=gen),
        "counts": counts,
    }
    return graph_batch(obs)


def test_pack_matches_loop_reference():
    sizes = [(5, 7), (0, 0), (12, 20), (3, 0)]
    batch = _random_batch(sizes)
    packed = pack(batch)
    # slow twin: one graph at a time
    feats, types, src, dst, owner = [], [], [], [], []
    offset = 0
    for i, (n, e) in enumerate(sizes):
        feats.append(batch.op_features[i, :n])
        types.append(batch.op_type[i, :n])
        src.append(batch.edge_index[i, 0, :e] + offset)
        dst.append(batch.edge_index[i, 1, :e] + offset)
        owner.append(torch.full((n,), i))
        offset += n
    assert torch.equal(packed.op_features, torch.cat(feats))
    assert torch.equal(packed.op_type, torch.cat(types))
    assert torch.equal(packed.edge_index, torch.stack([torch.cat(src), torch.cat(dst)]))
    assert torch.equal(packed.batch, torch.cat(owner))
    assert packed.node_mask.shape == (4, 12)
    assert packed.node_mask.sum(1).tolist() == [5, 0, 12, 3]


def test_to_padded_inverts_pack():
    batch = _random_batch([(5, 7), (0, 0), (9, 3)])
    packed = pack(batch)
    padded = to_padded(packed.op_features, packed)
    assert padded.shape == (3, 9, 13)
    assert torch.equal(padded[0, :5], batch.op_features[0, :5])
    assert torch.equal(padded[2], batch.op_features[2, :9])
    assert torch.all(padded[0, 5:] == 0) and torch.all(padded[1] == 0)


def test_float_observations_are_converted_back():
    obs = encoded_obs()
    as_float = {k: v.float() for k, v in obs.items()}  # what SB3's buffers may hand over
    a, b = graph_batch(obs), graph_batch(as_float)
    for name in GraphBatch.__dataclass_fields__:
        x, y = getattr(a, name), getattr(b, name)
        if x is None:  # no hint in these observations
            assert y is None, name
            continue
        assert x.dtype == y.dtype and torch.equal(x, y), name
    assert a.op_type.dtype == torch.long and a.device_mask.dtype == torch.bool


def test_all_empty_batch():
    packed = pack(_random_batch([(0, 0), (0, 0)]))
    assert packed.num_nodes == 0 and packed.edge_index.shape == (2, 0)
    assert to_padded(torch.zeros(0, 4), packed).shape == (2, 0, 4)
