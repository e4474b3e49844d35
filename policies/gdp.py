"""GDP (Zhou et al. 2019, "GDP: Generalized Device Placement for Dataflow Graphs") as a baseline.

GDP places every op of a graph at once: GraphSAGE embeds the ops, a segment-recurrent attention
placer (Transformer-XL style) gives each op a view of the whole graph, and a linear map gives
each op a distribution over the ``D`` devices; PPO trains it, pre-trained on a family of graphs
and fine-tuned on a new one. GO grew out of it; what GO adds is left out here:

- no FiLM (one set of weights for every graph),
- no hint (the observation's reference decision is ignored: GDP starts from nothing),
- one placement head (GDP decides placement only, so ``task`` must be ``placement``).

.. code-block:: text

    obs ──GraphEncoder (GraphSAGE)──> (N, d) ──SegmentAttention──> (B, L, d)
        ──Linear──> logits (B, L, D)                ──pool──> ValueHead ──> value (B,)

:class:`GDPPolicy` reuses :class:`~policies.sb3_policy.GOPolicy`'s batching (one embedding per
distinct graph, ``obs_mode="id"``) and its batched categorical; only the network differs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch.nn.functional as F
from gymnasium import spaces
from stable_baselines3.common.type_aliases import Schedule
from torch import Tensor, nn

from graphopt.encoding import OP_FEATURES
from graphopt.nn.batching import GraphBatch, graph_batch, pack, to_padded
from graphopt.nn.graph_encoder import GraphEncoder
from policies.distributions import GOActionDistribution
from policies.film import context_dim, graph_context
from policies.go_network import GOSettings
from policies.heads import ValueHead
from policies.sb3_policy import GOPolicy, check_kwargs, own_parameters
from policies.segment_attention import SegmentAttention

GDP_DEFAULTS: dict[str, Any] = dict(
    hidden=64,
    sage_layers=2,
    attn_layers=2,
    heads=4,
    segment_len=128,
    mem_len=128,
    ffn_mult=2,
    dropout=0.0,
)
"""Keyword arguments of :class:`GDPNetwork` (and of ``policy_kwargs`` for ``policy: gdp``)."""


class GDPNetwork(nn.Module):
    """GDP's placer: GraphSAGE, segment attention, a linear device head and a value head.

    Args:
        num_devices: devices ``D`` (classes per op).
        hidden: width ``d`` of every embedding (default 64).
        sage_layers: GraphSAGE layers (default 2).
        attn_layers: segment-attention layers (default 2).
        heads: attention heads (default 4; must divide ``hidden``).
        segment_len, mem_len: ops per attention segment and cached ops before it (default 128).
        ffn_mult: feed-forward width of the attention layers, a multiple of ``hidden`` (default 2).
        dropout: dropout everywhere (default 0).

    Shapes:
        - input: observation tensors with a batch dimension or a
          :class:`~graphopt.nn.batching.GraphBatch` (its ``hint`` is ignored).
        - output: ``(logits, value, mask)``: ``{"placement": (B, M, D)}`` (zeros in padding
          slots), ``(B,)`` and ``(B, M)`` bool of real op slots, as
          :class:`~policies.go_network.GONetwork` returns them.
    """

    def __init__(
        self,
        num_devices: int,
        hidden: int = 64,
        sage_layers: int = 2,
        attn_layers: int = 2,
        heads: int = 4,
        segment_len: int = 128,
        mem_len: int = 128,
        ffn_mult: int = 2,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.num_classes = {"placement": int(num_devices)}
        self.encoder = GraphEncoder(hidden, sage_layers, num_op_features=len(OP_FEATURES))
        self.placer = SegmentAttention(
            attn_layers,
            hidden=hidden,
            heads=heads,
            segment_len=segment_len,
            mem_len=mem_len,
            ffn_mult=ffn_mult,
            dropout=dropout,
        )
        self.device_head = nn.Linear(hidden, int(num_devices))
        nn.init.orthogonal_(self.device_head.weight, gain=0.01)  # near-uniform initial policy
        nn.init.zeros_(self.device_head.bias)
        self.value_head = ValueHead(context_dim(hidden), hidden)

    def forward(
        self, obs: Mapping[str, Tensor] | GraphBatch, with_logits: bool = True
    ) -> tuple[dict[str, Tensor], Tensor, Tensor]:
        """Logits, value and op-slot mask (``with_logits=False`` skips the head: empty dict)."""
        batch = obs if isinstance(obs, GraphBatch) else graph_batch(obs)
        packed = pack(batch)
        mask = packed.node_mask
        h = self.placer(to_padded(self.encoder(packed), packed), mask)
        context = graph_context(
            h, mask, batch.graph_features, batch.device_features, batch.device_mask
        )
        value = self.value_head(context)
        pad = batch.max_ops - mask.shape[1]
        logits: dict[str, Tensor] = {}
        if with_logits:
            logits["placement"] = F.pad(self.device_head(h), (0, 0, 0, pad))
        return logits, value, F.pad(mask, (0, pad))


class GDPPolicy(GOPolicy):
    """:class:`GDPNetwork` as an SB3 actor-critic policy (``PPO(GDPPolicy, env)``).

    Args:
        observation_space, action_space, lr_schedule, graphs, dedup: as for
            :class:`~policies.sb3_policy.GOPolicy`.
        task: must be ``placement`` (GDP places; it neither schedules nor fuses).
        **kwargs: ``hidden``, ``sage_layers``, ``attn_layers``, ``heads``, ``segment_len``,
            ``mem_len``, ``ffn_mult``, ``dropout``: see :class:`GDPNetwork` (defaults
            :data:`GDP_DEFAULTS`); ``optimizer_class``, ``optimizer_kwargs``; SB3's MLP arguments
            are ignored.
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        lr_schedule: Schedule,
        task: str | None = "placement",
        graphs: Sequence[Mapping[str, np.ndarray]] | None = None,
        dedup: bool = True,
        **kwargs: Any,
    ) -> None:
        if task != "placement":
            raise ValueError(f"GDPPolicy places ops: its task is placement, got {task!r}")
        self.gdp_kwargs: dict[str, Any] = {k: kwargs.pop(k, v) for k, v in GDP_DEFAULTS.items()}
        allowed = f"task, graphs, dedup, {', '.join(GDP_DEFAULTS)}"
        check_kwargs("GDPPolicy", {k: v for k, v in kwargs.items() if k != "use_sde"}, allowed)
        super().__init__(
            observation_space, action_space, lr_schedule, task, graphs, dedup, **kwargs
        )

    def _build_network(self) -> None:
        self.network = GDPNetwork(self.num_classes["placement"], **self.gdp_kwargs)  # type: ignore[assignment]
        self.action_dist = GOActionDistribution(list(self.num_classes.values()))

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        for key in GOSettings.names():  # GO's network arguments, which GDP does not take
            data.pop(key, None)
        return own_parameters(data, **self.gdp_kwargs)
