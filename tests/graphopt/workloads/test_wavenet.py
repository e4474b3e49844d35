"""Tests of graphopt.workloads.wavenet."""

from __future__ import annotations

from graphopt.workloads.wavenet import wavenet

from ._helpers import assert_valid_training_graph


def _params(stacks: int, per_stack: int, r: int, d: int, s: int, q: int) -> int:
    layers = stacks * per_stack
    causal = 2 * q * r
    gated = 2 * (2 * r * d + d)
    dense = d * r + r
    skip = d * s + s
    post = s * s + s + s * q + q
    return causal + layers * (gated + skip) + (layers - 1) * dense + post


def test_parameters_and_shapes() -> None:
    g = wavenet(
        2,
        layers_per_stack=3,
        residual_channels=4,
        dilation_channels=6,
        skip_channels=8,
        quantization=16,
        samples=50,
    )
    assert_valid_training_graph(g)
    assert g.param_bytes.sum() == 4 * _params(2, 3, 4, 6, 8, 16)
    cfg = g.metadata["config"]
    assert cfg["receptive_field"] == 2 * (1 + 2 + 4) + 2
    out = g.index["postprocessing/SparseSoftmaxCrossEntropyWithLogits"]
    assert g.output_bytes[out] == 4 * 50 + 4 * 50 * 16  # loss and its saved gradient


def test_default_sizes_and_dilations() -> None:
    g2, g4 = wavenet(2), wavenet(4)
    for g in (g2, g4):
        assert_valid_training_graph(g)
    assert 900 <= g2.num_ops <= 1_500 and 1_800 <= g4.num_ops <= 3_000
    # input: 100,000 samples + receptive field 2048 - 1; each layer drops `dilation` steps, so
    # layer 9 (dilation 512, after the causal layer and dilations 1..512) outputs 101,023 steps
    conv = g2.index["dilated_stack/layer9/filter/Conv2D"]
    width = 100_000 + 2048 - 1 - 1 - sum(2**i for i in range(10))
    assert width == 101_023
    assert g2.flops[conv] == 2 * width * 2 * 32 * 32
