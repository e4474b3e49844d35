"""Cost-model losses: agree with loop twins, respect groups, descend toward the true order."""

from __future__ import annotations

import math

import pytest
import torch

from graphopt.costmodel.losses import (
    LOSSES,
    get_loss,
    listmle_loss,
    mse_loss,
    pairwise_hinge_loss,
    pairwise_logistic_loss,
)

RANKING = [pairwise_hinge_loss, pairwise_logistic_loss, listmle_loss]

# ---- slow twins: Python loops over items, pairs and groups ---------------------------------------


def _groups(group: list[int] | None, b: int) -> list[int]:
    return [0] * b if group is None else group


def ref_mse(pred, runtime, group=None) -> float:
    return sum((p - math.log(r)) ** 2 for p, r in zip(pred, runtime, strict=True)) / len(pred)


def _ref_pairwise(pred, runtime, group, per_pair) -> float:
    g = _groups(group, len(pred))
    values = [
        per_pair(pred[j] - pred[i])
        for i in range(len(pred))
        for j in range(len(pred))
        if g[i] == g[j] and runtime[i] < runtime[j]
    ]
    return sum(values) / len(values) if values else 0.0


def ref_hinge(pred, runtime, group=None, margin=0.1) -> float:
    return _ref_pairwise(pred, runtime, group, lambda gap: max(0.0, margin - gap))


def ref_logistic(pred, runtime, group=None) -> float:
    return _ref_pairwise(pred, runtime, group, lambda gap: math.log1p(math.exp(-gap)))


def ref_listmle(pred, runtime, group=None) -> float:
    g = _groups(group, len(pred))
    per_group = []
    for label in sorted(set(g)):
        members = [i for i in range(len(pred)) if g[i] == label]
        members.sort(key=lambda i: (runtime[i], i))  # fastest first, ties by index
        scores = [-pred[i] for i in members]
        total = 0.0
        for i in range(len(scores)):
            total += math.log(sum(math.exp(s) for s in scores[i:])) - scores[i]
        per_group.append(total / len(scores))
    return sum(per_group) / len(per_group)


TWINS = [
    (mse_loss, ref_mse),
    (pairwise_hinge_loss, ref_hinge),
    (pairwise_logistic_loss, ref_logistic),
    (listmle_loss, ref_listmle),
]


def random_batch(seed: int, b: int = 14, num_groups: int = 3, ties: bool = True):
    """Random predictions, runtimes (integers when ``ties``) and unsorted group ids."""
    gen = torch.Generator().manual_seed(seed)
    pred = torch.randn(b, generator=gen)
    if ties:
        runtime = torch.randint(1, 5, (b,), generator=gen).float()
    else:
        runtime = torch.rand(b, generator=gen) * 10 + 0.1
    group = torch.randint(0, num_groups, (b,), generator=gen) * 7  # ids need not be 0..G-1
    return pred, runtime, group


# ---- agreement with the twins -------------------------------------------------------------------


@pytest.mark.parametrize(("loss", "ref"), TWINS, ids=lambda f: getattr(f, "__name__", ""))
@pytest.mark.parametrize("ties", [False, True])
def test_losses_match_loop_twins(loss, ref, ties):
    for seed in range(5):
        pred, runtime, group = random_batch(seed, ties=ties)
        for g in (group, None):
            expected = ref(pred.tolist(), runtime.tolist(), None if g is None else g.tolist())
            assert loss(pred, runtime, g).item() == pytest.approx(expected, abs=1e-5)


def test_hinge_margin_is_used():
    pred, runtime, group = random_batch(11)
    for margin in (0.0, 0.5, 2.0):
        expected = ref_hinge(pred.tolist(), runtime.tolist(), group.tolist(), margin=margin)
        got = pairwise_hinge_loss(pred, runtime, group, margin=margin)
        assert got.item() == pytest.approx(expected, abs=1e-5)


@pytest.mark.parametrize("loss", list(LOSSES.values()))
def test_losses_are_invariant_to_batch_order(loss):
    pred, runtime, group = random_batch(4, b=20, ties=False)
    perm = torch.randperm(20, generator=torch.Generator().manual_seed(0))
    assert loss(pred[perm], runtime[perm], group[perm]).item() == pytest.approx(
        loss(pred, runtime, group).item(), abs=1e-6
    )


# ---- learning signal ----------------------------------------------------------------------------


@pytest.mark.parametrize("loss", list(LOSSES.values()))
def test_gradient_step_decreases_the_loss(loss):
    pred, runtime, group = random_batch(5, b=16, ties=False)
    pred.requires_grad_(True)
    before = loss(pred, runtime, group)
    (grad,) = torch.autograd.grad(before, pred)
    assert grad.abs().sum() > 0
    after = loss(pred.detach() - 0.05 * grad, runtime, group)
    assert after.item() < before.item()


@pytest.mark.parametrize("loss", RANKING)
def test_gradient_pushes_a_misordered_pair_apart(loss):
    # item 0 is faster but predicted slower: its prediction must go down, item 1's up.
    pred = torch.tensor([1.0, 0.0], requires_grad=True)
    loss(pred, torch.tensor([1.0, 2.0])).backward()
    assert pred.grad[0] > 0 > pred.grad[1]


@pytest.mark.parametrize("loss", RANKING)
def test_moving_toward_the_true_order_lowers_the_loss(loss):
    runtime = torch.tensor([3.0, 1.0, 4.0, 1.5, 9.0, 2.6])
    target = torch.log(runtime)
    # reversed order, no order (all tied), the true order
    losses = [loss(c * target, runtime).item() for c in (-1.0, 0.0, 1.0)]
    assert losses[0] > losses[1] > losses[2]


def test_listmle_of_a_well_separated_correct_order_is_near_zero():
    runtime = torch.tensor([4.0, 1.0, 3.0, 2.0])
    pred = torch.log(runtime) * 100  # right order, gaps of 100 * log(4 / 3) > 28 in score
    assert 0 <= listmle_loss(pred, runtime).item() < 1e-6
    assert listmle_loss(-pred, runtime).item() > 10


def test_mse_is_zero_at_the_log_runtime():
    runtime = torch.tensor([0.5, 2.0, 8.0])
    assert mse_loss(torch.log(runtime), runtime).item() == pytest.approx(0.0, abs=1e-12)
    assert mse_loss(torch.log(runtime) + 1, runtime).item() == pytest.approx(1.0)


# ---- groups --------------------------------------------------------------------------------------


@pytest.mark.parametrize("loss", RANKING)
def test_groups_are_not_compared(loss):
    # Group A (ids 0) and group B (ids 1) interleave in runtime. Reordering B's runtimes among
    # themselves keeps B's pair count but flips every cross-group pair; A's gradient must not move.
    pred = torch.tensor([0.3, -0.2, 0.8, 0.1, 0.5, -0.4])
    group = torch.tensor([0, 1, 0, 1, 0, 1])
    runtime = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    shuffled = torch.tensor([1.0, 600.0, 3.0, 0.5, 5.0, 300.0])
    in_a = group == 0

    def grad_on_a(rt, g):
        p = pred.clone().requires_grad_(True)
        (grad,) = torch.autograd.grad(loss(p, rt, g), p)
        return grad[in_a]

    assert torch.allclose(grad_on_a(runtime, group), grad_on_a(shuffled, group), atol=1e-7)
    # the same change does move A's gradient when groups are ignored: the check has teeth
    assert not torch.allclose(grad_on_a(runtime, None), grad_on_a(shuffled, None))


@pytest.mark.parametrize("loss", [pairwise_hinge_loss, pairwise_logistic_loss])
def test_no_pair_gives_zero_with_a_gradient(loss):
    pred = torch.randn(5, requires_grad=True)
    for runtime, group in [
        (torch.ones(5), None),  # all tied
        (torch.arange(1.0, 6.0), torch.arange(5)),  # every item alone in its group
        (torch.ones(0), None),  # empty batch
    ]:
        p = pred[: runtime.numel()]
        out = loss(p, runtime, group)
        assert out.item() == 0.0
        (grad,) = torch.autograd.grad(out, pred)
        assert torch.equal(grad, torch.zeros(5))


def test_listmle_singleton_groups_and_empty_batch():
    pred = torch.randn(4, requires_grad=True)
    assert listmle_loss(pred, torch.arange(1.0, 5.0), torch.arange(4)).item() == 0.0
    assert listmle_loss(pred[:0], torch.ones(0)).item() == 0.0
    assert mse_loss(pred[:0], torch.ones(0)).item() == 0.0


def test_pairwise_losses_handle_a_large_batch():
    pred, runtime, group = random_batch(9, b=512, num_groups=8, ties=False)
    pred.requires_grad_(True)
    for loss in RANKING:
        out = loss(pred, runtime, group)
        out.backward()
        assert torch.isfinite(out) and torch.isfinite(pred.grad).all()


# ---- registry and bad input ----------------------------------------------------------------------


def test_registry():
    assert set(LOSSES) == {"mse", "hinge", "logistic", "listmle"}
    for name, fn in LOSSES.items():
        assert get_loss(name) is fn


def test_unknown_loss_name():
    with pytest.raises(ValueError, match=r"unknown loss 'ranknet'.*'hinge'.*'listmle'"):
        get_loss("ranknet")


@pytest.mark.parametrize("loss", list(LOSSES.values()))
def test_bad_shapes_are_rejected(loss):
    with pytest.raises(ValueError, match="pred must be 1-D"):
        loss(torch.zeros(2, 3), torch.ones(2, 3))
    with pytest.raises(ValueError, match="runtime must have the shape of pred"):
        loss(torch.zeros(3), torch.ones(4))
    with pytest.raises(ValueError, match="group must have the shape of pred"):
        loss(torch.zeros(3), torch.ones(3), torch.zeros(2, dtype=torch.long))


def test_mse_rejects_non_positive_runtime():
    with pytest.raises(ValueError, match="runtime must be positive"):
        mse_loss(torch.zeros(2), torch.tensor([1.0, 0.0]))
