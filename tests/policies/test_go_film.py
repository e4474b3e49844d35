"""policies.film: masked pooling, graph context and FiLM parameters."""

from __future__ import annotations

import torch

from policies.film import FiLM, context_dim, graph_context, masked_mean_max

torch.set_num_threads(1)


def test_masked_mean_max_ignores_padding_and_empty_rows():
    x = torch.tensor([[[1.0], [3.0], [100.0]], [[-5.0], [7.0], [9.0]]])
    mask = torch.tensor([[True, True, False], [False, False, False]])
    out = masked_mean_max(x, mask)
    assert out.tolist() == [[2.0, 3.0], [0.0, 0.0]]
    empty = masked_mean_max(torch.zeros(2, 0, 3), torch.zeros(2, 0, dtype=torch.bool))
    assert empty.shape == (2, 6) and torch.all(empty == 0)


def test_graph_context_shape():
    b, n, d = 3, 7, 16
    mask = torch.ones(b, n, dtype=torch.bool)
    dev_mask = torch.zeros(b, 16, dtype=torch.bool)
    dev_mask[:, :4] = True
    c = graph_context(
        torch.randn(b, n, d), mask, torch.randn(b, 8), torch.randn(b, 16, 5), dev_mask
    )
    assert c.shape == (b, context_dim(d)) == (b, 2 * d + 18)


def test_film_starts_as_identity_and_has_one_pair_per_layer():
    film = FiLM(context_dim(8), 8, num_layers=3)
    pairs = film(torch.randn(4, context_dim(8)))
    assert len(pairs) == 3
    for gamma, beta in pairs:
        assert gamma.shape == beta.shape == (4, 8)
        assert torch.all(gamma == 0) and torch.all(beta == 0)
    assert FiLM(context_dim(8), 8, num_layers=0)(torch.randn(2, context_dim(8))) == []
