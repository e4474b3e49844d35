"""Placeto (Addanki et al., NeurIPS 2019) as a baseline: a graph embedding of the current placement
that chooses the visited node's device (environment: :mod:`envs.placeto`).

Per op, the input is its features and op type (as every graphopt network reads them,
:mod:`graphopt.encoding`), its current device, whether it was visited in this episode, and its
relation to the visited node. Placeto's embedding then passes messages along the DAG in both
directions, and pools the nodes by their relation to the visited node:

.. code-block:: text

    x_i = type_emb(op_type_i) + W_f f_i + dev_emb(placement_i) + vis_emb(visited_i)
          + rel_emb(relation_i)
    h_i <- LayerNorm(h_i + ReLU(SAGE_up(h, parents)_i + SAGE_down(h, children)_i))   (K rounds)
    z   = [h_v ; mean_{ancestors} h ; mean_{descendants} h ; mean_{parallel} h]
    logits = MLP(z) (D devices),  value = MLP(z)

Placeto's message passing is a full sweep in topological order (each node sees all its
descendants, then all its ancestors); ``K`` rounds of directed mean aggregation are its
fixed-depth version (each node sees ``K`` hops up and down), which batches on the GPU and CPU
without a loop over ops. The three pools are Placeto's parent, child and parallel groups.
The policy has one output per device of its cluster: it transfers across graphs, not device
counts.
"""

from __future__ import annotations

from typing import Any

import torch
from gymnasium import spaces
from stable_baselines3.common.distributions import CategoricalDistribution
from stable_baselines3.common.type_aliases import PyTorchObs, Schedule
from torch import Tensor, nn
from torch_geometric.nn import SAGEConv

from graphopt.encoding import NUM_OP_TYPES, OP_FEATURES
from graphopt.nn.batching import graph_batch, pack
from graphopt.nn.graph_encoder import mean_adjacency
from policies.sb3_policy import CategoricalPolicy, check_kwargs, own_parameters

PLACETO_DEFAULTS: dict[str, Any] = dict(hidden=64, layers=3)
"""Keyword arguments of :class:`PlacetoNetwork` (and ``policy_kwargs`` of ``policy: placeto``)."""
RELATIONS = 4
"""ANCESTOR, DESCENDANT, CURRENT, PARALLEL (:mod:`envs.placeto`)."""


class PlacetoNetwork(nn.Module):
    """Placeto's graph embedding, policy and value (module docstring).

    Args:
        num_devices: devices ``D``.
        hidden: width ``d`` (default 64).
        layers: rounds ``K`` of message passing up and down the DAG (default 3).

    Shapes:
        - input: observation tensors of :class:`envs.placeto.PlacetoEnv` with a batch dimension.
        - output: ``(logits (B, D), value (B,))``.
    """

    def __init__(self, num_devices: int, hidden: int = 64, layers: int = 3) -> None:
        super().__init__()
        self.type_embedding = nn.Embedding(NUM_OP_TYPES, hidden, padding_idx=0)
        self.feature_proj = nn.Linear(len(OP_FEATURES), hidden)
        self.device_embedding = nn.Embedding(num_devices + 1, hidden)  # row 0: no device
        self.visited_embedding = nn.Embedding(2, hidden)
        self.relation_embedding = nn.Embedding(RELATIONS, hidden)
        self.up = nn.ModuleList(SAGEConv(hidden, hidden, aggr="mean") for _ in range(layers))
        self.down = nn.ModuleList(SAGEConv(hidden, hidden, aggr="mean") for _ in range(layers))
        self.norms = nn.ModuleList(nn.LayerNorm(hidden) for _ in range(layers))
        self.policy_head = nn.Sequential(
            nn.Linear(4 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, num_devices)
        )
        last = self.policy_head[-1]
        assert isinstance(last, nn.Linear)
        nn.init.orthogonal_(last.weight, gain=0.01)  # near-uniform initial policy
        nn.init.zeros_(last.bias)
        self.value_head = nn.Sequential(
            nn.Linear(4 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1)
        )

    def forward(self, obs: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        batch = graph_batch(obs)
        packed = pack(batch)
        mask = packed.node_mask  # (B, L)
        length = mask.shape[1]

        def real(key: str) -> Tensor:  # the real ops' entries of a (B, M) observation
            return obs[key][:, :length][mask].long()

        relation = real("relation")
        h = (
            self.type_embedding(packed.op_type)
            + self.feature_proj(packed.op_features)
            + self.device_embedding(real("placement") + 1)
            + self.visited_embedding(real("visited").clamp(0, 1))
            + self.relation_embedding(relation.clamp(0, RELATIONS - 1))
        )
        n = packed.num_nodes
        from_parents = mean_adjacency(packed.edge_index, n, h.dtype)
        from_children = mean_adjacency(packed.edge_index.flip(0), n, h.dtype)
        for up, down, norm in zip(self.up, self.down, self.norms, strict=True):
            h = norm(h + torch.relu(down(h, from_parents) + up(h, from_children)))
        z = torch.cat(
            [self._pool(h, packed.batch, relation == r, mask.shape[0]) for r in (3, 1, 2, 0)], -1
        )
        return self.policy_head(z), self.value_head(z).squeeze(-1)

    @staticmethod
    def _pool(h: Tensor, graph: Tensor, member: Tensor, num_graphs: int) -> Tensor:
        """``(B, d)``: per graph, the mean of ``h`` over the nodes where ``member`` (zero if
        none)."""
        w = member.to(h.dtype)
        total = h.new_zeros(num_graphs, h.shape[1]).index_add_(0, graph, h * w[:, None])
        count = h.new_zeros(num_graphs).index_add_(0, graph, w)
        return total / count.clamp(min=1.0)[:, None]


class PlacetoPolicy(CategoricalPolicy):
    """:class:`PlacetoNetwork` as an SB3 actor-critic policy on :class:`envs.placeto.PlacetoEnv`.

    Args:
        observation_space: the environment's ``Dict`` space.
        action_space: ``Discrete(D)``.
        lr_schedule: learning-rate schedule (given by the algorithm).
        hidden, layers: see :class:`PlacetoNetwork` (defaults :data:`PLACETO_DEFAULTS`).
        **kwargs: ``optimizer_class``, ``optimizer_kwargs``; SB3's MLP arguments are ignored.
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        lr_schedule: Schedule,
        hidden: int = 64,
        layers: int = 3,
        **kwargs: Any,
    ) -> None:
        if kwargs.pop("use_sde", False):
            raise ValueError("PlacetoPolicy has discrete actions: use_sde must be False")
        check_kwargs("PlacetoPolicy", kwargs, ", ".join(PLACETO_DEFAULTS))
        if (
            not isinstance(action_space, spaces.Discrete)
            or not isinstance(observation_space, spaces.Dict)
            or "relation" not in observation_space.spaces
        ):
            raise ValueError(
                "PlacetoPolicy needs the environment of envs.placeto (a Dict observation with "
                f"'relation', Discrete actions); got {observation_space} and {action_space}"
            )
        self.net_kwargs = dict(hidden=hidden, layers=layers)
        super().__init__(observation_space, action_space, lr_schedule, **kwargs)

    def _build_network(self) -> None:
        assert isinstance(self.action_space, spaces.Discrete)
        self.network = PlacetoNetwork(int(self.action_space.n), **self.net_kwargs)
        self.action_dist = CategoricalDistribution(int(self.action_space.n))

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return own_parameters(super()._get_constructor_parameters(), **self.net_kwargs)

    def _run(self, obs: PyTorchObs) -> tuple[CategoricalDistribution, Tensor]:
        if not isinstance(obs, dict):
            raise ValueError(f"PlacetoPolicy expects a dict observation, got {type(obs).__name__}")
        logits, value = self.network(obs)
        dist = CategoricalDistribution(logits.shape[-1]).proba_distribution(action_logits=logits)
        return dist, value.unsqueeze(-1)

    def evaluate_actions(self, obs: PyTorchObs, actions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """As :class:`~policies.sb3_policy.CategoricalPolicy`'s, with the entropy taken before the
        log-probabilities: the order autograd sums their gradients in, kept as Placeto's runs were
        measured (a seeded run is reproduced bit for bit; the other order drifts apart after a few
        thousand decisions, tests/graphopt/train/test_learned_baselines.py)."""
        dist, value = self._run(obs)
        entropy = dist.entropy()
        return value, dist.log_prob(actions), entropy
