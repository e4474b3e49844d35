"""RNNLM: a stacked-LSTM word language model, unrolled in time, one training step.

GO (Zhou et al. 2020, experiments) places 2-, 4- and 8-layer RNNLMs, the workload introduced for
device placement by Mirhoseini et al. (2017), built on the LSTM language models of Zaremba et al.
(2014) and Jozefowicz et al. (2016). Hidden size and batch follow our reading of Mirhoseini et
al. (LSTM size 2048, batch 64).

Shapes used (fp32):

==================  =========  ==========================================================
hidden units        2048       Mirhoseini et al. 2017 (LSTM size 2048)
embedding size      2048       tied to the hidden size (our choice)
batch               64         Mirhoseini et al. 2017
vocabulary          40,000     our choice: a full softmax between PTB's 10k (Zaremba et al.)
                               and LM1B's 793k (Jozefowicz et al., which needs a sampled
                               softmax); GO does not publish it
unrolled steps      40         our choice (truncated BPTT; Zaremba et al. use 35); GO does not
                               publish it
==================  =========  ==========================================================

Graph: ``GatherV2`` of the ``[B, T]`` ids in the embedding, ``Unpack`` into ``T`` steps,
``num_layers`` LSTM layers (:mod:`~graphopt.workloads.recurrent`), per step a softmax projection
(``MatMul``, ``BiasAdd``, ``SparseSoftmaxCrossEntropyWithLogits`` with shared weights), ``AddN`` of
the step losses and a ``Mean``; then the backward pass and SGD updates. Parameters:
``V E + sum_l 4 H (d_l + H + 1) + H V + V``.
"""

from __future__ import annotations

from graphopt.graph import CompGraph
from graphopt.workloads import layers, ops
from graphopt.workloads._checks import check_positive
from graphopt.workloads.backward import add_backward
from graphopt.workloads.builder import GraphBuilder
from graphopt.workloads.recurrent import lstm_param_count, stacked_lstm

HIDDEN = 2048
BATCH = 64
VOCAB = 40_000
NUM_STEPS = 40


def rnnlm(
    num_layers: int,
    *,
    hidden: int = HIDDEN,
    batch: int = BATCH,
    vocab: int = VOCAB,
    num_steps: int = NUM_STEPS,
    optimizer: str = "sgd",
    name: str | None = None,
) -> CompGraph:
    """Build the training step of an LSTM language model.

    Args:
        num_layers: stacked LSTM layers (GO: 2, 4, 8).
        hidden: LSTM units, also the embedding size.
        batch: sequences per step.
        vocab: words in the vocabulary (embedding rows and softmax classes).
        num_steps: unrolled time steps.
        optimizer: see :data:`graphopt.workloads.backward.OPTIMIZERS`.
        name: graph name (default ``rnnlm-<num_layers>``).

    Raises:
        ValueError: a non-positive size.
    """
    check_positive(
        num_layers=num_layers, hidden=hidden, batch=batch, vocab=vocab, num_steps=num_steps
    )
    b = GraphBuilder(name or f"rnnlm-{num_layers}")
    with b.scope("input", layer="input"):
        ids = ops.placeholder(b, (batch, num_steps), "ids")
        labels = ops.placeholder(b, (batch, num_steps), "labels")
        step_labels = ops.unpack(b, labels, axis=1, name="unstack_labels")
    with b.scope("embedding", layer="embedding", colocation="embedding"):
        xs = ops.unpack(b, layers.embedding(b, ids, vocab, hidden), axis=1)
    hs = stacked_lstm(b, xs, hidden, num_layers, scope="rnn")
    with b.scope("softmax", layer="softmax"):
        w = b.variable("weights", (hidden, vocab))
        bias = b.variable("bias", (vocab,))
        losses = [
            layers.softmax_loss(b, h, step_labels[t], w, bias, scope=f"t{t}")
            for t, h in enumerate(hs)
        ]
    loss = layers.mean_loss(b, losses)
    add_backward(b, loss, optimizer=optimizer)
    config = {
        "num_layers": num_layers,
        "hidden": hidden,
        "batch": batch,
        "vocab": vocab,
        "num_steps": num_steps,
        "optimizer": optimizer,
    }
    return b.build(
        {
            "family": "rnnlm",
            "config": config,
            "params": rnnlm_param_count(num_layers, hidden, vocab),
        }
    )


def rnnlm_param_count(num_layers: int, hidden: int, vocab: int) -> int:
    """Analytic parameter count: embedding, LSTM layers, softmax weights and bias."""
    return vocab * hidden + num_layers * lstm_param_count(hidden, hidden) + hidden * vocab + vocab
