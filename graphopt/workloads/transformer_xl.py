"""Transformer-XL (Dai et al. 2019): a segment-recurrent Transformer LM, one training step.

GO (Zhou et al. 2020, experiments) places 2-, 4- and 8-layer Transformer-XL models.

Shapes used: the enwik8 base model of Dai et al. 2019 (the hyper-parameters of the authors'
released TensorFlow scripts, ``enwik8_base``), with a smaller per-step batch:

==================  ======  ================================================================
d_model             512     Dai et al. 2019, enwik8 base
heads x d_head      8 x 64  enwik8 base
d_inner             2048    enwik8 base
segment length      512     enwik8 base (``tgt_len``)
memory length       512     enwik8 base (``mem_len``)
vocabulary          204     enwik8 bytes (output weights tied to the input embedding)
batch               4       our choice (a per-accelerator batch; the paper's batch is global)
segments per step   2       our choice: the step runs two consecutive segments, the second
                            attending to the first one's cached hidden states through
                            ``StopGradient``, so the graph shows the segment recurrence that
                            defines the model (``num_segments=1`` gives the plain step)
==================  ======  ================================================================

Graph, per segment: sinusoidal relative position embeddings (``Const``, ``Mul``, ``Sin``, ``Cos``,
``ConcatV2``), ``GatherV2`` embedding scaled by ``sqrt(d)``, then per layer: the new memory
(``ConcatV2``, ``StridedSlice``, ``StopGradient``), relative multi-head attention and the
feed-forward sublayer (:mod:`~graphopt.workloads.attention`), then tied-softmax cross-entropy. The
segment losses are summed and averaged; backward pass and SGD updates. The memory of the first
segment is an input (``Placeholder``, cached by the previous step).
"""

from __future__ import annotations

from graphopt.graph import CompGraph
from graphopt.workloads import attention, layers, ops
from graphopt.workloads._checks import check_positive
from graphopt.workloads.backward import add_backward
from graphopt.workloads.builder import GraphBuilder, Tensor

D_MODEL = 512
N_HEAD = 8
D_HEAD = 64
D_INNER = 2048
TGT_LEN = 512
MEM_LEN = 512
VOCAB = 204
BATCH = 4
NUM_SEGMENTS = 2


def transformer_xl(
    num_layers: int,
    *,
    d_model: int = D_MODEL,
    n_head: int = N_HEAD,
    d_head: int = D_HEAD,
    d_inner: int = D_INNER,
    tgt_len: int = TGT_LEN,
    mem_len: int = MEM_LEN,
    vocab: int = VOCAB,
    batch: int = BATCH,
    num_segments: int = NUM_SEGMENTS,
    optimizer: str = "sgd",
    name: str | None = None,
) -> CompGraph:
    """Build the training step of a Transformer-XL language model.

    Args:
        num_layers: Transformer layers (GO: 2, 4, 8).
        d_model: model width; ``n_head`` x ``d_head``: attention heads and their width;
            ``d_inner``: feed-forward width.
        tgt_len: tokens per segment; ``mem_len``: cached tokens attended to.
        vocab: output classes (tied to the input embedding).
        batch: sequences per step.
        num_segments: consecutive segments in one step.
        optimizer: see :data:`graphopt.workloads.backward.OPTIMIZERS`.
        name: graph name (default ``txl-<num_layers>``).

    Raises:
        ValueError: a non-positive size.
    """
    check_positive(
        num_layers=num_layers,
        d_model=d_model,
        n_head=n_head,
        d_head=d_head,
        d_inner=d_inner,
        tgt_len=tgt_len,
        mem_len=mem_len,
        vocab=vocab,
        batch=batch,
        num_segments=num_segments,
    )
    if d_model % 2:
        raise ValueError(f"d_model must be even (sinusoidal embeddings), got {d_model}")
    b = GraphBuilder(name or f"txl-{num_layers}")
    klen = tgt_len + mem_len
    with b.scope("transformer/embedding", layer="transformer/embedding"):
        table = b.variable("lookup_table", (vocab, d_model))
        softmax_bias = b.variable("softmax_bias", (vocab,))
    weights = []
    for k in range(num_layers):
        with b.scope(f"transformer/layer_{k}", layer=f"transformer/layer_{k}"):
            weights.append(attention.txl_layer_weights(b, d_model, n_head, d_head, d_inner))
    with b.scope("input", layer="input"):
        mems = [
            ops.placeholder(b, (mem_len, batch, d_model), f"mems_{k}") for k in range(num_layers)
        ]
        mask = b.source("Const", "attn_mask", (tgt_len, klen))
    losses = []
    for s in range(num_segments):
        with b.scope(f"seg{s}/input", layer="input"):
            ids = ops.placeholder(b, (tgt_len, batch), "ids")
            labels = ops.placeholder(b, (tgt_len * batch,), "labels")
        with b.scope(f"seg{s}/pos_emb", layer="transformer/pos_emb"):
            pos_emb = _positional_embedding(b, klen, d_model)
        group = f"transformer/embedding/seg{s}"
        with b.scope(f"seg{s}/embedding", layer="transformer/embedding", colocation=group):
            h = ops.binary(b, "Mul", ops.gather(b, table, ids), b.source("Const", "scale", ()))
        for k, wts in enumerate(weights):
            path = f"transformer/layer_{k}"
            with b.scope(f"seg{s}/layer_{k}", layer=path, colocation=f"{path}/seg{s}"):
                new_mem = _cache_memory(b, h, mems[k])
                with b.scope("rel_attn"):
                    h = attention.rel_multihead_attention(b, h, mems[k], pos_emb, mask, wts)
                with b.scope("ff"):
                    h = attention.positionwise_ff(b, h, wts)
            mems[k] = new_mem
        group = f"transformer/softmax/seg{s}"
        with b.scope(f"seg{s}/softmax", layer="transformer/softmax", colocation=group):
            out_w = ops.transpose(b, table, (1, 0))
            logits = layers.linear(
                b, ops.reshape(b, h, (tgt_len * batch, d_model)), out_w, softmax_bias
            )
            losses.append(ops.sparse_softmax_cross_entropy(b, logits, labels))
    loss = layers.mean_loss(b, losses)
    add_backward(b, loss, optimizer=optimizer)
    config = {
        "num_layers": num_layers,
        "d_model": d_model,
        "n_head": n_head,
        "d_head": d_head,
        "d_inner": d_inner,
        "tgt_len": tgt_len,
        "mem_len": mem_len,
        "vocab": vocab,
        "batch": batch,
        "num_segments": num_segments,
        "optimizer": optimizer,
    }
    params = txl_param_count(num_layers, d_model, n_head, d_head, d_inner, vocab)
    return b.build({"family": "transformer_xl", "config": config, "params": params})


def _positional_embedding(b: GraphBuilder, klen: int, d: int) -> Tensor:
    """Sinusoidal embeddings of the relative positions ``klen - 1 .. 0`` (Vaswani et al. 2017)."""
    pos = b.source("Const", "pos_seq", (klen, 1))
    inv_freq = b.source("Const", "inv_freq", (d // 2,))
    angles = ops.binary(b, "Mul", pos, inv_freq, name="einsum")
    return ops.concat(b, (ops.unary(b, "Sin", angles), ops.unary(b, "Cos", angles)), axis=-1)


def _cache_memory(b: GraphBuilder, h: Tensor, mem: Tensor) -> Tensor:
    """``StopGradient(ConcatV2(mem, h)[-mem_len:])``: the next segment's memory."""
    cat = ops.concat(b, (mem, h), axis=0, name="cache/concat")
    last = ops.slice_(b, cat, mem.shape, name="cache/last", op_type="StridedSlice")
    return b.op("StopGradient", "cache/StopGradient", (last,), last.shape, differentiable=False)


def txl_param_count(
    num_layers: int,
    d_model: int = D_MODEL,
    n_head: int = N_HEAD,
    d_head: int = D_HEAD,
    d_inner: int = D_INNER,
    vocab: int = VOCAB,
) -> int:
    """Analytic parameter count: tied embedding, softmax bias, layers."""
    layer = attention.txl_layer_param_count(d_model, n_head, d_head, d_inner)
    return vocab * d_model + vocab + num_layers * layer
