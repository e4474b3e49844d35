"""policies.heads: per-block logits, per-task attention on the shared trunk, value head."""

from __future__ import annotations

import pytest
import torch

from policies.heads import TaskHeads, ValueHead, blocks_of

torch.set_num_threads(1)


def test_shapes_and_per_task_layers():
    classes = {"placement": 4, "scheduling": 8, "fusion": 2}
    heads = TaskHeads(classes, hidden=16, head_layers=2, segment_len=8, mem_len=8)
    assert heads.num_film_layers == 6
    h = torch.randn(3, 20, 16)
    mask = torch.arange(20)[None] < torch.tensor([20, 5, 0])[:, None]
    out = heads(h, mask)
    assert {k: tuple(v.shape) for k, v in out.items()} == {
        "placement": (3, 20, 4),
        "scheduling": (3, 20, 8),
        "fusion": (3, 20, 2),
    }
    films = [(torch.zeros(3, 16), torch.zeros(3, 16))] * 6
    for name in classes:
        torch.testing.assert_close(heads(h, mask, films)[name], out[name])
    # each block has its own attention weights
    a, b = heads.attention["placement"], heads.attention["scheduling"]
    assert a.layers[0].query.weight.data_ptr() != b.layers[0].query.weight.data_ptr()


def test_initial_logits_are_near_uniform():
    heads = TaskHeads({"placement": 4}, hidden=16)
    logits = heads(torch.randn(2, 10, 16), torch.ones(2, 10, dtype=torch.bool))["placement"]
    assert logits.abs().max() < 0.2


def test_value_head():
    assert ValueHead(10, hidden=8)(torch.randn(5, 10)).shape == (5,)


def test_blocks_of():
    assert blocks_of("joint") == ("placement", "scheduling", "fusion")
    with pytest.raises(ValueError, match="unknown task"):
        blocks_of("routing")
