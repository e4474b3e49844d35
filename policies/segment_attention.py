"""Segment-level recurrent attention over ops in topological order (GO, step 2; Transformer-XL).

The ``(B, L, d)`` node embeddings, ops in topological order (the order of the observation), are cut
into segments of ``S = segment_len`` ops. As in Transformer-XL (Dai et al., 2019, eq. in Sec. 3.2),
layer ``n`` of segment ``tau`` attends to its own input and to the ``mem_len`` hidden states of
layer ``n - 1`` that precede the segment, with the gradient stopped (``SG``) on the memory:

.. math::
    \\tilde{\\mathbf{h}}_\\tau^{n-1} = [\\mathrm{SG}(\\mathbf{h}_{<\\tau}^{n-1}) \\circ
        \\mathbf{h}_\\tau^{n-1}], \\quad
    \\mathbf{q} = \\mathbf{h}_\\tau^{n-1} \\mathbf{W}_q,\\;
    \\mathbf{k}, \\mathbf{v} = \\tilde{\\mathbf{h}}_\\tau^{n-1} \\mathbf{W}_k,\\;
        \\tilde{\\mathbf{h}}_\\tau^{n-1} \\mathbf{W}_v

.. math::
    \\mathbf{a} = \\mathrm{LN}(\\mathbf{h} + \\mathrm{MHA}(\\mathbf{q}, \\mathbf{k}, \\mathbf{v})),
    \\quad \\mathbf{h}_\\tau^n = \\mathrm{FiLM}\\big(\\mathrm{LN}(\\mathbf{a} +
        \\mathrm{FFN}(\\mathbf{a}))\\big)

(:math:`\\mathbf{h}_{<\\tau}` is the last ``mem_len`` positions before the segment, so with
``mem_len = S`` the previous segment). Attention is not causal inside a segment: the policy decides
every op at once, nothing is generated left to right. Positions enter through the op features
(topological position, depth); there is no relative position encoding, which keeps PyTorch's fused
``scaled_dot_product_attention`` usable.

**All segments of a layer at once.** The memory of layer ``n`` comes from layer ``n - 1``, so
processing segments one after another (the recurrence) gives exactly what one batched call over
all segments gives; the receptive field still grows by ``mem_len`` ops per layer. The test suite
keeps a segment-by-segment twin of the recurrence and checks that both agree.

**Layout (performance).** A stack pads its input once (:func:`extend`): ``mem_len`` masked rows
before the first op (the memory of segment 0) and masked rows after the last op up to whole
segments. The keys of segment ``tau`` are then the extended rows ``[tau S, tau S + mem_len + S)``,
so without gradients the windows are a strided view (``unfold``) of one key/value projection: no
copy, and 4-D inputs that select PyTorch's fused CPU attention kernel. With gradients, the memory
part is projected from the detached input and concatenated (one copy). A layer costs
``O(N (S + mem_len) d)`` time and memory: linear in the number of segments.

**Masking.** Keys at padding slots (beyond a graph's ops, or before its first op) are masked.
A window without any real key (a segment of padding whose memory is padding too) would make the
softmax NaN: such a window unmasks all its keys; its queries are padding, so nothing real reads
the finite garbage they produce, and the stack zeroes padding rows on the way out.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

FilmParams = tuple[Tensor, Tensor]
"""``(gamma, beta)``, each ``(B, d)``: ``h * (1 + gamma) + beta`` (see :mod:`policies.film`)."""


class SegmentAttentionLayer(nn.Module):
    """One Transformer-XL-style layer: segment attention with memory, FFN, post-LayerNorm, FiLM.

    Args:
        hidden: width ``d`` (default 64).
        heads: attention heads, dividing ``d`` (default 4).
        segment_len: ops per segment ``S`` (default 128).
        mem_len: cached positions before each segment that it attends to (default 128; 0: none).
        ffn_mult: FFN inner width as a multiple of ``d`` (default 2).
        dropout: dropout on attention weights and residual updates (default 0).

    Shapes:
        - h: ``(B, L, d)``; mask: ``(B, L)`` bool, True for real ops; film: ``(gamma, beta)``
          each ``(B, d)`` or None.
        - output: ``(B, L, d)``, zero at padding slots.
    """

    def __init__(
        self,
        hidden: int = 64,
        heads: int = 4,
        segment_len: int = 128,
        mem_len: int = 128,
        ffn_mult: int = 2,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if hidden % heads:
            raise ValueError(f"hidden={hidden} must be a multiple of heads={heads}")
        if segment_len < 1 or mem_len < 0:
            raise ValueError(
                f"segment_len must be >= 1 and mem_len >= 0, got {segment_len} and {mem_len}"
            )
        self.hidden, self.heads = hidden, heads
        self.segment_len, self.mem_len = segment_len, mem_len
        self.dropout = dropout
        self.query = nn.Linear(hidden, hidden)
        self.key_value = nn.Linear(hidden, 2 * hidden)
        self.out = nn.Linear(hidden, hidden)
        self.norm_attn = nn.LayerNorm(hidden)
        self.norm_ffn = nn.LayerNorm(hidden)
        self.ffn = nn.Sequential(
            nn.Linear(hidden, ffn_mult * hidden),
            nn.ReLU(inplace=True),
            nn.Dropout(dropout),
            nn.Linear(ffn_mult * hidden, hidden),
        )
        self.drop = nn.Dropout(dropout)

    def forward(self, h: Tensor, mask: Tensor, film: FilmParams | None = None) -> Tensor:
        if h.shape[1] == 0:
            return h
        x, valid = extend(h, mask, self.segment_len, self.mem_len)
        out = self.step(x, valid, film)[:, self.mem_len : self.mem_len + h.shape[1]]
        return out.masked_fill(~mask[..., None], 0.0)

    def step(self, x: Tensor, valid: Tensor, film: FilmParams | None = None) -> Tensor:
        """The layer on the extended layout of :func:`extend` (same shape in and out).

        Shapes:
            - x: ``(B, mem + nseg * S, d)``; valid: ``(B, mem + nseg * S)`` bool.
        """
        batch, total, d = x.shape
        seg, mem, heads = self.segment_len, self.mem_len, self.heads
        nseg = (total - mem) // seg
        hd = d // heads
        q = self.query(x[:, mem:]).view(batch, nseg, seg, heads, hd).transpose(2, 3)
        kv = self.key_value(x)  # (B, mem + Lp, 2d)
        if mem > 0 and torch.is_grad_enabled() and x.requires_grad:
            # memory = keys/values of the stop-gradient input: same values, no gradient into
            # earlier segments' hidden states (the weights still get theirs)
            kv_mem = self.key_value(x.detach())[:, : total - seg].unfold(1, mem, seg)
            kv_cur = kv[:, mem:].view(batch, nseg, seg, 2 * d)
            windows = torch.cat([kv_mem.transpose(-1, -2), kv_cur], dim=2)  # (B, nseg, W, 2d)
        else:
            # window tau = extended rows [tau*S, tau*S + mem + S): a strided view, no copy
            windows = kv.unfold(1, mem + seg, seg).transpose(-1, -2)
        width = mem + seg
        k = windows[..., :d].unflatten(-1, (heads, hd)).transpose(2, 3)  # (B, nseg, H, W, hd)
        v = windows[..., d:].unflatten(-1, (heads, hd)).transpose(2, 3)
        key_valid = valid.unfold(1, width, seg)  # (B, nseg, W)
        # NaN guard: a window without any real key (all padding) attends to all its keys
        key_valid = key_valid | ~key_valid.any(dim=-1, keepdim=True)
        # 4-D inputs select the fused (flash) CPU kernel; for B = 1 these reshapes are views
        rows = batch * nseg
        attn = F.scaled_dot_product_attention(
            q.reshape(rows, heads, seg, hd),
            k.reshape(rows, heads, width, hd),
            v.reshape(rows, heads, width, hd),
            attn_mask=key_valid.reshape(rows, 1, 1, width),
            dropout_p=self.dropout if self.training else 0.0,
        )  # (B * nseg, H, S, hd)
        attn = attn.view(batch, nseg, heads, seg, hd).transpose(2, 3).reshape(batch, -1, d)
        y = self.norm_attn(x[:, mem:] + self.drop(self.out(attn)))
        y = self.norm_ffn(y + self.drop(self.ffn(y)))
        if film is not None:
            gamma, beta = film
            y = y * (1 + gamma[:, None]) + beta[:, None]
        return torch.cat([x[:, :mem], y], dim=1)


def extend(h: Tensor, mask: Tensor, segment_len: int, mem_len: int) -> tuple[Tensor, Tensor]:
    """The layout the layers work in: ``mem_len`` masked rows before the first op (the memory of
    the first segment) and masked rows after the last one up to whole segments.

    Shapes:
        - h: ``(B, L, d)``; mask: ``(B, L)``.
        - output: ``(B, mem_len + nseg * S, d)`` and its mask, ``nseg = ceil(L / S)``.
    """
    length = h.shape[1]
    tail = -(-length // segment_len) * segment_len - length
    return F.pad(h, (0, 0, mem_len, tail)), F.pad(mask, (mem_len, tail))


class SegmentAttention(nn.Module):
    """A stack of :class:`SegmentAttentionLayer` with the same arguments.

    Args:
        num_layers: layers in the stack (default 2); 0 is the identity.
        hidden, heads, segment_len, mem_len, ffn_mult, dropout: see
            :class:`SegmentAttentionLayer`.

    Shapes:
        - h: ``(B, L, d)``; mask: ``(B, L)``; films: one ``(gamma, beta)`` per layer, or None.
        - output: ``(B, L, d)``.
    """

    def __init__(
        self,
        num_layers: int = 2,
        hidden: int = 64,
        heads: int = 4,
        segment_len: int = 128,
        mem_len: int = 128,
        ffn_mult: int = 2,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            SegmentAttentionLayer(hidden, heads, segment_len, mem_len, ffn_mult, dropout)
            for _ in range(num_layers)
        )

    def forward(self, h: Tensor, mask: Tensor, films: Sequence[FilmParams] | None = None) -> Tensor:
        if films is not None and len(films) != len(self.layers):
            raise ValueError(f"got {len(films)} FiLM parameter pairs for {len(self.layers)} layers")
        if not self.layers or h.shape[1] == 0:
            return h
        layers = [layer for layer in self.layers if isinstance(layer, SegmentAttentionLayer)]
        first = layers[0]
        x, valid = extend(h, mask, first.segment_len, first.mem_len)
        for i, layer in enumerate(layers):
            x = layer.step(x, valid, None if films is None else films[i])
        out = x[:, first.mem_len : first.mem_len + h.shape[1]]
        return out.masked_fill(~mask[..., None], 0.0)
