"""HDP (Mirhoseini et al., ICLR 2018, "A Hierarchical Model for Device Placement") as a baseline.

Two networks trained jointly on one graph (environment: :mod:`envs.hierarchical`):

- **Grouper**: a feed-forward network over each op's embedding (its op type, features, and the
  mean of its neighbours' as HDP's adjacency information) with a softmax over ``G`` groups; each
  op's group is sampled from it.
- **Placer**: a sequence-to-sequence model over the groups. Group ``g``'s embedding is built from
  its members (the mean of their embeddings, which is a linear map of HDP's vector of op-type
  counts and summed features, and the log of its size) and its adjacency to the other groups
  (the fraction of the graph's edges from and to each group); a bidirectional LSTM encodes the
  ``G`` groups in order, and an LSTM decoder with attention over the encoder's states emits
  group ``g``'s device from the previous group's device.

The log-probability of an action is the grouper's (summed over real ops) plus the placer's
(summed over groups), as in HDP, where both networks are trained by the same policy gradient.
The value head (the baseline) reads the mean op embedding. HDP does not transfer across graphs:
it is trained per graph, its budget the per-graph budget.

.. code-block:: text

    ops ──embed──> x (B, M, d) ──MLP──> group logits (B, M, G) ──sample──> groups
    groups, x, edges ──group embeddings──> (B, G, d) ──BiLSTM──> enc (B, G, d)
    for g in 0..G-1: s_g = LSTMCell([dev_emb(d_{g-1}); attn(s_{g-1}, enc)])
                     device logits_g = W [s_g; attn(s_g, enc)]  ──sample──> d_g
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from gymnasium import spaces
from stable_baselines3.common.type_aliases import PyTorchObs, Schedule
from torch import Tensor, nn

from graphopt.encoding import NUM_OP_TYPES, OP_FEATURES
from graphopt.nn.batching import GraphBatch, graph_batch
from policies.sb3_policy import NetworkPolicy, check_kwargs, own_parameters

HDP_DEFAULTS: dict[str, Any] = dict(hidden=64)
"""Keyword arguments of :class:`HDPNetwork` (and ``policy_kwargs`` of ``policy: hdp``)."""


class HDPNetwork(nn.Module):
    """HDP's grouper and placer (module docstring).

    Args:
        num_groups: groups ``G``.
        num_devices: devices ``D``.
        hidden: width ``d`` of the embeddings and LSTM states (default 64).

    Shapes:
        - :meth:`grouper`: a :class:`GraphBatch` -> op embeddings ``(B, M, d)`` and group logits
          ``(B, M, G)``.
        - :meth:`placer`: op embeddings, groups ``(B, M)``, the batch and optionally devices
          ``(B, G)`` -> devices ``(B, G)``, log-probability ``(B,)`` and entropy ``(B,)``.
    """

    def __init__(self, num_groups: int, num_devices: int, hidden: int = 64) -> None:
        super().__init__()
        self.num_groups, self.num_devices = int(num_groups), int(num_devices)
        self.type_embedding = nn.Embedding(NUM_OP_TYPES, hidden, padding_idx=0)
        self.feature_proj = nn.Linear(len(OP_FEATURES), hidden)
        self.grouper = nn.Sequential(
            nn.Linear(2 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, self.num_groups)
        )
        self.group_proj = nn.Linear(hidden + 1 + 2 * self.num_groups, hidden)
        self.encoder = nn.LSTM(hidden, hidden // 2, batch_first=True, bidirectional=True)
        self.device_embedding = nn.Embedding(self.num_devices + 1, hidden)  # row D: start
        self.decoder = nn.LSTMCell(2 * hidden, hidden)
        self.device_head = nn.Linear(2 * hidden, self.num_devices)
        self.value_head = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))
        for head in (self.grouper[-1], self.device_head):  # near-uniform initial policy
            assert isinstance(head, nn.Linear)
            nn.init.orthogonal_(head.weight, gain=0.01)
            nn.init.zeros_(head.bias)

    def embed(self, batch: GraphBatch) -> tuple[Tensor, Tensor]:
        """Op embeddings ``(B, M, d)`` (zero in padding) and the real-op mask ``(B, M)``."""
        m = batch.max_ops
        mask = torch.arange(m, device=batch.num_ops.device) < batch.num_ops[:, None]
        x = self.type_embedding(batch.op_type) + self.feature_proj(batch.op_features)
        return x * mask.unsqueeze(-1), mask

    def grouper_logits(self, batch: GraphBatch, x: Tensor) -> Tensor:
        """``(B, M, G)``: the grouper's logits, from each op's embedding and its neighbours'."""
        neighbours = _neighbour_mean(x, batch)
        return self.grouper(torch.cat([x, neighbours], -1))

    def value(self, x: Tensor, mask: Tensor) -> Tensor:
        pooled = x.sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
        return self.value_head(pooled).squeeze(-1)

    def placer(
        self,
        x: Tensor,
        mask: Tensor,
        groups: Tensor,
        batch: GraphBatch,
        devices: Tensor | None = None,
        deterministic: bool = False,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """The device of every group (``devices`` given: their log-probability, teacher-forced;
        else sampled, or the most likely with ``deterministic``), the summed log-probability and
        entropy of the placer's choices."""
        enc, _ = self.encoder(self._group_embeddings(x, mask, groups, batch))  # (B, G, d)
        b = x.shape[0]
        state = (enc.new_zeros(b, enc.shape[-1]), enc.new_zeros(b, enc.shape[-1]))
        previous = torch.full((b,), self.num_devices, dtype=torch.long, device=x.device)
        chosen, log_prob, entropy = [], x.new_zeros(b), x.new_zeros(b)
        context = enc.new_zeros(b, enc.shape[-1])
        for g in range(self.num_groups):
            step_in = torch.cat([self.device_embedding(previous), context], -1)
            state = self.decoder(step_in, state)
            context = _attend(state[0], enc)
            logits = F.log_softmax(self.device_head(torch.cat([state[0], context], -1)), -1)
            if devices is not None:
                d = devices[:, g]
            elif deterministic:
                d = logits.argmax(-1)
            else:
                d = torch.multinomial(logits.exp(), 1).squeeze(-1)
            log_prob = log_prob + logits.gather(-1, d[:, None]).squeeze(-1)
            entropy = entropy - (logits.exp() * logits).sum(-1)
            chosen.append(d)
            previous = d
        return torch.stack(chosen, 1), log_prob, entropy

    def _group_embeddings(
        self, x: Tensor, mask: Tensor, groups: Tensor, batch: GraphBatch
    ) -> Tensor:
        """``(B, G, d)``: per group, the mean embedding of its ops, the log of its size and the
        fractions of the graph's edges it sends to and receives from each group."""
        g = self.num_groups
        member = F.one_hot(groups.clamp(0, g - 1), g).to(x.dtype) * mask.unsqueeze(-1)  # (B, M, G)
        size = member.sum(1)  # (B, G)
        mean = torch.einsum("bmg,bmd->bgd", member, x) / size.clamp(min=1).unsqueeze(-1)
        src, dst = batch.edge_index[:, 0], batch.edge_index[:, 1]  # (B, E)
        real = torch.arange(src.shape[1], device=src.device) < batch.num_edges[:, None]
        gs = groups.gather(1, src.clamp(min=0)).clamp(0, g - 1)
        gd = groups.gather(1, dst.clamp(min=0)).clamp(0, g - 1)
        flat = (gs * g + gd) * real
        adjacency = x.new_zeros(x.shape[0], g * g).scatter_add_(1, flat, real.to(x.dtype))
        adjacency = adjacency.view(-1, g, g) / batch.num_edges.clamp(min=1)[:, None, None]
        features = torch.cat(
            [mean, torch.log1p(size).unsqueeze(-1), adjacency, adjacency.transpose(1, 2)], -1
        )
        return self.group_proj(features)


def _neighbour_mean(x: Tensor, batch: GraphBatch) -> Tensor:
    """``(B, M, d)``: per op, the mean embedding of its producers and consumers."""
    src, dst = batch.edge_index[:, 0], batch.edge_index[:, 1]
    real = (torch.arange(src.shape[1], device=src.device) < batch.num_edges[:, None]).to(x.dtype)
    src, dst = src.clamp(min=0), dst.clamp(min=0)
    d = x.shape[-1]

    def gather(index: Tensor) -> Tensor:
        return x.gather(1, index.unsqueeze(-1).expand(-1, -1, d)) * real.unsqueeze(-1)

    total = torch.zeros_like(x)
    total.scatter_add_(1, dst.unsqueeze(-1).expand(-1, -1, d), gather(src))
    total.scatter_add_(1, src.unsqueeze(-1).expand(-1, -1, d), gather(dst))
    count = x.new_zeros(x.shape[:2])
    count.scatter_add_(1, dst, real).scatter_add_(1, src, real)
    return total / count.clamp(min=1).unsqueeze(-1)


def _attend(query: Tensor, keys: Tensor) -> Tensor:
    """``(B, d)``: dot-product attention of ``query`` ``(B, d)`` over ``keys`` ``(B, G, d)``."""
    scores = torch.einsum("bd,bgd->bg", query, keys) / keys.shape[-1] ** 0.5
    return torch.einsum("bg,bgd->bd", scores.softmax(-1), keys)


class HDPPolicy(NetworkPolicy):
    """:class:`HDPNetwork` as an SB3 actor-critic policy on
    :class:`envs.hierarchical.HierarchicalPlacementEnv` (``PPO(HDPPolicy, env)``).

    The action is a group per op slot, then a device per group (the environment's layout); ``G``
    and ``D`` are read from the action space.

    Args:
        observation_space: the environment's ``Dict`` space.
        action_space: ``MultiDiscrete([G] * max_ops + [D] * G)``.
        lr_schedule: learning-rate schedule (given by the algorithm).
        task: ``placement`` (the task of the environment).
        hidden: see :class:`HDPNetwork`.
        **kwargs: ``optimizer_class``, ``optimizer_kwargs``; SB3's MLP arguments are ignored.
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        lr_schedule: Schedule,
        task: str | None = "placement",
        hidden: int = 64,
        **kwargs: Any,
    ) -> None:
        if kwargs.pop("use_sde", False):
            raise ValueError("HDPPolicy has discrete actions: use_sde must be False")
        check_kwargs("HDPPolicy", kwargs, "task, " + ", ".join(HDP_DEFAULTS))
        if task != "placement":
            raise ValueError(f"HDPPolicy places ops: its task is placement, got {task!r}")
        if (
            not isinstance(observation_space, spaces.Dict)
            or "op_features" not in observation_space.spaces
        ):
            raise ValueError(
                f"HDPPolicy needs the Dict observation of envs, got {observation_space}"
            )
        op_space = observation_space.spaces["op_features"]
        assert op_space.shape is not None
        self.max_ops = int(op_space.shape[0])
        if not isinstance(action_space, spaces.MultiDiscrete) or action_space.nvec.ndim != 1:
            raise ValueError(
                f"HDPPolicy needs a 1-D MultiDiscrete action space, got {action_space}"
            )
        nvec = np.asarray(action_space.nvec)
        groups = len(nvec) - self.max_ops
        if groups < 1 or len(set(nvec[: self.max_ops].tolist())) != 1 or nvec[0] != groups:
            raise ValueError(
                f"HDPPolicy needs the actions of envs.hierarchical (a group per op slot, then a "
                f"device per group), got {action_space}"
            )
        self.task = task
        self.num_groups, self.num_devices = groups, int(nvec[-1])
        self.net_kwargs = dict(hidden=hidden)
        super().__init__(observation_space, action_space, lr_schedule, **kwargs)

    def _build_network(self) -> None:
        self.network = HDPNetwork(self.num_groups, self.num_devices, **self.net_kwargs)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return own_parameters(
            super()._get_constructor_parameters(), task=self.task, **self.net_kwargs
        )

    def _run(
        self, obs: PyTorchObs, actions: Tensor | None = None, deterministic: bool = False
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``(actions, value (B, 1), log_prob (B,), entropy (B,))``: of ``actions`` when given,
        else of actions sampled (or the most likely, ``deterministic``)."""
        if not isinstance(obs, dict):
            raise ValueError(f"HDPPolicy expects a dict observation, got {type(obs).__name__}")
        batch = graph_batch(obs)
        net = self.network
        x, mask = net.embed(batch)
        logits = F.log_softmax(net.grouper_logits(batch, x), -1)  # (B, M, G)
        if actions is not None:
            groups = actions[:, : self.max_ops].long()
            devices: Tensor | None = actions[:, self.max_ops :].long()
        elif deterministic:
            groups, devices = logits.argmax(-1), None
        else:
            flat = logits.exp().reshape(-1, self.num_groups)
            groups, devices = torch.multinomial(flat, 1).view(logits.shape[:2]), None
        groups = groups * mask  # padding slots: group 0, left out of the log-probability
        real = mask.to(logits.dtype)
        group_lp = (logits.gather(-1, groups.unsqueeze(-1)).squeeze(-1) * real).sum(1)
        group_ent = (-(logits.exp() * logits).sum(-1) * real).sum(1)
        devices, place_lp, place_ent = net.placer(x, mask, groups, batch, devices, deterministic)
        value = net.value(x, mask).unsqueeze(-1)
        chosen = torch.cat([groups, devices], 1)
        return chosen, value, group_lp + place_lp, group_ent + place_ent

    def forward(
        self, obs: PyTorchObs, deterministic: bool = False
    ) -> tuple[Tensor, Tensor, Tensor]:
        actions, value, log_prob, _ = self._run(obs, deterministic=deterministic)
        return actions, value, log_prob

    def evaluate_actions(self, obs: PyTorchObs, actions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        _, value, log_prob, entropy = self._run(obs, actions)
        return value, log_prob, entropy

    def predict_values(self, obs: PyTorchObs) -> Tensor:
        if not isinstance(obs, dict):
            raise ValueError(f"HDPPolicy expects a dict observation, got {type(obs).__name__}")
        batch = graph_batch(obs)
        x, mask = self.network.embed(batch)
        return self.network.value(x, mask).unsqueeze(-1)

    def get_distribution(self, obs: PyTorchObs) -> Any:
        raise ValueError(
            "HDP's distribution is a grouper and an autoregressive placer, not one distribution "
            "per op: use greedy, sample:K or finetune:STEPS (plan:K needs per-op probabilities)"
        )

    def _predict(self, observation: PyTorchObs, deterministic: bool = False) -> Tensor:
        return self._run(observation, deterministic=deterministic)[0]
