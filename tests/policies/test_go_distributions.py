"""policies.distributions: the batched categorical against one torch Categorical per op."""

from __future__ import annotations

import pytest
import torch
from torch.distributions import Categorical

from policies.distributions import BatchedCategorical, GOActionDistribution

torch.set_num_threads(1)

SIZES = [4, 8, 2]  # joint: devices, priorities, fusion


def _setup(batch=3, slots=10, sizes=SIZES, seed=0):
    gen = torch.Generator().manual_seed(seed)
    logits = [torch.randn(batch, slots, k, generator=gen) for k in sizes]
    mask = torch.arange(slots)[None] < torch.tensor([10, 4, 0][:batch])[:, None]
    actions = torch.cat([torch.randint(0, k, (batch, slots), generator=gen) for k in sizes], dim=1)
    return logits, mask, actions


def _reference(logits, mask, actions):
    """Slow twin: a Python loop with one Categorical per (sample, block, real op)."""
    batch, slots = mask.shape
    log_prob = torch.zeros(batch)
    entropy = torch.zeros(batch)
    for b in range(batch):
        for j, lg in enumerate(logits):
            for i in range(slots):
                if mask[b, i]:
                    cat = Categorical(logits=lg[b, i])
                    log_prob[b] += cat.log_prob(actions[b, j * slots + i])
                    entropy[b] += cat.entropy()
    return log_prob, entropy


def test_log_prob_and_entropy_match_per_op_categoricals():
    logits, mask, actions = _setup()
    dist = BatchedCategorical(logits, mask)
    ref_lp, ref_ent = _reference(logits, mask, actions)
    torch.testing.assert_close(dist.log_prob(actions), ref_lp)
    torch.testing.assert_close(dist.entropy(), ref_ent)
    assert dist.log_prob(actions)[2] == 0 and dist.entropy()[2] == 0  # no real op


def test_padding_actions_are_ignored_and_float_actions_accepted():
    logits, mask, actions = _setup()
    other = actions.clone()
    other[~mask.repeat(1, 3)] = 1
    dist = BatchedCategorical(logits, mask)
    torch.testing.assert_close(dist.log_prob(other.float()), dist.log_prob(actions))


def test_sample_and_mode_layout():
    logits, mask, _ = _setup()
    dist = BatchedCategorical(logits, mask)
    torch.manual_seed(0)
    for actions in (dist.sample(), dist.mode()):
        assert actions.shape == (3, 30) and actions.dtype == torch.long
        blocks = actions.view(3, 3, 10)
        for j, k in enumerate(SIZES):
            assert blocks[:, j].min() >= 0 and blocks[:, j].max() < k
            assert torch.all(blocks[:, j][~mask] == 0)  # padding slots are 0
    mode = dist.mode().view(3, 3, 10)
    for j, lg in enumerate(logits):
        assert torch.equal(mode[:, j][mask], lg.argmax(-1)[mask])


def test_sample_frequencies():
    probs = torch.tensor([0.1, 0.2, 0.7])
    dist = BatchedCategorical(
        [probs.log().expand(1, 20000, 3)], torch.ones(1, 20000, dtype=torch.bool)
    )
    torch.manual_seed(0)
    freq = torch.bincount(dist.sample()[0], minlength=3) / 20000
    torch.testing.assert_close(freq, probs, atol=0.015, rtol=0)


def test_index_equals_repeated_logits():
    logits, mask, _ = _setup(batch=2)
    index = torch.tensor([1, 0, 1, 1])
    gen = torch.Generator().manual_seed(3)
    actions = torch.cat([torch.randint(0, k, (4, 10), generator=gen) for k in SIZES], dim=1)
    shared = BatchedCategorical(logits, mask, index)
    repeated = BatchedCategorical([x[index] for x in logits], mask[index])
    torch.testing.assert_close(shared.log_prob(actions), repeated.log_prob(actions))
    torch.testing.assert_close(shared.entropy(), repeated.entropy())
    assert torch.equal(shared.mode(), repeated.mode())
    assert shared.sample().shape == (4, 30)


def test_forbidden_classes_keep_exact_finite_values():
    logits = torch.tensor([[[0.0, 0.0, float("-inf")]]])
    dist = BatchedCategorical([logits], torch.ones(1, 1, dtype=torch.bool))
    torch.testing.assert_close(dist.entropy(), torch.tensor([torch.log(torch.tensor(2.0))]))
    torch.testing.assert_close(dist.log_prob(torch.tensor([[1]])), -torch.log(torch.tensor([2.0])))
    assert all(dist.sample()[0] < 2 for _ in range(20))


def test_gradients():
    logits, mask, actions = _setup()
    logits = [x.requires_grad_() for x in logits]
    dist = BatchedCategorical(logits, mask, torch.tensor([0, 0, 1]))
    (dist.log_prob(actions[[0, 0, 1]]).sum() + dist.entropy().sum()).backward()
    assert all(torch.isfinite(x.grad).all() for x in logits)
    assert torch.all(logits[0].grad[1, 4:] == 0)  # padding slots get no gradient


def test_sb3_adapter():
    logits, mask, actions = _setup()
    dist = GOActionDistribution(SIZES)
    assert dist.proba_distribution(logits, mask) is dist
    torch.testing.assert_close(
        dist.log_prob(actions), BatchedCategorical(logits, mask).log_prob(actions)
    )
    assert torch.equal(dist.get_actions(deterministic=True), dist.mode())
    sampled, log_prob = dist.log_prob_from_params(logits, mask)
    torch.testing.assert_close(log_prob, dist.log_prob(sampled))
    assert torch.equal(dist.actions_from_params(logits, mask, deterministic=True), dist.mode())
    with pytest.raises(ValueError, match="classes"):
        GOActionDistribution([4, 8, 3]).proba_distribution(logits, mask)
    with pytest.raises(NotImplementedError):
        dist.proba_distribution_net(8)
