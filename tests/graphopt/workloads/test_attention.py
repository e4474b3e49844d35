"""Tests of graphopt.workloads.attention."""

from __future__ import annotations

from graphopt.workloads import attention, ops
from graphopt.workloads.builder import GraphBuilder


def test_additive_attention_step() -> None:
    b = GraphBuilder("att")
    memory = ops.placeholder(b, (4, 10, 32), "memory")
    query = ops.placeholder(b, (4, 32), "query")
    keys = attention.attention_keys(b, memory, 16)
    w_q, v = attention.additive_attention_weights(b, 32, 16)
    before = b.num_ops
    with b.scope("t0"):
        ctx = attention.additive_attention(b, query, keys, memory, w_q, v)
    assert ctx.shape == (4, 32)
    assert b.num_ops - before == 10
    g = b.build()
    assert g.flops[g.index["t0/BatchMatMulV2"]] == 2 * 4 * 1 * 32 * 10


def test_relative_attention_shapes_and_flops() -> None:
    b = GraphBuilder("txl")
    t, m, bs, d, n, dh = 6, 4, 2, 16, 2, 8
    w = ops.placeholder(b, (t, bs, d), "w")
    mem = ops.placeholder(b, (m, bs, d), "mem")
    r = ops.placeholder(b, (t + m, d), "r")
    mask = b.source("Const", "mask", (t, t + m))
    wts = attention.txl_layer_weights(b, d, n, dh, 32)
    y = attention.positionwise_ff(
        b, attention.rel_multihead_attention(b, w, mem, r, mask, wts), wts
    )
    g = b.build()
    assert y.shape == (t, bs, d)
    assert g.flops[g.index["AC"]] == 2 * bs * n * t * (t + m) * dh
    assert g.flops[g.index["BD"]] == 2 * n * bs * t * (t + m) * dh
    assert g.param_bytes.sum() == 4 * attention.txl_layer_param_count(d, n, dh, 32)
