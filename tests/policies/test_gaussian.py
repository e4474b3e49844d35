from __future__ import annotations

import torch

from policies.gaussian import BatchedGaussian, GaussianActionDistribution


def _case():
    torch.manual_seed(0)
    mean = torch.randn(2, 3, 5)
    log_std = torch.tensor([-0.5, 0.0, 0.3])
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    return mean, log_std, mask


def test_log_prob_and_entropy_match_torch_normals_over_real_slots():
    mean, log_std, mask = _case()
    dist = BatchedGaussian(mean, log_std, mask)
    actions = torch.randn(2, 15)
    got = dist.log_prob(actions)
    normal = torch.distributions.Normal(mean, log_std.exp()[None, :, None])
    per = normal.log_prob(actions.reshape(2, 3, 5)) * mask[:, None, :]
    torch.testing.assert_close(got, per.sum(dim=(1, 2)))
    ent = (normal.entropy() * mask[:, None, :]).sum(dim=(1, 2))
    torch.testing.assert_close(dist.entropy(), ent)


def test_index_reads_shared_graphs_and_padding_is_zero():
    mean, log_std, mask = _case()
    index = torch.tensor([1, 0, 1])
    dist = BatchedGaussian(mean, log_std, mask, index)
    actions = dist.sample()
    assert actions.shape == (3, 15)
    assert (actions.reshape(3, 3, 5)[1, :, 3:] == 0).all()
    full = BatchedGaussian(mean[index], log_std, mask[index])
    torch.testing.assert_close(dist.log_prob(actions), full.log_prob(actions))
    mode = dist.mode().reshape(3, 3, 5)
    torch.testing.assert_close(mode[0], mean[1])


def test_sb3_adapter_round_trip():
    mean, log_std, mask = _case()
    adapter = GaussianActionDistribution()
    actions, log_prob = adapter.log_prob_from_params(mean, log_std, mask)
    torch.testing.assert_close(log_prob, BatchedGaussian(mean, log_std, mask).log_prob(actions))
    greedy = adapter.actions_from_params(mean, log_std, mask, deterministic=True)
    torch.testing.assert_close(greedy.reshape(2, 3, 5)[1], mean[1])
