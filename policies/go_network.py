"""The GO policy network: GraphSAGE, segment attention with FiLM, per-task heads, value head.

Data flow for a batch of ``B`` observations (``M`` op slots, ``L = max_b n_b`` real ops at most):

.. code-block:: text

    obs ──graph_batch──> GraphBatch ──pack──> PackedGraphs (N real ops, both edge directions)
        ──GraphEncoder──> (N, d) ──to_padded──> h0 (B, L, d)
        ──graph_context──> c0 (B, 2d+18) ──FiLM──> (gamma, beta) per attention layer
    h0 ──SegmentAttention (attn_layers, FiLM)──> trunk (B, L, d)
        ──TaskHeads (head_layers per block, FiLM)──> logits per block (B, L, K) ──pad──> (B, M, K)
        ──graph_context──> c (B, 2d+18) ──ValueHead──> value (B,)

Every hyper-parameter is a field of :class:`GOSettings`, defined there once: a keyword argument
of :class:`GONetwork` and of ``policy_kwargs`` for :class:`policies.sb3_policy.GOPolicy` and the
policies built on it. The defaults are sized for a 2-core CPU; one forward pass on an
86,562-op graph takes under a second there (``bench/bench_policy.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from graphopt.encoding import DEVICE_FEATURES, OP_FEATURES
from graphopt.nn.batching import GraphBatch, graph_batch, pack, to_padded
from graphopt.nn.graph_encoder import GraphEncoder
from policies.film import FiLM, context_dim, graph_context
from policies.heads import TaskHeads, ValueHead
from policies.segment_attention import SegmentAttention


@dataclass(frozen=True)
class GOSettings:
    """The hyper-parameters of :class:`GONetwork`, each documented under its field; their names
    are the keys of ``policy_kwargs`` in the training configs."""

    hidden: int = 64
    """Width ``d`` of every embedding."""
    sage_layers: int = 2
    """GraphSAGE layers."""
    attn_layers: int = 2
    """Segment-attention layers of the shared trunk."""
    head_layers: int | None = None
    """Segment-attention layers of each block's own head; None: 1 when there are several blocks
    (joint task), 0 for a single block."""
    heads: int = 4
    """Attention heads (must divide ``hidden``)."""
    segment_len: int = 128
    """Ops per attention segment."""
    mem_len: int = 128
    """Cached ops before a segment that it also attends to."""
    ffn_mult: int = 2
    """Feed-forward width of the attention layers, as a multiple of ``hidden``."""
    dropout: float = 0.0
    """Dropout everywhere."""
    film: bool = True
    """Modulate every attention layer with FiLM from the graph context."""
    hint_weight: float = 4.0
    """Initial weight ``w_j`` of the hint bias (:class:`GONetwork`)."""
    device_agnostic: bool = False
    """The placement block's weights do not depend on the device count: each device is a row
    embedded from its features (:data:`graphopt.encoding.DEVICE_FEATURES`), ops are scored
    against the rows (:class:`~policies.heads.TaskHeads`), and the hinted device enters as its
    row's embedding; so a policy trained on one cluster runs on another of any size."""

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The hyper-parameters' names, in field order."""
        return tuple(f.name for f in fields(cls))

    @classmethod
    def pop_from(cls, kwargs: dict[str, Any]) -> GOSettings:
        """The settings of the hyper-parameters in ``kwargs`` (the others at their defaults),
        removed from ``kwargs``."""
        return cls(**{name: kwargs.pop(name) for name in cls.names() if name in kwargs})

    def to_kwargs(self) -> dict[str, Any]:
        """The hyper-parameters as keyword arguments (``policy_kwargs``)."""
        return asdict(self)


class GONetwork(nn.Module):
    """GO's policy and value network over padded graph observations.

    Args:
        num_classes: classes per action block in action-layout order, e.g. ``{"placement": 4}``
            or ``{"placement": 4, "scheduling": 8, "fusion": 2}`` (see
            :data:`graphopt.tasks.TASKS`).
        settings: the hyper-parameters (default: :class:`GOSettings`'s defaults).
        context_features: per-op context features the observations carry (key ``op_context``,
            e.g. the reference schedule's slack and waits; default 0: none), read beside the op
            features by the GraphSAGE encoder.
        outputs: real-valued outputs per op (default 0: none), a linear map of the trunk
            returned as ``logits["outputs"]`` ``(B, M, outputs)``: the per-op inputs of a
            decoder (:class:`policies.decoder_policy.GODecoderPolicy`).
        **hyper: fields of :class:`GOSettings` (``hidden=32``, ...), replacing those of
            ``settings``.

    The hint (observation key ``hint``: the reference decision, e.g. the best heuristic's
    placement) enters twice when present: an embedding of each op's hinted value per block is added
    to the node embeddings after GraphSAGE (index 0 = no hint), and block ``j``'s logits get
    ``w_j * onehot(hint_j)`` with a learned ``w_j``. At initialisation the greedy decision is the
    hint and samples stay near it; training learns where to depart from it.

    Shapes:
        - input: a mapping of observation tensors with a batch dimension (any dtype; see
          :func:`graphopt.nn.batching.graph_batch`) or a :class:`~graphopt.nn.batching.GraphBatch`.
        - output: ``(logits, value, mask)``: logits a dict block -> ``(B, M, K_block)`` (padding
          slots hold zeros), value ``(B,)``, mask ``(B, M)`` bool of real op slots.
    """

    def __init__(
        self,
        num_classes: Mapping[str, int],
        settings: GOSettings | None = None,
        *,
        context_features: int = 0,
        outputs: int = 0,
        **hyper: Any,
    ) -> None:
        super().__init__()
        if not num_classes:
            raise ValueError("num_classes: give at least one action block, e.g. {'placement': 4}")
        self.settings = replace(settings if settings is not None else GOSettings(), **hyper)
        """The hyper-parameters the network was built with."""
        hidden, attn_layers = self.settings.hidden, self.settings.attn_layers
        head_layers = self.settings.head_layers
        if head_layers is None:
            head_layers = 1 if len(num_classes) > 1 else 0
        attn = dict(
            hidden=hidden,
            heads=self.settings.heads,
            segment_len=self.settings.segment_len,
            mem_len=self.settings.mem_len,
            ffn_mult=self.settings.ffn_mult,
            dropout=self.settings.dropout,
        )
        self.num_classes = dict(num_classes)
        self.context_features = int(context_features)
        self.encoder = GraphEncoder(
            hidden,
            self.settings.sage_layers,
            num_op_features=len(OP_FEATURES) + self.context_features,
            dropout=self.settings.dropout,
        )
        self.trunk = SegmentAttention(attn_layers, **attn)  # type: ignore[arg-type]
        self.heads = TaskHeads(
            num_classes,
            head_layers=head_layers,
            device_agnostic=self.settings.device_agnostic,
            **attn,  # type: ignore[arg-type]
        )
        self.device_agnostic = self.heads.device_agnostic
        self.device_embed = (
            nn.Sequential(
                nn.Linear(len(DEVICE_FEATURES), hidden), nn.ReLU(), nn.Linear(hidden, hidden)
            )
            if self.device_agnostic
            else None
        )
        self.attn_layers = attn_layers
        num_film = attn_layers + self.heads.num_film_layers
        self.film = FiLM(context_dim(hidden), hidden, num_film) if self.settings.film else None
        self.value_head = ValueHead(context_dim(hidden), hidden)
        # a device-agnostic placement block's hint is its device's row (a table of D + 1 would
        # tie the weights to D): the first row of its table stands for "no hint"
        self.hint_embed = nn.ModuleList(
            nn.Embedding(1 if self._by_device(name) else k + 1, hidden)
            for name, k in self.num_classes.items()
        )
        for emb in self.hint_embed:
            assert isinstance(emb, nn.Embedding)
            nn.init.normal_(emb.weight, std=0.02)
        weight = float(self.settings.hint_weight)
        self.hint_weight = nn.Parameter(torch.full((len(self.num_classes),), weight))
        self.output_head = nn.Linear(hidden, outputs) if outputs > 0 else None

    def forward(
        self, obs: Mapping[str, Tensor] | GraphBatch, with_logits: bool = True
    ) -> tuple[dict[str, Tensor], Tensor, Tensor]:
        """Logits, value and op-slot mask (``with_logits=False`` skips the heads: empty dict)."""
        batch = obs if isinstance(obs, GraphBatch) else graph_batch(obs)
        if self.context_features:
            batch = with_context(batch, self.context_features)
        packed = pack(batch)
        h = to_padded(self.encoder(packed), packed)  # (B, L, d)
        mask = packed.node_mask
        hints = self._hint_blocks(batch, h.shape[1])
        keys = None
        if self.device_embed is not None:
            keys = self.device_embed(batch.device_features)  # (B, D_max, d)
        for name, emb, hint in zip(self.num_classes, self.hint_embed, hints, strict=False):
            if keys is not None and self._by_device(name):  # the hinted device's row
                rows = torch.gather(
                    keys, 1, hint.clamp(min=0).unsqueeze(-1).expand(-1, -1, keys.shape[-1])
                )
                assert isinstance(emb, nn.Embedding)
                hinted = torch.where((hint >= 0).unsqueeze(-1), rows, emb.weight[0])
                h = h + hinted * mask.unsqueeze(-1)
            else:  # no hints: no-op
                h = h + emb(hint + 1) * mask.unsqueeze(-1)
        films = None
        if self.film is not None:
            c0 = graph_context(
                h, mask, batch.graph_features, batch.device_features, batch.device_mask
            )
            films = self.film(c0)
        h = self.trunk(h, mask, None if films is None else films[: self.attn_layers])
        context = graph_context(
            h, mask, batch.graph_features, batch.device_features, batch.device_mask
        )
        value = self.value_head(context)
        pad = batch.max_ops - mask.shape[1]
        full_mask = F.pad(mask, (0, pad))  # bool stays bool (pads with False)
        logits: dict[str, Tensor] = {}
        if with_logits:
            head_films = None if films is None else films[self.attn_layers :]
            for j, (name, x) in enumerate(self.heads(h, mask, head_films, keys).items()):
                if hints:
                    bias = F.one_hot(hints[j].clamp(min=0), x.shape[-1]).to(x.dtype)
                    x = x + self.hint_weight[j] * bias * (hints[j] >= 0).unsqueeze(-1)
                if name == "fusion" and batch.fusion_mask is not None:
                    x = mask_fusion(x, batch.fusion_mask[:, : x.shape[1]])
                logits[name] = F.pad(x, (0, 0, 0, pad))
            if self.output_head is not None:
                out = self.output_head(h) * mask.unsqueeze(-1)
                logits["outputs"] = F.pad(out, (0, 0, 0, pad))
        return logits, value, full_mask

    def _by_device(self, name: str) -> bool:
        return self.device_agnostic and name == "placement"

    def _hint_blocks(self, batch: GraphBatch, length: int) -> list[Tensor]:
        """Per block, the hint of the first ``length`` op slots, ``(B, L)`` in ``[-1, K)``; empty
        when the batch carries no hint."""
        if batch.hint is None:
            return []
        m = batch.max_ops
        return [batch.hint[:, j * m : j * m + length] for j in range(len(self.num_classes))]


def with_context(batch: GraphBatch, width: int) -> GraphBatch:
    """``batch`` with its ``op_context`` ``(B, M, width)`` appended to the op features."""
    ctx = batch.op_context
    if ctx is None or ctx.shape[-1] != width:
        got = None if ctx is None else tuple(ctx.shape)
        raise ValueError(
            f"the network reads {width} context features per op (observation key op_context), "
            f"got {got}: evaluate it on environments made with the decoder it was trained with"
        )
    return replace(batch, op_features=torch.cat([batch.op_features, ctx], dim=-1))


def mask_fusion(logits: Tensor, allowed: Tensor) -> Tensor:
    """Fusion logits ``(B, L, 2)`` with class 1 (fuse) at ``-inf`` where ``allowed`` ``(B, L)`` is
    False: a masked bit is never sampled nor chosen (its probability is exactly 0)."""
    forbid = torch.zeros_like(logits)
    forbid[..., 1] = torch.where(allowed, 0.0, float("-inf"))
    return logits + forbid
