"""``GOMovePolicy``: the GO graph network as the scorer of an edit environment's candidate moves.

:class:`~policies.move_policy.MovePolicy` scores each candidate from its own row of features (what
the schedule says of its op); this policy also reads the graph. Every op gets a GraphSAGE
embedding (:class:`graphopt.nn.graph_encoder.GraphEncoder`, GO's first step) of its static
features *and* its state under the current decision (:data:`envs.decision_edit.OP_STATE`:
critical, slack, wait, duration, transfer, fused, its device's load), so an op's embedding knows
its neighbourhood's slack and waits; each candidate is scored from its row and its op's
embedding. For an observation of ``C`` rows ``x_r`` (``F`` features) whose ops have embeddings
``e_r`` (``d`` wide):

    h_r     = tanh(W2 tanh(W1 [x_r ; e_r] + b1) + b2)                    (C, H)
    logit_r = beta * x_r[0] + w . h_r + c                                 (C,)
    value   = v . tanh(V [mean_r h_r ; max_r h_r ; mean_ops e] + d) + f   scalar

with ``x_r[0]`` the environment's prior and ``w`` starting at zero, so that untrained it follows
the prior, as :class:`MovePolicy` does. Environments: ``obs_mode="graph"`` of
:class:`envs.decision_edit.DecisionEditEnv` (``policy: graph`` in a run's configuration).

Shapes: observations are batches of that ``Dict``; actions ``(B,)``; values ``(B, 1)``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from gymnasium import spaces
from stable_baselines3.common.distributions import CategoricalDistribution
from stable_baselines3.common.type_aliases import PyTorchObs, Schedule
from torch import Tensor, nn

from envs.decision_edit import CLIP, FEATURES, OP_STATE
from graphopt.encoding import OP_FEATURES
from graphopt.nn.batching import graph_batch, pack, to_padded
from graphopt.nn.graph_encoder import GraphEncoder
from policies.sb3_policy import CategoricalPolicy, check_kwargs, own_parameters


class GraphMoveScorer(nn.Module):
    """Node embeddings of the graph and its op state, then per-row logits and a value (module
    docstring).

    Args:
        num_features: ``F``, features per row.
        hidden: ``H`` = ``d``, width of the embeddings and of the row network.
        layers: GraphSAGE layers.
        prior_column: the row column the logits start from.
        prior_weight: initial ``beta``.
    """

    def __init__(
        self,
        num_features: int,
        hidden: int = 32,
        layers: int = 2,
        prior_column: int = 0,
        prior_weight: float = 2.0,
    ) -> None:
        super().__init__()
        self.prior_column = prior_column
        self.beta = nn.Parameter(torch.tensor(float(prior_weight)))
        self.encoder = GraphEncoder(
            hidden, layers, num_op_features=len(OP_FEATURES) + len(OP_STATE)
        )
        self.rows = nn.Sequential(
            nn.Linear(num_features + hidden, hidden),
            nn.Tanh(),
            nn.Linear(hidden, hidden),
            nn.Tanh(),
        )
        self.logit = nn.Linear(hidden, 1)
        nn.init.zeros_(self.logit.weight)
        nn.init.zeros_(self.logit.bias)
        self.value = nn.Sequential(nn.Linear(3 * hidden, hidden), nn.Tanh(), nn.Linear(hidden, 1))

    def forward(self, obs: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        """A batch of observations -> logits ``(B, C)``, values ``(B,)``."""
        batch = graph_batch(obs)
        state = torch.nan_to_num(obs["op_state"].float()).clamp(-CLIP, CLIP)
        batch = dataclasses.replace(
            batch, op_features=torch.cat([batch.op_features, state], dim=-1)
        )
        packed = pack(batch)
        embedded = to_padded(self.encoder(packed), packed)  # (B, L, d)
        x = torch.nan_to_num(obs["rows"].float(), nan=-CLIP).clamp(-CLIP, CLIP)  # (B, C, F)
        last = max(embedded.shape[1] - 1, 0)
        ops = obs["row_op"].long().clamp(0, last)  # (B, C)
        e = torch.gather(
            embedded, 1, ops.unsqueeze(-1).expand(-1, -1, embedded.shape[-1])
        )  # (B, C, d)
        h = self.rows(torch.cat([x, e], dim=-1))
        logits = self.beta * x[..., self.prior_column] + self.logit(h).squeeze(-1)
        mask = packed.node_mask.unsqueeze(-1).to(embedded.dtype)
        graph_mean = (embedded * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        pooled = torch.cat([h.mean(dim=1), h.amax(dim=1), graph_mean], dim=-1)
        return logits, self.value(pooled).squeeze(-1)


class GOMovePolicy(CategoricalPolicy):
    """Actor-critic policy around :class:`GraphMoveScorer` for stock SB3 algorithms.

    Args:
        observation_space: the ``Dict`` of ``obs_mode="graph"``
            (:class:`envs.decision_edit.DecisionEditEnv`).
        action_space: ``Discrete(C)``.
        lr_schedule: learning-rate schedule (given by the algorithm).
        hidden: width of the embeddings and the row network (default 32).
        layers: GraphSAGE layers (default 2).
        prior_weight: initial weight of the prior column in the logits (default 2; 0: uniform).
        **kwargs: ``optimizer_class``, ``optimizer_kwargs``; SB3's MLP arguments are ignored.
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        lr_schedule: Schedule,
        hidden: int = 32,
        layers: int = 2,
        prior_weight: float = 2.0,
        **kwargs: Any,
    ) -> None:
        kwargs.pop("use_sde", None)
        check_kwargs("GOMovePolicy", kwargs, "hidden, layers, prior_weight")
        needed = {"rows", "row_op", "op_state", "op_features"}
        if not isinstance(observation_space, spaces.Dict) or not needed <= set(
            observation_space.spaces
        ):
            raise ValueError(
                "GOMovePolicy needs the Dict observation of an edit environment with "
                f"obs_mode='graph' (keys {sorted(needed)} and the encoded graph), got "
                f"{observation_space}"
            )
        rows = observation_space.spaces["rows"]
        if not isinstance(action_space, spaces.Discrete) or rows.shape is None:
            raise ValueError(f"GOMovePolicy needs Discrete actions, got {action_space}")
        if int(action_space.n) != rows.shape[0]:
            raise ValueError(
                f"GOMovePolicy needs Discrete({rows.shape[0]}) actions (one per row), got "
                f"{action_space}"
            )
        self.hidden = int(hidden)
        self.layers = int(layers)
        self.prior_weight = float(prior_weight)
        self.num_features = int(rows.shape[1])
        super().__init__(observation_space, action_space, lr_schedule, **kwargs)

    def _build_network(self) -> None:
        self.scorer = GraphMoveScorer(
            self.num_features,
            self.hidden,
            self.layers,
            FEATURES.index("prior"),
            self.prior_weight,
        )
        self.action_dist = CategoricalDistribution(int(self.action_space.n))  # type: ignore[attr-defined]

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return own_parameters(
            super()._get_constructor_parameters(),
            hidden=self.hidden,
            layers=self.layers,
            prior_weight=self.prior_weight,
        )

    def _run(self, obs: PyTorchObs) -> tuple[CategoricalDistribution, Tensor]:
        assert isinstance(obs, dict)
        logits, value = self.scorer(obs)
        dist = CategoricalDistribution(logits.shape[-1]).proba_distribution(logits)
        return dist, value.unsqueeze(-1)
