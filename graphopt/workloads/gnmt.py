"""GNMT: Google's neural machine translation model (Wu et al. 2016), one training step.

GO (Zhou et al. 2020, experiments) places 2-, 4- and 8-layer GNMT; ``num_layers`` counts the
layers of the encoder and of the decoder each (the full model of Wu et al. is 8 + 8).

Architecture and shapes (Wu et al. 2016):

==========================  ========  ==============================================================
LSTM units, every layer     1024      Sec. 3 and the experiments (Sec. 8)
encoder                               bottom layer bidirectional (Sec. 3.2, Fig. 3): a forward and a
                                      backward LSTM of 1024 units, outputs concatenated (2048); then
                                      ``num_layers - 1`` unidirectional layers
residual connections                  from the third layer on, encoder and decoder (Sec. 3.1)
attention                             additive, a feed-forward network with one hidden layer of
                                      1024 units (Sec. 3); the query is the bottom decoder
                                      layer's output of the previous step, the context feeds every
                                      decoder layer (Fig. 1)
vocabulary                  32,000    shared wordpieces (Sec. 4.1 and Sec. 8)
embedding size              1024      the layer size
batch                       64        our choice: half the 128 sentence pairs of Wu et al.
                                      (Sec. 8), to keep the activations of 128-step sentences
                                      (about 31 GB of forward outputs for ``gnmt-8``) within a
                                      few accelerators
sentence length             128       our choice (source and target, wordpieces; a common length
                                      bucket): it makes ``gnmt-8`` about 87k ops, at the top of
                                      GO's range (up to 80k); GO does not publish it
==========================  ========  ==============================================================

Graph: embedding lookups and ``Unpack`` per side; the encoder (bidirectional layer, then a
step-major stack); ``Pack`` of the encoder outputs into the attention memory and its key
projection; then per target step: attention, ``num_layers`` decoder cells (input
``ConcatV2(x, context, h)``), and a softmax cross-entropy (shared projection); ``AddN`` of the
step losses, ``Mean``; backward pass and SGD updates.
"""

from __future__ import annotations

from graphopt.graph import CompGraph
from graphopt.workloads import attention, layers, ops
from graphopt.workloads._checks import check_positive
from graphopt.workloads.backward import add_backward
from graphopt.workloads.builder import GraphBuilder
from graphopt.workloads.recurrent import LSTMState, lstm_layer, lstm_param_count, stacked_lstm

HIDDEN = 1024
BATCH = 64
VOCAB = 32_000
SEQ_LEN = 128
RESIDUAL_FROM = 2  # 0-based index of the third layer


def gnmt(
    num_layers: int,
    *,
    hidden: int = HIDDEN,
    batch: int = BATCH,
    vocab: int = VOCAB,
    src_len: int = SEQ_LEN,
    tgt_len: int = SEQ_LEN,
    optimizer: str = "sgd",
    name: str | None = None,
) -> CompGraph:
    """Build the training step of GNMT with ``num_layers`` encoder and decoder layers.

    Args:
        num_layers: LSTM layers in the encoder and in the decoder (>= 2: the bottom encoder layer
            is bidirectional).
        hidden: units of every LSTM layer, of the attention and of the embeddings.
        batch: sentence pairs per step.
        vocab: wordpieces (source and target embeddings, softmax classes).
        src_len: source steps; ``tgt_len``: target steps.
        optimizer: see :data:`graphopt.workloads.backward.OPTIMIZERS`.
        name: graph name (default ``gnmt-<num_layers>``).

    Raises:
        ValueError: a non-positive size or fewer than 2 layers.
    """
    check_positive(hidden=hidden, batch=batch, vocab=vocab, src_len=src_len, tgt_len=tgt_len)
    if num_layers < 2:
        raise ValueError(
            f"GNMT needs num_layers >= 2 (bidirectional bottom layer), got {num_layers}"
        )
    b = GraphBuilder(name or f"gnmt-{num_layers}")
    with b.scope("input", layer="input"):
        src = ops.placeholder(b, (batch, src_len), "source_ids")
        tgt = ops.placeholder(b, (batch, tgt_len), "target_ids")
        labels = ops.unpack(b, ops.placeholder(b, (batch, tgt_len), "labels"), axis=1)

    # ---- encoder
    with b.scope("encoder/embedding", layer="encoder/embedding", colocation="encoder/embedding"):
        xs = ops.unpack(b, layers.embedding(b, src, vocab, hidden), axis=1)
    fw = lstm_layer(b, xs, hidden, scope="encoder/layer_0/fw")
    bw = lstm_layer(b, xs, hidden, scope="encoder/layer_0/bw", reverse=True)
    bi = []
    for t in range(src_len):
        with b.scope(
            f"encoder/layer_0/t{t}", layer="encoder/layer_0", colocation=f"encoder/layer_0/t{t}"
        ):
            bi.append(ops.concat(b, (fw[t], bw[t]), axis=1))
    enc = stacked_lstm(
        b, bi, hidden, num_layers - 1, scope="encoder", first_layer=1, residual_from=RESIDUAL_FROM
    )

    # ---- attention memory
    with b.scope("decoder/attention", layer="decoder/attention", colocation="decoder/attention"):
        memory = ops.pack(b, enc, axis=1, name="memory")  # [B, Ts, H]
        keys = attention.attention_keys(b, memory, hidden)
        w_q, v = attention.additive_attention_weights(b, hidden, hidden)

    # ---- decoder
    with b.scope("decoder/embedding", layer="decoder/embedding", colocation="decoder/embedding"):
        ys = ops.unpack(b, layers.embedding(b, tgt, vocab, hidden), axis=1)
    cells = []
    for k in range(num_layers):
        with b.scope(f"decoder/layer_{k}", layer=f"decoder/layer_{k}"):
            cells.append(LSTMState.create(b, 2 * hidden, hidden, batch))
    with b.scope("softmax", layer="softmax"):
        w_out = b.variable("weights", (hidden, vocab))
        b_out = b.variable("bias", (vocab,))
    with b.scope("decoder/attention", layer="decoder/attention"):
        query = ops.fill(b, (batch, hidden), "initial_query")
    losses = []
    for t in range(tgt_len):
        with b.scope(
            f"decoder/attention/t{t}",
            layer="decoder/attention",
            colocation=f"decoder/attention/t{t}",
        ):
            ctx = attention.additive_attention(b, query, keys, memory, w_q, v)
        x = ys[t]
        for k, state in enumerate(cells):
            path = f"decoder/layer_{k}"
            with b.scope(f"{path}/t{t}", layer=path, colocation=f"{path}/t{t}"):
                h = state.step(b, (x, ctx))
                out = ops.binary(b, "AddV2", h, x, name="residual") if k >= RESIDUAL_FROM else h
            if k == 0:
                query = h
            x = out
        with b.scope("softmax", layer="softmax"):
            losses.append(layers.softmax_loss(b, x, labels[t], w_out, b_out, scope=f"t{t}"))
    loss = layers.mean_loss(b, losses)
    add_backward(b, loss, optimizer=optimizer)
    config = {
        "num_layers": num_layers,
        "hidden": hidden,
        "batch": batch,
        "vocab": vocab,
        "src_len": src_len,
        "tgt_len": tgt_len,
        "optimizer": optimizer,
    }
    return b.build(
        {"family": "gnmt", "config": config, "params": gnmt_param_count(num_layers, hidden, vocab)}
    )


def gnmt_param_count(num_layers: int, hidden: int, vocab: int) -> int:
    """Analytic parameter count (embeddings, encoder, attention, decoder, softmax)."""
    h = hidden
    encoder = 2 * lstm_param_count(h, h) + lstm_param_count(2 * h, h)
    encoder += (num_layers - 2) * lstm_param_count(h, h)
    attention_params = h * h + h * h + h  # memory layer, query layer, v
    decoder = num_layers * lstm_param_count(2 * h, h)
    return 2 * vocab * h + encoder + attention_params + decoder + h * vocab + vocab
