"""The step-wise placement policy: GO's encoder once per graph, a small head per step.

.. code-block:: text

    encoded graph ──GraphEncoder (GraphSAGE)──> (N, d) ──SegmentAttention + FiLM──> (N, d)
        ──proj──> pre (N, H)                                   [once per graph and update]
    step k (op v, D candidate devices):
        logits[p] = w2 . relu(pre[v] + W_s feat[k, p] + b1) + b2 + a * anchor[k, p]   (masked: -inf)

``feat`` are the partial schedule's features of :data:`graphopt.decoders.stepwise.SCHEDULE_FEATURES`.
The head is small enough that the decoder evaluates it inside its compiled loop
(:func:`graphopt.decoders.stepwise.run_episode` with :meth:`StepPolicy.head_params`), and this
module's :meth:`StepPolicy.logits` is the same function in torch, batched over every recorded
step, for the updates. The head scores devices from their features alone, so one policy runs on
any device count.

Encoders (``encoder``): ``"go"`` (GraphSAGE, segment attention, FiLM: GO's steps 1-3), ``"mlp"``
(op-type embedding and op features through an MLP, no message passing: the ablation of GO's
Table 4). ``schedule_features=False`` zeroes every feature but ``anchor`` (the ablation without
the schedule's state). ``a`` is a learned weight on the ``anchor`` feature, initially
``anchor_weight`` (3.0: on 4 devices the reference's device is sampled with probability 0.87), so
that sampling starts near the reference placement, as GO's hint weight does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from graphopt.decoders.stepwise import ANCHOR_FEATURE, NUM_FEATURES, HeadParams
from graphopt.encoding import NUM_OP_TYPES, OP_FEATURES
from graphopt.nn.batching import graph_batch, pack, stack_observations, to_padded
from graphopt.nn.graph_encoder import GraphEncoder
from policies.film import FiLM, context_dim, graph_context
from policies.go_network import GOSettings
from policies.segment_attention import SegmentAttention

ENCODERS = ("go", "mlp")
POSITION = [name for name, _ in OP_FEATURES].index("position")
POSITION_HIDDEN = 128
"""Width of the MLP that maps an op's position features into ``pre``."""
GO = GOSettings()
"""The GO network's defaults, which the GO encoder's arguments share."""


class StepPolicy(nn.Module):
    """Encoder + per-step device head (module docstring).

    Args:
        hidden: width ``d`` of the op embeddings.
        head_hidden: width ``H`` of the head's hidden layer (default 32).
        encoder: ``"go"`` or ``"mlp"``.
        sage_layers: GraphSAGE layers of the GO encoder.
        attn_layers: segment-attention layers.
        heads: attention heads.
        segment_len: ops per attention segment.
        mem_len: cached ops each segment attends to.
        film: FiLM on the attention layers.

    The GO encoder's arguments default to :class:`policies.go_network.GOSettings`' values.
        schedule_features: read the schedule's features (default True); False keeps only
            ``anchor``.
        anchor_weight: the anchor's initial logit bonus.
        positions: ``K`` > 0 adds an MLP of ``K`` sine and cosine frequencies of the op's
            topological position to ``pre`` (Fourier features; Tancik et al., 2020): a network
            trained on one graph can then tell neighbouring ops apart and hold a placement
            exactly (0: none).

    Shapes:
        - :meth:`embed`: one encoded observation -> ``(N, H)``.
        - :meth:`logits`: pre ``(S, H)``, feats ``(S, D, F)``, masks ``(S, D)`` -> ``(S, D)``.
    """

    def __init__(
        self,
        hidden: int = GO.hidden,
        head_hidden: int = 32,
        encoder: str = "go",
        sage_layers: int = GO.sage_layers,
        attn_layers: int = GO.attn_layers,
        heads: int = GO.heads,
        segment_len: int = GO.segment_len,
        mem_len: int = GO.mem_len,
        film: bool = GO.film,
        schedule_features: bool = True,
        anchor_weight: float = 3.0,
        positions: int = 0,
    ) -> None:
        super().__init__()
        if encoder not in ENCODERS:
            raise ValueError(f"unknown encoder {encoder!r}; choose one of: {', '.join(ENCODERS)}")
        self.config: dict[str, Any] = dict(
            hidden=hidden,
            head_hidden=head_hidden,
            encoder=encoder,
            sage_layers=sage_layers,
            attn_layers=attn_layers,
            heads=heads,
            segment_len=segment_len,
            mem_len=mem_len,
            film=film,
            schedule_features=schedule_features,
            anchor_weight=anchor_weight,
            positions=positions,
        )
        if (
            isinstance(positions, bool)
            or not isinstance(positions, int)
            or not 0 <= positions <= 16
        ):
            raise ValueError(f"positions must be an integer in 0..16, got {positions!r}")
        self.encoder_kind = encoder
        if encoder == "go":
            self.encoder = GraphEncoder(hidden, sage_layers, num_op_features=len(OP_FEATURES))
            self.trunk: nn.Module | None = SegmentAttention(
                attn_layers, hidden=hidden, heads=heads, segment_len=segment_len, mem_len=mem_len
            )
            self.film = FiLM(context_dim(hidden), hidden, attn_layers) if film else None
        else:
            self.type_embed = nn.Embedding(NUM_OP_TYPES, hidden, padding_idx=0)
            self.mlp = nn.Sequential(
                nn.Linear(len(OP_FEATURES) + hidden, hidden),
                nn.ReLU(),
                nn.Linear(hidden, hidden),
                nn.ReLU(),
            )
            self.trunk = None
            self.film = None
        self.proj = nn.Linear(hidden, head_hidden, bias=False)
        self.positions = positions
        self.pos_proj = (
            nn.Sequential(
                nn.Linear(2 * positions, POSITION_HIDDEN),
                nn.ReLU(),
                nn.Linear(POSITION_HIDDEN, head_hidden, bias=False),
            )
            if positions
            else None
        )
        self.w_feat = nn.Linear(NUM_FEATURES, head_hidden)
        self.out = nn.Linear(head_hidden, 1)
        # the anchor's logit bonus: at initialisation samples stay near the reference placement
        # (GO's hint weight, policies.go_network); imitation and PPO learn it like every weight
        with torch.no_grad():
            self.w_feat.weight[:, ANCHOR_FEATURE] = 0.0
        self.anchor_weight = nn.Parameter(torch.tensor(float(anchor_weight)))
        keep = torch.ones(NUM_FEATURES)
        if not schedule_features:
            keep.zero_()
            keep[ANCHOR_FEATURE] = 1.0
        self.feature_keep: Tensor
        self.register_buffer("feature_keep", keep)

    # ------------------------------------------------------------------ encoder
    def embed(self, observation: Mapping[str, np.ndarray]) -> Tensor:
        """``pre`` ``(N, H)`` of one encoded graph (:func:`graphopt.encoding.encode`'s
        observation, unbatched numpy arrays)."""
        return self.embed_many([observation])[0]

    def embed_many(self, observations: Sequence[Mapping[str, np.ndarray]]) -> list[Tensor]:
        """``pre`` ``(N_b, H)`` of each of several encoded graphs, in one batched pass."""
        pres = self._embed_many(observations)
        if self.pos_proj is None:
            return pres
        return [
            pre + self.pos_proj(self._fourier(obs["op_features"][: len(pre)], pre.device))
            for pre, obs in zip(pres, observations, strict=True)
        ]

    def _fourier(self, op_features: np.ndarray, device: torch.device) -> Tensor:
        """``sin`` and ``cos`` of ``2^k pi x`` for ``k < positions``, ``x`` the op's topological
        position in ``[0, 1]``: features sharp enough to tell neighbouring ops apart."""
        x = torch.tensor(np.asarray(op_features[:, POSITION], dtype=np.float32), device=device)
        angles = x[:, None] * (math.pi * 2.0 ** torch.arange(self.positions, device=device))
        return torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)

    def _embed_many(self, observations: Sequence[Mapping[str, np.ndarray]]) -> list[Tensor]:
        device = self.proj.weight.device
        stacked = stack_observations(list(observations))
        batch = graph_batch({k: v.to(device) for k, v in stacked.items()})
        packed = pack(batch)
        counts = [int(c) for c in batch.num_ops]
        if self.encoder_kind == "mlp":
            x = torch.cat([packed.op_features, self.type_embed(packed.op_type)], dim=-1)
            return list(torch.split(self.proj(self.mlp(x)), counts))
        h = to_padded(self.encoder(packed), packed)
        mask = packed.node_mask
        films = None
        if self.film is not None:
            c0 = graph_context(
                h, mask, batch.graph_features, batch.device_features, batch.device_mask
            )
            films = self.film(c0)
        assert self.trunk is not None
        h = self.proj(self.trunk(h, mask, films))
        return [h[b, :n] for b, n in enumerate(counts)]

    # ------------------------------------------------------------------ head
    def logits(self, pre: Tensor, feats: Tensor, masks: Tensor) -> Tensor:
        """The head's logits ``(S, D)`` of ``S`` steps: ``pre`` ``(S, H)`` (each step's op's
        row), ``feats`` ``(S, D, F)``, ``masks`` ``(S, D)`` bool (False: ``-inf``)."""
        x = self.w_feat(feats * self.feature_keep) + pre[:, None, :]
        out = self.out(torch.relu(x)).squeeze(-1) + self.anchor_weight * feats[..., ANCHOR_FEATURE]
        return out.masked_fill(~masks, float("-inf"))

    def head_params(self, pre: Tensor) -> HeadParams:
        """The head's weights for the compiled decoder (numpy, on the CPU), with ``pre``
        ``(N, H)`` of one graph; the feature mask is folded into ``w_feat``."""
        with torch.no_grad():
            w_feat = (self.w_feat.weight * self.feature_keep[None, :]).T  # (F, H)
            return HeadParams(
                pre=pre.detach().double().cpu().numpy(),
                w_feat=w_feat.double().cpu().numpy(),
                b1=self.w_feat.bias.detach().double().cpu().numpy(),
                w2=self.out.weight.detach()[0].double().cpu().numpy(),
                b2=float(self.out.bias.detach()[0]),
                anchor_weight=float(self.anchor_weight.detach()),
            )
