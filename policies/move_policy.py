"""``MovePolicy``: scores the candidate moves of ``graphopt/PlacementEdit-v0``.

The same small network reads every row (a candidate move, or the pass) of the observation, so the
policy is equivariant to the order of the candidates and works for any number of them; it never
sees the graph's size, which is what lets it act on graphs of any size and family::

    env = envs.PlacementEditEnv(graphs="suite:default", cluster="v100-nvlink-4")
    model = PPO(MovePolicy, env, policy_kwargs={"hidden": 64})

Maths, for an observation ``x`` of ``R = C + 1`` rows of ``F`` features:

    h_r     = tanh(W2 tanh(W1 x_r + b1) + b2)                 (R, H)
    logit_r = beta * x_r[g] + w . h_r + c                      (R,)
    value   = v . tanh(V [mean_r h_r ; max_r h_r] + d) + e     scalar

and the action is drawn from ``softmax(logit)``. Column ``g`` is the estimated gain of the move
(0 for the pass) and ``beta`` a learned scalar starting at ``gain_prior``; ``w`` starts at zero.
So the untrained greedy policy takes the candidate the analytic estimate likes best, or passes
when none is estimated to help (the rule of :func:`graphopt.baselines.estimate_search.estimate_search`),
and training learns where to depart from that rule: the same role the hint plays for
:class:`~policies.sb3_policy.GOPolicy`. ``gain_prior=0`` starts from a uniform policy instead.

Observations are clamped to the environment's Box, ``+-CLIP``, NaN read as ``-CLIP``, so the
logits are always finite.

Shapes:
    observation ``(B, R, F)`` float; actions ``(B,)``; values ``(B, 1)``; log-probabilities and
    entropies ``(B,)``.
"""

from __future__ import annotations

from typing import Any

import torch
from gymnasium import spaces
from stable_baselines3.common.distributions import CategoricalDistribution
from stable_baselines3.common.torch_layers import FlattenExtractor
from stable_baselines3.common.type_aliases import PyTorchObs, Schedule
from torch import Tensor, nn

from envs.placement_edit import CLIP, FEATURES
from policies.sb3_policy import CategoricalPolicy, check_kwargs, own_parameters


class MoveScorer(nn.Module):
    """Per-row MLP to logits, pooled rows to a value (module docstring).

    Args:
        num_features: ``F``, features per row.
        hidden: ``H``, width of the hidden layers.
        gain_column: ``g``, the column of the estimated gain.
        gain_prior: initial ``beta``.
    """

    def __init__(
        self, num_features: int, hidden: int = 64, gain_column: int = 0, gain_prior: float = 2.0
    ) -> None:
        super().__init__()
        if not 0 <= gain_column < num_features:
            raise ValueError(f"gain_column {gain_column} is outside [0, {num_features})")
        self.gain_column = gain_column
        self.beta = nn.Parameter(torch.tensor(float(gain_prior)))
        self.rows = nn.Sequential(
            nn.Linear(num_features, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh()
        )
        self.logit = nn.Linear(hidden, 1)
        nn.init.zeros_(self.logit.weight)
        nn.init.zeros_(self.logit.bias)
        self.value = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.Tanh(), nn.Linear(hidden, 1))

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """``(B, R, F)`` -> logits ``(B, R)``, values ``(B,)``."""
        h = self.rows(x)
        pooled = torch.cat([h.mean(dim=1), h.amax(dim=1)], dim=-1)
        logits = self.beta * x[..., self.gain_column] + self.logit(h).squeeze(-1)
        return logits, self.value(pooled).squeeze(-1)


CandidatePolicy = CategoricalPolicy
"""The base of the policies that pick one candidate row of an edit environment
(:class:`~policies.sb3_policy.CategoricalPolicy`)."""


class MovePolicy(CandidatePolicy):
    """Actor-critic policy around :class:`MoveScorer` for stock SB3 algorithms.

    Args:
        observation_space: ``Box((R, F))`` of :class:`envs.placement_edit.PlacementEditEnv`.
        action_space: ``Discrete(R)``.
        lr_schedule: learning-rate schedule (given by the algorithm).
        hidden: width ``H`` of the network (default 64).
        gain_prior: initial weight ``beta`` of the estimated gain in the logits (default 2; 0:
            start uniform).
        **kwargs: ``optimizer_class``, ``optimizer_kwargs``; SB3's MLP arguments are ignored.
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        lr_schedule: Schedule,
        hidden: int = 64,
        gain_prior: float = 2.0,
        **kwargs: Any,
    ) -> None:
        kwargs.pop("use_sde", None)
        check_kwargs("MovePolicy", kwargs, "hidden, gain_prior")
        shape = observation_space.shape
        if not isinstance(observation_space, spaces.Box) or shape is None or len(shape) != 2:
            raise ValueError(
                f"MovePolicy needs the (rows, features) Box observation of "
                f"graphopt/PlacementEdit-v0, got {observation_space}"
            )
        if not isinstance(action_space, spaces.Discrete) or int(action_space.n) != shape[0]:
            raise ValueError(
                f"MovePolicy needs Discrete({shape[0]}) actions (one per row), got {action_space}"
            )
        self.hidden = int(hidden)
        self.gain_prior = float(gain_prior)
        self.num_features = int(shape[1])
        super().__init__(
            observation_space,
            action_space,
            lr_schedule,
            features_extractor_class=FlattenExtractor,  # SB3's default; the scorer reads the Box
            **kwargs,
        )

    def _build_network(self) -> None:
        self.scorer = MoveScorer(
            self.num_features, self.hidden, FEATURES.index("gain"), self.gain_prior
        )
        self.action_dist = CategoricalDistribution(int(self.action_space.n))  # type: ignore[attr-defined]

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return own_parameters(
            super()._get_constructor_parameters(), hidden=self.hidden, gain_prior=self.gain_prior
        )

    def _run(self, obs: PyTorchObs) -> tuple[CategoricalDistribution, Tensor]:
        assert isinstance(obs, Tensor)
        # The environment's observations are finite and within +-CLIP; one that is not (a NaN
        # would make every logit NaN and the distribution refuse them) is brought into the Box,
        # a NaN read as the worst value, -CLIP.
        x = torch.nan_to_num(obs.float(), nan=-CLIP).clamp(-CLIP, CLIP)
        logits, value = self.scorer(x)
        dist = CategoricalDistribution(logits.shape[-1]).proba_distribution(logits)
        return dist, value.unsqueeze(-1)
