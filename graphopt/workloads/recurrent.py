"""LSTM layers unrolled over time steps, at the op granularity of TensorFlow's ``BasicLSTMCell``.

One cell step (Hochreiter & Schmidhuber 1997, with the forget-gate bias of Gers et al. 2000, as
``tf.nn.rnn_cell.BasicLSTMCell`` computes it)::

    xh    = ConcatV2(x_t, h_{t-1})                      [B, d_in + H]
    gates = BiasAdd(MatMul(xh, kernel), bias)           kernel [d_in + H, 4H], bias [4H]
    i, j, f, o = Split(gates, 4)
    c_t   = c_{t-1} * Sigmoid(f + 1) + Sigmoid(i) * Tanh(j)
    h_t   = Tanh(c_t) * Sigmoid(o)

That is 14 forward ops per step: ``ConcatV2``, ``MatMul``, ``BiasAdd``, ``Split``, ``AddV2``, 3
``Sigmoid``, 2 ``Tanh``, 3 ``Mul``, ``AddV2``. The weights are created once per layer and read by
every step, so their bytes are counted once (by the variables) however long the unrolling.

Names and groups: step ``t`` of layer ``l`` lives in scope ``<scope>/layer_<l>/t<t>`` and forms the
colocation group of that name; the layer (module path) is ``<scope>/layer_<l>``; the weights join
the group of step 0 (their first reader).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from graphopt.workloads import ops
from graphopt.workloads.builder import GraphBuilder, Tensor


class LSTMWeights(NamedTuple):
    """The weights of one LSTM layer: ``kernel [d_in + H, 4H]`` and ``bias [4H]``."""

    kernel: Tensor
    bias: Tensor

    @property
    def hidden(self) -> int:
        return self.bias.shape[0] // 4


def lstm_weights(b: GraphBuilder, input_dim: int, hidden: int) -> LSTMWeights:
    """Create a layer's weights under the current scope: ``4 H (d_in + H + 1)`` parameters."""
    kernel = b.variable("kernel", (input_dim + hidden, 4 * hidden))
    bias = b.variable("bias", (4 * hidden,))
    return LSTMWeights(kernel, bias)


def lstm_param_count(input_dim: int, hidden: int) -> int:
    """Parameters of one LSTM layer (kernel and bias)."""
    return 4 * hidden * (input_dim + hidden + 1)


@dataclass
class LSTMState:
    """A layer's weights and its running ``(c, h)`` while unrolling."""

    weights: LSTMWeights
    c: Tensor
    h: Tensor

    @classmethod
    def create(cls, b: GraphBuilder, input_dim: int, hidden: int, batch: int) -> LSTMState:
        """Weights (:func:`lstm_weights`) and zero state (:func:`zero_state`) under the current
        scope."""
        return cls(lstm_weights(b, input_dim, hidden), *zero_state(b, batch, hidden))

    def step(self, b: GraphBuilder, x: Tensor | Sequence[Tensor]) -> Tensor:
        """Run one :func:`lstm_cell` under the current scope, keep the new state, return ``h``."""
        self.c, self.h = lstm_cell(b, self.weights, x, self.c, self.h)
        return self.h


def zero_state(b: GraphBuilder, batch: int, hidden: int) -> tuple[Tensor, Tensor]:
    """The initial ``(c, h)``: two ``Fill`` ops of shape ``[batch, hidden]``."""
    return ops.fill(b, (batch, hidden), "zero_c"), ops.fill(b, (batch, hidden), "zero_h")


def lstm_cell(
    b: GraphBuilder, w: LSTMWeights, x: Tensor | Sequence[Tensor], c: Tensor, h: Tensor
) -> tuple[Tensor, Tensor]:
    """One step under the current scope; returns ``(c_t, h_t)``. ``x`` may be several tensors
    (e.g. GNMT's decoder input and attention context), concatenated with ``h`` by one
    ``ConcatV2``.

    Shapes:
        ``x: [B, d_in]`` (or parts summing to ``d_in``), ``c, h: [B, H]`` -> ``c_t, h_t: [B, H]``.
    """
    parts = (x,) if isinstance(x, Tensor) else tuple(x)
    xh = ops.concat(b, (*parts, h), axis=1)
    gates = ops.bias_add(b, ops.matmul(b, xh, w.kernel), w.bias)
    i, j, f, o = ops.split(b, gates, 4, axis=1)
    f = b.op("AddV2", "add", (f,), f.shape, flops=float(f.size))  # + forget_bias (a constant)
    forget = ops.binary(b, "Mul", c, ops.unary(b, "Sigmoid", f))
    write = ops.binary(b, "Mul", ops.unary(b, "Sigmoid", i), ops.unary(b, "Tanh", j))
    new_c = ops.binary(b, "AddV2", forget, write)
    new_h = ops.binary(b, "Mul", ops.unary(b, "Tanh", new_c), ops.unary(b, "Sigmoid", o))
    return new_c, new_h


def lstm_layer(
    b: GraphBuilder, xs: Sequence[Tensor], hidden: int, *, scope: str, reverse: bool = False
) -> list[Tensor]:
    """One LSTM layer over the sequence ``xs`` (recorded step after step); returns ``h_t`` per
    step, in the order of ``xs``. ``reverse`` runs from the last step to the first (the backward
    direction of a bidirectional layer)."""
    full = b.full_name(scope)
    outputs: list[Tensor] = list(xs)
    with b.scope(scope, layer=full):
        w = lstm_weights(b, xs[0].shape[-1], hidden)
        c, h = zero_state(b, xs[0].shape[0], hidden)
        steps = range(len(xs) - 1, -1, -1) if reverse else range(len(xs))
        for t in steps:
            with b.scope(f"t{t}", colocation=f"{full}/t{t}"):
                c, h = lstm_cell(b, w, xs[t], c, h)
            outputs[t] = h
    return outputs


def stacked_lstm(
    b: GraphBuilder,
    xs: Sequence[Tensor],
    hidden: int,
    num_layers: int,
    *,
    scope: str,
    first_layer: int = 0,
    residual_from: int | None = None,
) -> list[Tensor]:
    """``num_layers`` LSTM layers over ``xs``, recorded step-major (all layers of step 0, then
    step 1...), as ``MultiRNNCell`` unrolls them.

    Args:
        b: the builder.
        xs: input per time step, ``[B, d_in]`` each.
        hidden: units per layer.
        num_layers: layers in the stack.
        scope: name scope; layer ``k`` of the stack is named ``layer_<first_layer + k>``.
        first_layer: index of the stack's first layer (to continue numbering after a
            bidirectional layer).
        residual_from: layer index from which a residual ``AddV2`` adds each layer's input to
            its output (GNMT: 2, i.e. the third layer); ``None`` for no residuals.

    Returns:
        The top layer's output per time step.
    """
    batch = xs[0].shape[0]
    layers: list[LSTMState] = []
    with b.scope(scope):
        base = b.current_scope
        for k in range(num_layers):
            idx = first_layer + k
            d_in = xs[0].shape[-1] if k == 0 else hidden
            with b.scope(f"layer_{idx}", layer=f"{base}/layer_{idx}"):
                layers.append(LSTMState.create(b, d_in, hidden, batch))
        outputs = []
        for t, x in enumerate(xs):
            for k, state in enumerate(layers):
                idx = first_layer + k
                path = f"{base}/layer_{idx}"
                with b.scope(f"layer_{idx}/t{t}", layer=path, colocation=f"{path}/t{t}"):
                    h = state.step(b, x)
                    if residual_from is not None and idx >= residual_from:
                        h = ops.binary(b, "AddV2", h, x, name="residual")
                x = h
            outputs.append(x)
    return outputs
