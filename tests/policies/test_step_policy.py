"""The step-wise policy's network: its position features and their bounds."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphopt.encoding import encode
from graphopt.hardware import get_cluster
from graphopt.workloads import get_graph
from policies.step_policy import POSITION, StepPolicy

SMALL = dict(hidden=16, head_hidden=8, sage_layers=1, attn_layers=1, segment_len=32, mem_len=32)


def observation() -> dict[str, np.ndarray]:
    graph = get_graph("random-sp-100-s1")
    return encode(graph, get_cluster("v100-nvlink-4"), graph.num_ops, graph.num_edges).observation


def test_position_features_add_an_mlp_of_the_fourier_features_of_the_position() -> None:
    torch.manual_seed(0)
    plain = StepPolicy(**SMALL)
    torch.manual_seed(0)
    with_positions = StepPolicy(**SMALL, positions=4)
    obs = observation()
    with torch.no_grad():
        base, pre = plain.embed(obs), with_positions.embed(obs)
        x = torch.as_tensor(obs["op_features"][:100, POSITION])
        angles = x[:, None] * (np.pi * 2.0 ** torch.arange(4))
        fourier = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)
        assert with_positions.pos_proj is not None
        expected = base + with_positions.pos_proj(fourier)
    assert torch.allclose(pre, expected, atol=1e-5)
    assert not torch.allclose(pre, base, atol=1e-3)  # the positions change every op's row


@pytest.mark.parametrize("bad", [-1, 17, 2.5, True])
def test_position_count_out_of_range_is_refused(bad) -> None:
    with pytest.raises(ValueError, match="positions must be an integer in 0..16"):
        StepPolicy(**SMALL, positions=bad)
