"""One batched categorical over every op slot, and its Stable-Baselines3 adapter.

An action is one value per (block, op slot); the environments lay it out as ``nb`` blocks of
``M`` slots (``nb = 1``, or 3 for the joint task: devices, priorities, fusion bits). Block ``j``
has its own number of classes ``K_j``, so the blocks are kept as separate ``(G, M, K_j)`` logit
tensors: never padded to a common ``K``, never one distribution object per op. Slots of op ``i``
are independent given the observation, so for sample ``b`` with mask ``m`` (real op slots):

.. math::
    \\log \\pi(a \\mid s) = \\sum_j \\sum_{i : m_i} \\log \\mathrm{softmax}(z_{j,i})[a_{j,i}],
    \\qquad
    \\mathcal{H}(\\pi(\\cdot \\mid s)) = -\\sum_j \\sum_{i : m_i} \\sum_k p_{j,i,k} \\log p_{j,i,k}

Padding slots contribute nothing, and :meth:`BatchedCategorical.sample` / ``mode`` return 0 there
(a valid ``MultiDiscrete`` value). Logits of ``-inf`` for forbidden classes are allowed: their
probability is 0 and they add exactly 0 to the entropy.

**Shared graphs.** With ``index`` (``(B,)``), sample ``b`` reads the logits of graph
``index[b]`` among ``G <= B`` distinct graphs: log-softmax and entropy are computed once per
graph, and log-probabilities are gathered per sample without materialising ``(B, M, K)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from stable_baselines3.common.distributions import Distribution
from torch import Tensor, nn


class SharedGraphs:
    """What a batched distribution over ``G`` distinct graphs read by ``B`` samples keeps (module
    docstring, *Shared graphs*): ``mask`` ``(G, M)`` bool of real op slots and ``index`` ``(B,)``,
    the graph of each sample, or None for ``B = G``."""

    mask: Tensor
    index: Tensor | None

    @property
    def batch_size(self) -> int:
        return int(self.mask.shape[0] if self.index is None else self.index.shape[0])

    def _rows(self, x: Tensor) -> Tensor:
        """``x`` of the ``G`` graphs as ``B`` rows, one per sample."""
        return x if self.index is None else x[self.index]


class BatchedCategorical(SharedGraphs):
    """Independent categoricals over ``nb`` blocks x ``M`` op slots, batched.

    Args:
        logits: one ``(G, M, K_j)`` tensor per block, in action-layout order.
        mask: ``(G, M)`` bool, True for real op slots.
        index: ``(B,)`` int64 graph of each sample, or None for ``B = G`` (sample ``b`` = graph
            ``b``).

    Shapes:
        - actions (of ``log_prob``, ``sample``, ``mode``): ``(B, nb * M)`` int64, block-major.
        - log_prob, entropy: ``(B,)``.
    """

    def __init__(self, logits: Sequence[Tensor], mask: Tensor, index: Tensor | None = None):
        if not logits:
            raise ValueError("BatchedCategorical needs at least one block of logits")
        for x in logits:
            if x.shape[:2] != mask.shape:
                raise ValueError(f"logits {tuple(x.shape)} do not match mask {tuple(mask.shape)}")
        self.log_probs = [F.log_softmax(x, dim=-1) for x in logits]
        self.mask = mask.bool()
        self.index = index
        self.num_slots = int(mask.shape[1])

    @property
    def block_sizes(self) -> list[int]:
        return [int(lp.shape[-1]) for lp in self.log_probs]

    def log_prob(self, actions: Tensor) -> Tensor:
        """Sum over blocks and real op slots of the log-probability of ``actions``."""
        nb, slots = len(self.log_probs), self.num_slots
        a = actions.long().reshape(self.batch_size, nb, slots)
        mask = self._rows(self.mask)
        a = a.masked_fill(~mask[:, None], 0)  # padding slots may hold anything
        total = a.new_zeros(self.batch_size, dtype=self.log_probs[0].dtype)
        for j, lp in enumerate(self.log_probs):
            if self.index is None:
                picked = lp.gather(-1, a[:, j, :, None]).squeeze(-1)
            else:
                slot = torch.arange(slots, device=lp.device)
                picked = lp[self.index[:, None], slot[None, :], a[:, j]]
            total = total + torch.where(mask, picked, 0.0).sum(dim=-1)
        return total

    def entropy(self) -> Tensor:
        """Sum over blocks and real op slots of the entropy."""
        per_graph = self.mask.new_zeros(self.mask.shape[0], dtype=self.log_probs[0].dtype)
        for lp in self.log_probs:
            plogp = lp.exp() * torch.nan_to_num(lp, neginf=0.0)  # 0 * -inf counts as 0
            per_graph = per_graph - torch.where(self.mask, plogp.sum(dim=-1), 0.0).sum(dim=-1)
        return self._rows(per_graph)

    def _finish(self, blocks: list[Tensor]) -> Tensor:
        mask = self._rows(self.mask)
        return torch.cat([torch.where(mask, b, 0) for b in blocks], dim=1)

    def sample(self) -> Tensor:
        """Actions drawn with the Gumbel-max trick (``argmax(log p - log E)``, ``E ~ Exp(1)``)."""
        blocks = []
        for lp in self.log_probs:
            rows = self._rows(lp)
            noise = torch.empty_like(rows).exponential_().log()
            blocks.append((rows - noise).argmax(dim=-1))
        return self._finish(blocks)

    def mode(self) -> Tensor:
        """The most likely value of every slot (padding slots 0)."""
        return self._finish([self._rows(lp.argmax(dim=-1)) for lp in self.log_probs])


class BatchedDistribution(Distribution):
    """A Stable-Baselines3 :class:`Distribution` that hands log-probabilities, entropies, samples
    and modes to the batched distribution it holds in ``distribution`` (set by the subclass's
    ``proba_distribution``): the adapter of :class:`BatchedCategorical` and of
    :class:`policies.gaussian.BatchedGaussian`."""

    distribution: Any

    def log_prob(self, actions: Tensor) -> Tensor:
        return self.distribution.log_prob(actions)

    def entropy(self) -> Tensor:
        return self.distribution.entropy()

    def sample(self) -> Tensor:
        return self.distribution.sample()

    def mode(self) -> Tensor:
        return self.distribution.mode()


class GOActionDistribution(BatchedDistribution):
    """Stable-Baselines3 :class:`Distribution` over a :class:`BatchedCategorical`.

    The parameters are those of :class:`BatchedCategorical`: ``(logits, mask, index=None)``.
    The policy network itself (:class:`policies.go_network.GONetwork`) produces the logits, so
    :meth:`proba_distribution_net` has no layer to offer.

    Args:
        block_sizes: ``K_j`` of each block, in action-layout order.
    """

    distribution: BatchedCategorical

    def __init__(self, block_sizes: Sequence[int]):
        super().__init__()
        self.block_sizes = list(block_sizes)

    def proba_distribution_net(self, *args: Any, **kwargs: Any) -> nn.Module:
        raise NotImplementedError("GONetwork produces the logits of GOActionDistribution")

    def proba_distribution(
        self, logits: Sequence[Tensor], mask: Tensor, index: Tensor | None = None
    ) -> GOActionDistribution:
        dist = BatchedCategorical(logits, mask, index)
        if dist.block_sizes != self.block_sizes:
            raise ValueError(f"logits have {dist.block_sizes} classes; expected {self.block_sizes}")
        self.distribution = dist
        return self

    def actions_from_params(
        self,
        logits: Sequence[Tensor],
        mask: Tensor,
        index: Tensor | None = None,
        deterministic: bool = False,
    ) -> Tensor:
        self.proba_distribution(logits, mask, index)
        return self.get_actions(deterministic=deterministic)

    def log_prob_from_params(
        self, logits: Sequence[Tensor], mask: Tensor, index: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        actions = self.actions_from_params(logits, mask, index)
        return actions, self.log_prob(actions)
