"""Per-task output heads and the value head (GO, steps 4 and 5).

A task decides one value per op; its logits are ``(B, L, K)`` with ``K`` = devices ``D``
(placement), priority levels ``P`` (scheduling) or 2 (fusion). The joint task has all three
blocks, in the action layout of the environments (placement, scheduling, fusion). When a network
has several blocks, each block first goes through its own :class:`SegmentAttention` layers on the
shared trunk (GO, Sec. 3.3: "each task has its own attention layers"); each of these layers is
residual, so a head computes ``h_task = h_trunk + delta_task(h_trunk)`` and the trunk is shared.

The value head reads the pooled graph context of the trunk (:func:`policies.film.graph_context`):
``V = w_2^T ReLU(W_1 c + b_1) + b_2``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch
from torch import Tensor, nn

from graphopt.tasks import ONE_SHOT_TASKS, get_task
from policies.segment_attention import FilmParams, SegmentAttention


def blocks_of(task: str) -> tuple[str, ...]:
    """The action blocks of the one-shot ``task`` in the environments' layout
    (:data:`graphopt.tasks.TASKS`); ``ValueError`` for an unknown task."""
    return get_task(task, ONE_SHOT_TASKS).blocks


class TaskHeads(nn.Module):
    """Logits of every block: optional per-block attention layers, then a linear map to ``K``.

    Args:
        num_classes: classes ``K`` per block, in action-layout order, e.g.
            ``{"placement": 4, "scheduling": 8, "fusion": 2}``.
        hidden: width ``d`` of the trunk.
        head_layers: :class:`SegmentAttention` layers per block (0: a linear map on the trunk).
        heads, segment_len, mem_len, ffn_mult, dropout: of those layers, see
            :class:`~policies.segment_attention.SegmentAttentionLayer`.

        device_agnostic: the placement block scores each op against each device's embedding
            (``logit[i, k] = q_i . e_k / sqrt(d) + b``, ``q_i`` a linear map of the op's state,
            ``e_k`` the ``device_keys`` of device ``k``) instead of a linear map to ``K`` classes:
            its weights do not depend on the device count.

    Shapes:
        - h: ``(B, L, d)``; mask: ``(B, L)``; films: ``len(num_classes) * head_layers`` pairs, or
          None; device_keys: ``(B, D_max, d)`` (device-agnostic placement only).
        - output: dict block -> ``(B, L, K_block)`` logits.
    """

    def __init__(
        self,
        num_classes: Mapping[str, int],
        hidden: int = 64,
        head_layers: int = 0,
        heads: int = 4,
        segment_len: int = 128,
        mem_len: int = 128,
        ffn_mult: int = 2,
        dropout: float = 0.0,
        device_agnostic: bool = False,
    ) -> None:
        super().__init__()
        self.names = tuple(num_classes)
        self.num_classes = dict(num_classes)
        self.device_agnostic = device_agnostic and "placement" in num_classes
        self.head_layers = head_layers
        self.attention = nn.ModuleDict(
            {
                name: SegmentAttention(
                    head_layers,
                    hidden=hidden,
                    heads=heads,
                    segment_len=segment_len,
                    mem_len=mem_len,
                    ffn_mult=ffn_mult,
                    dropout=dropout,
                )
                for name in self.names
            }
        )
        self.logits = nn.ModuleDict(
            {
                name: nn.Linear(hidden, hidden if self._by_device(name) else k)
                for name, k in num_classes.items()
            }
        )
        for layer in self.logits.values():  # near-uniform initial policy (SB3: gain 0.01)
            assert isinstance(layer, nn.Linear)
            nn.init.orthogonal_(layer.weight, gain=0.01)
            nn.init.zeros_(layer.bias)

    @property
    def num_film_layers(self) -> int:
        return len(self.names) * self.head_layers

    def _by_device(self, name: str) -> bool:
        return self.device_agnostic and name == "placement"

    def forward(
        self,
        h: Tensor,
        mask: Tensor,
        films: Sequence[FilmParams] | None = None,
        device_keys: Tensor | None = None,
    ) -> dict[str, Tensor]:
        out = {}
        for i, name in enumerate(self.names):
            part = None
            if films is not None:
                part = films[i * self.head_layers : (i + 1) * self.head_layers]
            x = self.logits[name](self.attention[name](h, mask, part))
            if self._by_device(name):
                if device_keys is None:
                    raise ValueError("a device-agnostic placement head needs device_keys")
                keys = device_keys[:, : self.num_classes[name]]  # the cluster's devices
                x = torch.einsum("bld,bkd->blk", x, keys) / math.sqrt(x.shape[-1])
            out[name] = x
        return out


class ValueHead(nn.Module):
    """Scalar state value from the graph context.

    Args:
        in_dim: width of the context.
        hidden: inner width.

    Shapes:
        - input: ``(B, in_dim)``; output: ``(B,)``.
    """

    def __init__(self, in_dim: int, hidden: int = 64) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, context: Tensor) -> Tensor:
        return self.net(context).squeeze(-1)
