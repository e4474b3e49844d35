"""CostNet: shapes, additivity over node sets, permutation of configurations, layout checks."""

from __future__ import annotations

import pytest
import torch

from graphopt.costmodel.features import encode_seconds
from graphopt.costmodel.model import CostNet, NetLayout, log_seconds


def _inputs(n: int = 12, b: int = 5, c: int = 4, seed: int = 0) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    node_feat = torch.randn(n, 7, generator=g)
    opcode = torch.randint(1, 30, (n,), generator=g)
    src = torch.arange(n - 1)
    edges = torch.stack([src, src + 1])
    config_ids = torch.tensor([1, 4, 6, 9])[:c]
    config_feat = torch.randn(b, c, 3, generator=g)
    summary = torch.randn(b, 2, generator=g)
    return node_feat, opcode, edges, config_ids, config_feat, summary


@pytest.fixture
def net() -> CostNet:
    torch.manual_seed(0)
    return CostNet(
        NetLayout(node_features=7, config_features=3, summary_features=2, hidden=16, layers=2)
    ).eval()


def test_output_shape_and_configuration_permutation(net: CostNet) -> None:
    x = _inputs()
    out = net(*x)
    assert out.shape == (5,)
    perm = torch.tensor([3, 0, 4, 1, 2])
    permuted = net(x[0], x[1], x[2], x[3], x[4][perm], x[5][perm])
    torch.testing.assert_close(permuted, out[perm])


def test_configuration_features_change_the_prediction(net: CostNet) -> None:
    x = _inputs()
    changed = x[4].clone()
    changed[0, 0] += 1.0
    out, out2 = net(*x), net(x[0], x[1], x[2], x[3], changed, x[5])
    assert out2[0] != out[0]
    torch.testing.assert_close(out2[1:], out[1:])


def test_sum_is_additive_over_disconnected_node_sets(net: CostNet) -> None:
    """Two components computed together equal the sum of each computed alone (GST relies on it)."""
    node_feat, opcode, _, _, config_feat, summary = _inputs(n=10)
    edges = torch.tensor([[0, 1, 2, 5, 6], [1, 2, 3, 6, 7]])
    ids = torch.tensor([1, 6])
    cfg = config_feat[:, :2]
    static = net.static(node_feat, opcode)
    whole = net.segment_sum(static, edges, ids, cfg)
    a = net.segment_sum(static[:5], edges[:, :3], torch.tensor([1]), cfg[:, :1])
    b = net.segment_sum(static[5:], edges[:, 3:] - 5, torch.tensor([1]), cfg[:, 1:])
    torch.testing.assert_close(whole, a + b, rtol=1e-5, atol=1e-5)


def test_empty_graph_gives_finite_predictions(net: CostNet) -> None:
    node_feat, opcode, _, ids, config_feat, summary = _inputs(n=12)
    out = net(node_feat, opcode, torch.zeros(2, 0, dtype=torch.long), ids, config_feat, summary)
    assert torch.isfinite(out).all()


def test_wrong_layout_is_rejected(net: CostNet) -> None:
    node_feat, opcode, edges, ids, config_feat, summary = _inputs()
    with pytest.raises(ValueError, match="node features have 8 columns"):
        net(torch.randn(12, 8), opcode, edges, ids, config_feat, summary)
    with pytest.raises(ValueError, match="4 features per node"):
        net(node_feat, opcode, edges, ids, torch.randn(5, 4, 4), summary)
    with pytest.raises(ValueError, match="summary features"):
        net(node_feat, opcode, edges, ids, config_feat, None)
    with pytest.raises(ValueError, match="outside this model's table"):
        net(node_feat, torch.full((12,), 9999), edges, ids, config_feat, summary)


def test_untrained_net_with_a_prior_predicts_the_prior_in_seconds() -> None:
    """The correction starts at zero and the prior column is decoded from log10(1 + t us) / 7 to
    log seconds, so an untrained network predicts the analytic estimate's absolute log runtime."""
    seconds = torch.tensor([3e-6, 1e-4, 0.02, 0.7, 5.0])
    encoded = torch.as_tensor(encode_seconds(seconds.numpy()))
    torch.testing.assert_close(log_seconds(encoded), torch.log(seconds), rtol=1e-5, atol=1e-5)
    torch.manual_seed(0)
    net = CostNet(
        NetLayout(
            node_features=7,
            config_features=3,
            summary_features=2,
            hidden=16,
            layers=2,
            prior_column=1,
        )
    ).eval()
    node_feat, opcode, edges, ids, config_feat, summary = _inputs()
    summary[:, 1] = encoded
    out = net(node_feat, opcode, edges, ids, config_feat, summary)
    torch.testing.assert_close(out, torch.log(seconds), rtol=1e-5, atol=1e-5)
    # the correction is learnable: one gradient step on a wrong target moves the prediction
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    loss = (net(node_feat, opcode, edges, ids, config_feat, summary) - 1.0).pow(2).mean()
    loss.backward()
    opt.step()
    assert not torch.allclose(net(node_feat, opcode, edges, ids, config_feat, summary), out)
