"""One batched diagonal Gaussian over every (channel, op slot), and its Stable-Baselines3 adapter:
the action distribution of a network that steers a decoder (:mod:`graphopt.decoders`).

An action is ``C`` real numbers per op slot, laid out channel-major (``C`` blocks of ``M``
slots), as the one-shot environments with a decoder take it. For sample ``b`` with real op slots
``m``, mean ``mu`` (the network's outputs) and one learned standard deviation per channel
``sigma_c``:

.. math::
    \\log \\pi(a \\mid s) = \\sum_c \\sum_{i : m_i} \\log \\mathcal{N}(a_{c,i}; \\mu_{c,i}, \\sigma_c^2),
    \\qquad
    \\mathcal{H} = n \\sum_c \\left(\\tfrac12 \\log(2 \\pi e) + \\log \\sigma_c\\right)

with ``n`` the number of real ops. Padding slots contribute nothing and are 0 in samples and
modes. ``index`` reads the means of ``G <= B`` distinct graphs as in
:mod:`policies.distributions`.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from policies.distributions import BatchedDistribution, SharedGraphs

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


class BatchedGaussian(SharedGraphs):
    """Independent Gaussians over ``C`` channels x ``M`` op slots, batched.

    Args:
        mean: ``(G, C, M)``.
        log_std: ``(C,)``.
        mask: ``(G, M)`` bool, True for real op slots.
        index: ``(B,)`` graph of each sample, or None (``B = G``).

    Shapes:
        - actions: ``(B, C * M)`` float, channel-major.
        - log_prob, entropy: ``(B,)``.
    """

    def __init__(self, mean: Tensor, log_std: Tensor, mask: Tensor, index: Tensor | None = None):
        if mean.ndim != 3 or mean.shape[0] != mask.shape[0] or mean.shape[2] != mask.shape[1]:
            raise ValueError(f"mean {tuple(mean.shape)} does not match mask {tuple(mask.shape)}")
        if log_std.shape != (mean.shape[1],):
            raise ValueError(f"log_std {tuple(log_std.shape)}: expected ({mean.shape[1]},)")
        self.mean, self.log_std, self.mask, self.index = mean, log_std, mask.bool(), index

    def log_prob(self, actions: Tensor) -> Tensor:
        """Sum over channels and real op slots of the log-density of ``actions``."""
        mean = self._rows(self.mean)
        a = actions.to(mean.dtype).reshape(mean.shape)
        std = self.log_std.exp()[None, :, None]
        z = (a - mean) / std
        per = -0.5 * z * z - self.log_std[None, :, None] - _HALF_LOG_2PI
        mask = self._rows(self.mask)[:, None, :]
        return torch.where(mask, per, 0.0).sum(dim=(1, 2))

    def entropy(self) -> Tensor:
        """Entropy of every sample's Gaussians over its real op slots."""
        per_op = (0.5 + _HALF_LOG_2PI + self.log_std).sum()
        return self._rows(self.mask).sum(dim=1).to(self.mean.dtype) * per_op

    def _finish(self, x: Tensor) -> Tensor:
        mask = self._rows(self.mask)[:, None, :]
        return torch.where(mask, x, 0.0).reshape(x.shape[0], -1)

    def sample(self) -> Tensor:
        mean = self._rows(self.mean)
        noise = torch.randn_like(mean) * self.log_std.exp()[None, :, None]
        return self._finish(mean + noise)

    def mode(self) -> Tensor:
        return self._finish(self._rows(self.mean))


class GaussianActionDistribution(BatchedDistribution):
    """Stable-Baselines3 :class:`Distribution` over a :class:`BatchedGaussian`; the network makes
    the means and the policy holds ``log_std``, so :meth:`proba_distribution_net` has no layer."""

    distribution: BatchedGaussian

    def proba_distribution_net(self, *args: Any, **kwargs: Any) -> nn.Module:
        raise NotImplementedError("the policy network produces the means")

    def proba_distribution(
        self, mean: Tensor, log_std: Tensor, mask: Tensor, index: Tensor | None = None
    ) -> GaussianActionDistribution:
        self.distribution = BatchedGaussian(mean, log_std, mask, index)
        return self

    def actions_from_params(
        self,
        mean: Tensor,
        log_std: Tensor,
        mask: Tensor,
        index: Tensor | None = None,
        deterministic: bool = False,
    ) -> Tensor:
        self.proba_distribution(mean, log_std, mask, index)
        return self.get_actions(deterministic=deterministic)

    def log_prob_from_params(
        self, mean: Tensor, log_std: Tensor, mask: Tensor, index: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        actions = self.actions_from_params(mean, log_std, mask, index)
        return actions, self.log_prob(actions)
