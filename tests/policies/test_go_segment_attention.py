"""policies.segment_attention: the batched layer against a segment-by-segment recurrence."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from policies.segment_attention import SegmentAttention, SegmentAttentionLayer

torch.set_num_threads(1)


def _layer_on_segment(
    layer: SegmentAttentionLayer,
    x: torch.Tensor,
    x_mask: torch.Tensor,
    memory: torch.Tensor,
    mem_mask: torch.Tensor,
    film: tuple[torch.Tensor, torch.Tensor] | None,
) -> torch.Tensor:
    """One layer on one segment ``x`` (s, d) of one graph with its memory (m, d): plain maths."""
    d, heads = layer.hidden, layer.heads
    hd = d // heads
    ctx = torch.cat([memory.detach(), x])
    valid = torch.cat([mem_mask, x_mask])
    if not valid.any():
        valid = torch.ones_like(valid)
    q = layer.query(x).view(-1, heads, hd).transpose(0, 1)
    k, v = layer.key_value(ctx).view(-1, 2, heads, hd).unbind(1)
    scores = q @ k.transpose(0, 1).transpose(1, 2) / math.sqrt(hd)  # (heads, s, m + s)
    scores = scores.masked_fill(~valid, float("-inf"))
    attn = (scores.softmax(-1) @ v.transpose(0, 1)).transpose(0, 1).reshape(-1, d)
    h = layer.norm_attn(x + layer.out(attn))
    h = layer.norm_ffn(h + layer.ffn(h))
    if film is not None:
        h = h * (1 + film[0]) + film[1]
    return h * x_mask[:, None]


def recurrence(stack: SegmentAttention, h: torch.Tensor, mask: torch.Tensor, films=None):
    """Slow twin: Transformer-XL's recurrence, one graph and one segment at a time, every layer
    of a segment before the next segment, each layer caching the last ``mem_len`` inputs."""
    out = torch.zeros_like(h)
    first = stack.layers[0]
    seg, mem = first.segment_len, first.mem_len
    for b in range(h.shape[0]):
        cache = [(h.new_zeros(0, h.shape[2]), mask.new_zeros(0)) for _ in stack.layers]
        for start in range(0, h.shape[1], seg):
            x, xm = h[b, start : start + seg], mask[b, start : start + seg]
            for n, layer in enumerate(stack.layers):
                memory, mem_mask = cache[n]
                film = None if films is None else (films[n][0][b], films[n][1][b])
                y = _layer_on_segment(
                    layer, x, xm, memory[-mem:][:mem], mem_mask[-mem:][:mem], film
                )
                cache[n] = (torch.cat([memory, x.detach()]), torch.cat([mem_mask, xm]))
                x = y
            out[b, start : start + seg] = x
    return out


def _inputs(batch=2, length=50, d=16, lengths=(50, 23), seed=0):
    gen = torch.Generator().manual_seed(seed)
    h = torch.randn(batch, length, d, generator=gen)
    mask = torch.arange(length)[None] < torch.tensor(lengths)[:, None]
    return h * mask[..., None], mask


@pytest.mark.parametrize("lengths", [(50, 23), (37,)], ids=["batch2", "batch1"])
@pytest.mark.parametrize(("seg", "mem"), [(8, 8), (8, 3), (8, 20), (7, 0), (64, 64)])
def test_matches_segment_recurrence(seg, mem, lengths):
    torch.manual_seed(0)
    stack = SegmentAttention(2, hidden=16, heads=4, segment_len=seg, mem_len=mem).eval()
    b = len(lengths)
    h, mask = _inputs(batch=b, lengths=lengths)
    gen = torch.Generator().manual_seed(1)
    films = [(0.1 * torch.randn(b, 16, generator=gen), 0.1 * torch.randn(b, 16, generator=gen))] * 2
    fast = stack(h, mask, films)
    with torch.no_grad():  # no gradient anywhere: every layer reads its memory as a strided view
        fast_no_grad = stack(h, mask, films)
    slow = recurrence(stack, h, mask, films)
    assert fast.shape == (b, 50, 16)
    torch.testing.assert_close(fast_no_grad, slow, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=1e-5)


def test_memory_is_stop_gradient():
    torch.manual_seed(0)
    layer = SegmentAttentionLayer(hidden=8, heads=2, segment_len=4, mem_len=4)
    h = torch.randn(1, 8, 8, requires_grad=True)
    out = layer(h, torch.ones(1, 8, dtype=torch.bool))
    weights = torch.randn(4, 8)  # (a plain sum of LayerNorm outputs has zero gradient)
    (out[0, 4:] * weights).sum().backward()  # second segment: its memory is the first one
    assert h.grad is not None
    assert torch.all(h.grad[0, :4] == 0) and h.grad[0, 4:].abs().sum() > 0
    assert layer.key_value.weight.grad is not None


def test_padding_does_not_change_real_outputs():
    torch.manual_seed(0)
    stack = SegmentAttention(2, hidden=16, heads=2, segment_len=8, mem_len=8).eval()
    h, mask = _inputs(batch=1, length=21, lengths=(21,))
    longer = F.pad(h, (0, 0, 0, 37))
    longer_mask = F.pad(mask, (0, 37))
    out = stack(h, mask)
    out_long = stack(longer, longer_mask)
    torch.testing.assert_close(out_long[:, :21], out, atol=1e-6, rtol=1e-6)
    assert torch.all(out_long[:, 21:] == 0)


def test_all_padding_segments_give_no_nan():
    stack = SegmentAttention(2, hidden=16, heads=4, segment_len=64, mem_len=64)
    h, mask = _inputs(batch=2, length=300, lengths=(3, 0))
    out = stack(h, mask)
    assert torch.isfinite(out).all()
    out.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in stack.parameters() if p.grad is not None)


def test_bad_arguments():
    with pytest.raises(ValueError, match="multiple of heads"):
        SegmentAttentionLayer(hidden=10, heads=4)
    with pytest.raises(ValueError, match="segment_len"):
        SegmentAttentionLayer(segment_len=0)
