"""Attention layers: additive attention (GNMT) and relative multi-head attention (Transformer-XL).

**Additive attention** (Bahdanau et al. 2015; GNMT, Wu et al. 2016, Sec. 3: a feed-forward
network with one hidden layer). The keys ``K = M W_mem`` of the encoder memory ``M [B, Ts, d]``
are computed once (:func:`attention_keys`); each decoder step with query ``q [B, d]``::

    s   = Sum(Tanh(K + Reshape(MatMul(q, W_q))) * v, axis=2)      [B, Ts]
    p   = Softmax(s)
    ctx = Reshape(BatchMatMulV2(Reshape(p) [B,1,Ts], M [B,Ts,d]))    [B, d]

10 forward ops per step: ``MatMul``, ``ExpandDims``, ``AddV2``, ``Tanh``, ``Mul``, ``Sum``,
``Softmax``, ``ExpandDims``, ``BatchMatMulV2``, ``Squeeze``.

**Relative multi-head attention** (Transformer-XL, Dai et al. 2019, Sec. 3.3), time-major as in
the authors' TensorFlow code (``rel_multihead_attn``): for the segment ``w [T, B, d]``, the cached
memory ``m [M, B, d]`` and relative position embeddings ``r [T + M, d]``::

    cat            = ConcatV2(m, w)                              [M + T, B, d]
    q, k, v        = Split(cat W_qkv)    (q keeps the last T)    [*, B, n, d_h]
    r_k            = r W_r                                       [T + M, n, d_h]
    AC             = (q + u) k^T          BatchMatMulV2, batch B n
    BD             = rel_shift((q + v') r_k^T)                   Pad, Reshape, Slice, Reshape
    p              = Softmax((AC + BD) * scale masked)           Mul, Sub (mask)
    out            = LayerNorm(w + (p v) W_o)

with ``u, v'`` the learned biases ``r_w_bias, r_r_bias [n, d_h]`` (untied per layer), followed by
the position-wise feed-forward sublayer ``LayerNorm(x + Relu(x W1 + b1) W2 + b2)``. The einsums
are recorded as TensorFlow lowers them: ``Transpose``/``Reshape`` and ``BatchMatMulV2``.
"""

from __future__ import annotations

from typing import NamedTuple

from graphopt.workloads import layers, ops
from graphopt.workloads.builder import GraphBuilder, Tensor


def attention_keys(b: GraphBuilder, memory: Tensor, units: int) -> Tensor:
    """``memory [B, Ts, d] -> keys [B, Ts, units]`` (the ``memory_layer``, no bias)."""
    return layers.dense(b, memory, units, scope="memory_layer", use_bias=False)


def additive_attention_weights(
    b: GraphBuilder, query_dim: int, units: int
) -> tuple[Tensor, Tensor]:
    """The query projection ``W_q [query_dim, units]`` and the score vector ``v [units]``."""
    return b.variable("query_layer/kernel", (query_dim, units)), b.variable("attention_v", (units,))


def additive_attention(
    b: GraphBuilder, query: Tensor, keys: Tensor, memory: Tensor, w_q: Tensor, v: Tensor
) -> Tensor:
    """One decoder step of additive attention under the current scope; returns the context.

    Shapes:
        ``query [B, dq]``, ``keys [B, Ts, units]``, ``memory [B, Ts, d]`` -> ``[B, d]``.
    """
    bs, ts, units = keys.shape
    q = ops.matmul(b, query, w_q, name="query")
    q3 = ops.reshape(b, q, (bs, 1, units), name="ExpandDims", op_type="ExpandDims")
    hidden = ops.unary(b, "Tanh", ops.binary(b, "AddV2", keys, q3))
    score = ops.reduce(b, "Sum", ops.binary(b, "Mul", hidden, v), (2,))
    p = ops.softmax(b, score)
    p3 = ops.reshape(b, p, (bs, 1, ts), name="ExpandDims", op_type="ExpandDims")
    ctx = ops.batch_matmul(b, p3, memory)
    return ops.reshape(b, ctx, (bs, memory.shape[-1]), name="Squeeze", op_type="Squeeze")


class TXLLayerWeights(NamedTuple):
    """The weights of one Transformer-XL layer, shared by every segment of a step."""

    qkv: Tensor  # [d, 3 n d_h]
    r: Tensor  # [d, n d_h]
    o: Tensor  # [n d_h, d]
    r_w_bias: Tensor  # [n, d_h]
    r_r_bias: Tensor  # [n, d_h]
    attn_norm: tuple[Tensor, Tensor]  # gamma, beta [d]
    ff1: tuple[Tensor, Tensor]  # [d, d_inner], [d_inner]
    ff2: tuple[Tensor, Tensor]  # [d_inner, d], [d]
    ff_norm: tuple[Tensor, Tensor]


def txl_layer_weights(
    b: GraphBuilder, d: int, n_head: int, d_head: int, d_inner: int
) -> TXLLayerWeights:
    """Create one layer's weights under the current scope:
    ``5 d n d_h + 2 n d_h + 2 d d_inner + d_inner + 5 d`` parameters."""
    hd = n_head * d_head
    with b.scope("rel_attn"):
        qkv = b.variable("qkv/kernel", (d, 3 * hd))
        r = b.variable("r/kernel", (d, hd))
        o = b.variable("o/kernel", (hd, d))
        r_w_bias = b.variable("r_w_bias", (n_head, d_head))
        r_r_bias = b.variable("r_r_bias", (n_head, d_head))
        with b.scope("LayerNorm"):
            attn_norm = layers.layer_norm_weights(b, d)
    with b.scope("ff"):
        ff1 = (b.variable("layer_1/kernel", (d, d_inner)), b.variable("layer_1/bias", (d_inner,)))
        ff2 = (b.variable("layer_2/kernel", (d_inner, d)), b.variable("layer_2/bias", (d,)))
        with b.scope("LayerNorm"):
            ff_norm = layers.layer_norm_weights(b, d)
    return TXLLayerWeights(qkv, r, o, r_w_bias, r_r_bias, attn_norm, ff1, ff2, ff_norm)


def txl_layer_param_count(d: int, n_head: int, d_head: int, d_inner: int) -> int:
    """Parameters of :func:`txl_layer_weights`."""
    hd = n_head * d_head
    return 5 * d * hd + 2 * hd + 2 * d * d_inner + d_inner + 5 * d


def rel_multihead_attention(
    b: GraphBuilder, w: Tensor, mem: Tensor, r: Tensor, mask: Tensor, wts: TXLLayerWeights
) -> Tensor:
    """Transformer-XL attention sublayer (with residual and layer norm) under the current scope.

    Shapes:
        ``w [T, B, d]``, ``mem [M, B, d]``, ``r [T + M, d]``, ``mask [T, T + M]`` -> ``[T, B, d]``.
    """
    t, bs, d = w.shape
    klen = t + mem.shape[0]
    n_head, d_head = wts.r_w_bias.shape
    hd = n_head * d_head
    cat = ops.concat(b, (mem, w), axis=0)
    with b.scope("qkv"):
        heads = layers.linear(b, cat, wts.qkv)  # [klen, B, 3 hd]
    with b.scope("r"):
        r_k = layers.linear(b, r, wts.r)  # [klen, hd]
    q, k, v = ops.split(b, heads, 3, axis=-1)
    q = ops.slice_(b, q, (t, bs, hd), name="q_last", op_type="StridedSlice")
    q = ops.reshape(b, q, (t, bs, n_head, d_head))
    k = ops.reshape(b, k, (klen, bs, n_head, d_head))
    v = ops.reshape(b, v, (klen, bs, n_head, d_head))
    r_k = ops.reshape(b, r_k, (klen, n_head, d_head))
    rw_q = ops.binary(b, "AddV2", q, wts.r_w_bias, name="rw_head_q")
    rr_q = ops.binary(b, "AddV2", q, wts.r_r_bias, name="rr_head_q")
    # einsum('ibnd,jbnd->ijbn') and einsum('ibnd,jnd->ijbn') as TensorFlow lowers them:
    # transposes to [batch..., i, d] x [batch..., d, j] and a batched matmul.
    rw_q = ops.transpose(b, rw_q, (1, 2, 0, 3))  # [B, n, T, dh]
    k_t = ops.transpose(b, k, (1, 2, 3, 0))  # [B, n, dh, klen]
    ac = ops.batch_matmul(b, rw_q, k_t, name="AC")  # [B, n, T, klen]
    rr_q = ops.reshape(b, ops.transpose(b, rr_q, (2, 1, 0, 3)), (n_head, bs * t, d_head))
    r_t = ops.transpose(b, r_k, (1, 2, 0))  # [n, dh, klen]
    bd = ops.batch_matmul(b, rr_q, r_t, name="BD")  # [n, B T, klen]
    bd = _rel_shift(b, bd, (n_head, bs, t, klen))
    bd = ops.transpose(b, bd, (1, 0, 2, 3))  # [B, n, T, klen]
    score = ops.binary(b, "Mul", ops.binary(b, "AddV2", ac, bd), _scalar(b, "scale"))
    score = ops.binary(b, "Sub", ops.binary(b, "Mul", score, mask), mask, name="masked")
    prob = ops.softmax(b, score)
    v_t = ops.transpose(b, v, (1, 2, 0, 3))  # [B, n, klen, dh]
    vec = ops.batch_matmul(b, prob, v_t, name="attn_vec")  # [B, n, T, dh]
    vec = ops.reshape(b, ops.transpose(b, vec, (2, 0, 1, 3)), (t, bs, hd))
    with b.scope("o"):
        out = layers.linear(b, vec, wts.o)
    residual = ops.binary(b, "AddV2", out, w, name="residual")
    return layers.layer_norm(b, residual, params=wts.attn_norm)


def positionwise_ff(b: GraphBuilder, x: Tensor, wts: TXLLayerWeights) -> Tensor:
    """``LayerNorm(x + Relu(x W1 + b1) W2 + b2)`` under the current scope.

    Shapes:
        ``x [T, B, d]`` -> ``[T, B, d]``.
    """
    with b.scope("layer_1"):
        h = layers.linear(b, x, *wts.ff1, activation="Relu")
    with b.scope("layer_2"):
        h = layers.linear(b, h, *wts.ff2)
    return layers.layer_norm(b, ops.binary(b, "AddV2", h, x, name="residual"), params=wts.ff_norm)


def _scalar(b: GraphBuilder, name: str) -> Tensor:
    return b.source("Const", name, ())


def _rel_shift(b: GraphBuilder, x: Tensor, shape: tuple[int, int, int, int]) -> Tensor:
    """Transformer-XL's relative shift: pad one column, reshape, drop a row, reshape back."""
    n, bs, t, klen = shape
    x = ops.pad(b, ops.reshape(b, x, shape), (n, bs, t, klen + 1), name="rel_shift/Pad")
    x = ops.reshape(b, x, (n, bs, klen + 1, t), name="rel_shift/Reshape")
    x = ops.slice_(b, x, (n, bs, klen, t), name="rel_shift/Slice")
    return ops.reshape(b, x, (n, bs, t, klen), name="rel_shift/Reshape_1")
