"""Training losses for the learned cost model: regression and ranking objectives.

Every loss takes a batch of configurations:

- ``pred`` ``(B,)`` float: the predicted *natural-log* runtime, lower = faster;
- ``runtime`` ``(B,)`` float: the measured runtime, positive, any unit (only ``mse`` reads its
  scale: rankings depend on the order alone);
- ``group`` ``(B,)`` long, optional: the graph of each configuration. Ranking losses only compare
  configurations of the same group (runtimes of different graphs are not comparable); ``None``
  puts the whole batch in one group.

and returns a scalar tensor, differentiable in ``pred``. Pairwise losses build the ``B x B`` pair
mask once (``B`` up to a few hundred) and never loop in Python; ListMLE sorts the batch by
``(group, runtime)`` and runs one padded reverse cumulative log-sum-exp over all groups.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "LOSSES",
    "LossFn",
    "get_loss",
    "listmle_loss",
    "mse_loss",
    "pairwise_hinge_loss",
    "pairwise_logistic_loss",
]

LossFn = Callable[..., Tensor]
"""``loss(pred, runtime, group=None, **options) -> scalar``."""


def _check(pred: Tensor, runtime: Tensor, group: Tensor | None) -> None:
    if pred.dim() != 1:
        raise ValueError(
            f"pred must be 1-D (one predicted log runtime per configuration), "
            f"got shape {tuple(pred.shape)}; squeeze the model output"
        )
    if runtime.shape != pred.shape:
        raise ValueError(
            f"runtime must have the shape of pred {tuple(pred.shape)}, got {tuple(runtime.shape)}"
        )
    if group is not None and group.shape != pred.shape:
        raise ValueError(
            f"group must have the shape of pred {tuple(pred.shape)}, got {tuple(group.shape)}; "
            "pass one graph id per configuration, or None for a single group"
        )


def mse_loss(pred: Tensor, runtime: Tensor, group: Tensor | None = None) -> Tensor:
    r"""Mean squared error between the predicted and the true natural-log runtime.

    .. math::
        L = \frac{1}{B} \sum_i (pred_i - \ln runtime_i)^2

    ``pred`` is a natural-log runtime in the unit of ``runtime`` (change the unit and the target
    shifts by a constant). Regression ignores ``group``; it is accepted for a uniform signature.

    Args:
        pred: predicted log runtimes.
        runtime: measured runtimes, positive.
        group: ignored.

    Returns:
        Scalar loss; 0 for an empty batch.

    Raises:
        ValueError: shapes differ, or a runtime is not positive.

    Shapes:
        ``pred``, ``runtime``, ``group``: ``(B,)``; output ``()``.
    """
    _check(pred, runtime, group)
    if pred.numel() == 0:
        return pred.sum() * 0
    if bool((runtime <= 0).any()):
        raise ValueError(
            f"runtime must be positive for a log-runtime target, got min {runtime.min().item()}"
        )
    return F.mse_loss(pred, torch.log(runtime.to(pred.dtype)))


def _pair_mask(runtime: Tensor, group: Tensor | None) -> Tensor:
    """``mask[i, j]``: ``runtime[i] < runtime[j]`` within one group (``i`` is faster)."""
    mask = runtime[:, None] < runtime[None, :]
    if group is not None:
        mask &= group[:, None] == group[None, :]
    return mask


def _mean_over_pairs(per_pair: Tensor, mask: Tensor) -> Tensor:
    """Mean of ``per_pair`` over ``mask``; 0 (still differentiable) when the mask is empty.

    ``where`` + ``clamp`` rather than boolean indexing: static shapes, no host sync.
    """
    total = torch.where(mask, per_pair, torch.zeros_like(per_pair)).sum()
    return total / mask.sum().clamp(min=1)


def pairwise_hinge_loss(
    pred: Tensor, runtime: Tensor, group: Tensor | None = None, margin: float = 0.1
) -> Tensor:
    r"""Margin ranking loss over the ordered pairs of each group.

    .. math::
        L = \frac{1}{|P|} \sum_{(i, j) \in P} \max(0, m - (pred_j - pred_i)),
        \quad P = \{(i, j) : g_i = g_j,\ runtime_i < runtime_j\}

    The slower configuration ``j`` must be predicted at least ``margin`` (in log runtime) above
    the faster ``i``. Pairs with equal runtimes are skipped.

    Args:
        pred: predicted log runtimes.
        runtime: measured runtimes.
        group: graph id per configuration; ``None`` is one group.
        margin: required gap ``m`` in predicted log runtime.

    Returns:
        Scalar loss; 0 (with a zero gradient) when no pair exists.

    Shapes:
        ``pred``, ``runtime``, ``group``: ``(B,)``; output ``()``.
    """
    _check(pred, runtime, group)
    gap = pred[None, :] - pred[:, None]  # gap[i, j] = pred[j] - pred[i]
    return _mean_over_pairs(F.relu(margin - gap), _pair_mask(runtime, group))


def pairwise_logistic_loss(pred: Tensor, runtime: Tensor, group: Tensor | None = None) -> Tensor:
    r"""RankNet-style logistic loss over the ordered pairs of each group (Burges et al., 2005).

    .. math::
        L = \frac{1}{|P|} \sum_{(i, j) \in P} \log(1 + e^{-(pred_j - pred_i)})

    with ``P`` as in :func:`pairwise_hinge_loss`: the negative log-likelihood that ``j`` is
    slower than ``i`` under a Bradley-Terry model of the predicted gap.

    Args:
        pred: predicted log runtimes.
        runtime: measured runtimes.
        group: graph id per configuration; ``None`` is one group.

    Returns:
        Scalar loss; 0 (with a zero gradient) when no pair exists.

    Shapes:
        ``pred``, ``runtime``, ``group``: ``(B,)``; output ``()``.
    """
    _check(pred, runtime, group)
    gap = pred[None, :] - pred[:, None]
    return _mean_over_pairs(F.softplus(-gap), _pair_mask(runtime, group))


def listmle_loss(pred: Tensor, runtime: Tensor, group: Tensor | None = None) -> Tensor:
    r"""ListMLE (Xia et al., ICML 2008): negative Plackett-Luce log-likelihood of the true order.

    Per group of ``n`` configurations sorted by true runtime, fastest first, with scores
    ``s = -pred``:

    .. math::
        L_g = \frac{1}{n} \sum_{i=1}^{n} \Big(\log \sum_{k \ge i} e^{s_k} - s_i\Big),
        \qquad L = \frac{1}{G} \sum_g L_g

    Each group's sum is divided by its size (so long lists do not dominate the batch) and the
    groups are averaged with equal weight; a one-item group contributes 0. Equal runtimes are
    ordered by batch index (a stable sort), as the likelihood needs a strict order.

    Vectorised: sort by ``(group, runtime)``; place each group in a row of a ``(G, n_max)``
    matrix, right-aligned so that the padding sits *before* the items; a reverse
    ``logcumsumexp`` along each row then sums exactly the items ``k >= i`` of the same group.

    Args:
        pred: predicted log runtimes.
        runtime: measured runtimes.
        group: graph id per configuration; ``None`` is one group.

    Returns:
        Scalar loss, ``>= 0``; 0 for an empty batch.

    Shapes:
        ``pred``, ``runtime``, ``group``: ``(B,)``; output ``()``.
    """
    _check(pred, runtime, group)
    b = pred.shape[0]
    if b == 0:
        return pred.sum() * 0
    if group is None:
        gid = torch.zeros(b, dtype=torch.long, device=pred.device)
    else:
        gid = torch.unique(group, return_inverse=True)[1]
    # sort by (group, runtime): a stable sort by runtime, then a stable sort by group
    order = torch.argsort(runtime, stable=True)
    order = order[torch.argsort(gid[order], stable=True)]
    gid = gid[order]
    scores = -pred[order]

    counts = torch.bincount(gid)
    num_groups, width = counts.shape[0], int(counts.max())
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.arange(b, device=pred.device) - starts[gid]  # 0 = fastest of its group
    col = width - counts[gid] + rank  # right-aligned: padding first, then the items
    rows = scores.new_zeros(num_groups, width)
    rows = rows.index_put((gid, col), scores)
    suffix_lse = torch.logcumsumexp(rows.flip(1), dim=1).flip(1)  # logsumexp(rows[g, c:])
    terms = suffix_lse[gid, col] - scores
    per_group = scores.new_zeros(num_groups).index_add(0, gid, terms) / counts
    return per_group.mean()


LOSSES: dict[str, LossFn] = {
    "mse": mse_loss,
    "hinge": pairwise_hinge_loss,
    "logistic": pairwise_logistic_loss,
    "listmle": listmle_loss,
}
"""Losses by name, as a config selects them."""


def get_loss(name: str) -> LossFn:
    """The loss registered as ``name`` in :data:`LOSSES`.

    Raises:
        ValueError: ``name`` is not a known loss; the message lists the known ones.
    """
    try:
        return LOSSES[name]
    except KeyError as e:
        known = ", ".join(repr(k) for k in LOSSES)
        raise ValueError(f"unknown loss {name!r}; choose one of: {known}") from e
