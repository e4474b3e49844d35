"""Tests of graphopt.workloads.transformer_xl."""

from __future__ import annotations

import pytest

from graphopt.workloads.transformer_xl import transformer_xl, txl_param_count

from ._helpers import assert_valid_training_graph


def _small(**kw):  # type: ignore[no-untyped-def]
    cfg = dict(d_model=16, n_head=2, d_head=8, d_inner=32, tgt_len=6, mem_len=4, vocab=11, batch=2)
    cfg.update(kw)
    return transformer_xl(2, **cfg)


def test_parameters_and_validity() -> None:
    g = _small()
    assert_valid_training_graph(g)
    assert g.param_bytes.sum() == 4 * txl_param_count(2, 16, 2, 8, 32, 11)


def test_memory_flows_between_segments_without_gradient() -> None:
    g = _small(num_segments=2)
    mem = g.index["seg0/layer_1/cache/StopGradient"]
    readers = {g.op_names[d] for s, d in zip(g.edge_src, g.edge_dst, strict=True) if s == mem}
    assert "seg1/layer_1/rel_attn/ConcatV2" in readers
    assert not any(n.startswith("gradients/seg0/layer_1/cache/") for n in g.op_names)
    # the last segment's memories are outputs for the next step
    out_deg = {g.op_names[s] for s in g.edge_src.tolist()}
    assert "seg1/layer_0/cache/StopGradient" not in out_deg


def test_tied_embedding_mixes_sparse_and_dense_gradients() -> None:
    g = _small(num_segments=1)
    assert "gradients/transformer/embedding/lookup_table/UnsortedSegmentSum" in g.index
    assert "train/update_transformer/embedding/lookup_table/ApplyGradientDescent" in g.index


def test_segments_scale_the_graph() -> None:
    one, two = _small(num_segments=1), _small(num_segments=2)
    assert 1.8 < two.num_ops / one.num_ops < 2.2


def test_bad_sizes() -> None:
    with pytest.raises(ValueError, match="d_model must be even"):
        transformer_xl(2, d_model=15)
