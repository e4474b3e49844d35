"""Graph Segment Training: partition, segment sums, stale dropout, history table, training."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import torch

from graphopt.costmodel import data
from graphopt.costmodel.fit import GraphTensors, predict
from graphopt.costmodel.gst import (
    HistoryTable,
    Segments,
    combine_stale,
    finetune_head,
    fit_gst,
    partition,
    pooled_segmented,
    predict_segmented,
    stale_keep_mask,
)
from graphopt.costmodel.losses import listmle_loss
from graphopt.costmodel.metrics import ranking_report
from graphopt.costmodel.model import CostNet, NetLayout
from graphopt.hardware import get_cluster
from graphopt.workloads.registry import get_graph


@pytest.fixture(scope="module")
def rnnlm(tmp_path_factory: pytest.TempPathFactory) -> data.GraphSamples:
    """rnnlm-tiny (318 ops) with 32 simulated placements."""
    out: Path = tmp_path_factory.mktemp("gst")
    graph, cluster = get_graph("rnnlm-tiny"), get_cluster("v100-nvlink-4")
    data.generate([graph], cluster, out, samples=32, seed=0, progress=False)
    (samples,) = data.load_dataset(out, include_oom=True)
    return samples


def _net(s: data.GraphSamples, hidden: int = 16, seed: int = 0) -> CostNet:
    torch.manual_seed(seed)
    layout = NetLayout(
        node_features=s.node_feat.shape[1],
        config_features=s.configs.num_features,
        summary_features=s.configs.num_summary,
        hidden=hidden,
        layers=2,
    )
    return CostNet(layout)


def _blocky(blocks: int = 3, size: int = 10, k: int = 6) -> data.GraphSamples:
    """A graph whose edges all lie inside blocks of ``size`` consecutive nodes; the configurable
    nodes are a shuffled subset, so config columns and positions differ."""
    rng = np.random.default_rng(0)
    n = blocks * size
    src, dst = [], []
    for b in range(blocks):
        for i in range(b * size + 1, (b + 1) * size):
            for p in rng.choice(np.arange(b * size, i), size=min(2, i - b * size), replace=False):
                src.append(p)
                dst.append(i)
    cids = rng.permutation(n)[: 2 * n // 3]
    return data.GraphSamples(
        name="blocky",
        node_feat=rng.normal(size=(n, 4)).astype(np.float32),
        node_opcode=rng.integers(1, 50, size=n),
        edges=np.array([src, dst], dtype=np.int64),
        config_node_ids=cids.astype(np.int64),
        configs=data.ArrayConfigs(rng.normal(size=(k, cids.size, 3)).astype(np.float32)),
        runtime=rng.uniform(1.0, 2.0, size=k),
    )


# ---------------------------------------------------------------------------- partition
@pytest.mark.parametrize("segment_size", [1, 7, 100, 318, 10_000])
def test_partition_covers_every_node_once_and_localises_edges(
    rnnlm: data.GraphSamples, segment_size: int
) -> None:
    n = rnnlm.num_nodes
    parts = partition(n, rnnlm.edges, segment_size)
    assert len(parts) == -(-n // segment_size)
    np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(n))
    assert max(p.size for p in parts) <= segment_size

    segs = Segments.of(rnnlm, segment_size)
    seg_of = np.empty(n, dtype=np.int64)
    for j, ids in enumerate(parts):
        seg_of[ids] = j
    inside = set()
    for j in range(segs.count):
        ids, local = segs.nodes[j].numpy(), segs.edges[j].numpy()
        assert local.size == 0 or (local.min() >= 0 and local.max() < ids.size)
        glob = ids[local]
        assert np.all(seg_of[glob] == j)  # both ends inside segment j
        inside |= set(map(tuple, glob.T.tolist()))
        # configurable nodes: the columns of config_feat map to the same nodes
        np.testing.assert_array_equal(
            ids[segs.config_pos[j].numpy()], rnnlm.config_node_ids[segs.config_cols[j].numpy()]
        )
    expected = {(a, b) for a, b in rnnlm.edges.T.tolist() if seg_of[a] == seg_of[b]}
    assert inside == expected
    assert segs.cut_edges == rnnlm.edges.shape[1] - len(expected)
    cols = np.sort(np.concatenate([c.numpy() for c in segs.config_cols]))
    np.testing.assert_array_equal(cols, np.arange(rnnlm.config_node_ids.size))


def test_partition_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="segment_size"):
        partition(10, np.zeros((2, 0)), 0)
    with pytest.raises(ValueError, match="10 nodes"):
        partition(10, np.array([[0], [10]]), 4)
    assert partition(0, np.zeros((2, 0)), 4) == []
    with pytest.raises(ValueError, match="configurable node ids"):
        Segments.build(10, np.zeros((2, 0)), np.array([3, 12]), 4)


# ---------------------------------------------------------------------------- segment sums
def test_one_segment_predicts_like_whole_graph(rnnlm: data.GraphSamples) -> None:
    net = _net(rnnlm)
    whole = predict(net, rnnlm)
    np.testing.assert_allclose(predict_segmented(net, rnnlm, 10_000, 8), whole, atol=1e-5)


def test_segment_sums_add_up_without_cross_edges() -> None:
    s = _blocky()
    net = CostNet(NetLayout(node_features=4, config_features=3, hidden=16, layers=2)).eval()
    segs = Segments.of(s, 10)
    assert segs.count == 3 and segs.cut_edges == 0
    t = GraphTensors.of(s)
    feat = torch.as_tensor(s.configs.features(np.arange(s.num_configs)))
    with torch.no_grad():
        static = net.static(t.node_feat, t.opcode)
        whole = net.segment_sum(static, t.edges, t.config_node_ids, feat)
        parts = sum(
            net.segment_sum(
                static[segs.nodes[j]],
                segs.edges[j],
                segs.config_pos[j],
                feat[:, segs.config_cols[j]],
            )
            for j in range(segs.count)
        )
    torch.testing.assert_close(parts, whole, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(predict_segmented(net, s, 10, 4), predict(net, s), atol=1e-5)


# ---------------------------------------------------------------------------- stale dropout
@pytest.mark.parametrize(("m", "p"), [(1, 0.5), (3, 0.5), (4, 0.25), (5, 0.8)])
def test_stale_dropout_is_unbiased_given_one_kept(m: int, p: float) -> None:
    """Exact expectation over all 2^m keep masks: (1 - p^m) times the full sum."""
    stale = torch.randn(m, 2, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(m))
    expect = torch.zeros(2, 3, dtype=torch.float64)
    for bits in itertools.product([False, True], repeat=m):
        keep = np.array(bits)
        prob = (1 - p) ** keep.sum() * p ** (m - keep.sum())
        expect += prob * combine_stale(stale, keep)
    torch.testing.assert_close(expect, (1 - p**m) * stale.sum(0))
    # conditioned on at least one kept, the full sum exactly
    torch.testing.assert_close(expect / (1 - p**m), stale.sum(0))


def test_stale_dropout_edge_cases() -> None:
    stale = torch.arange(12.0).reshape(3, 2, 2)
    torch.testing.assert_close(combine_stale(stale, np.ones(3, bool)), stale.sum(0))
    torch.testing.assert_close(combine_stale(stale, np.zeros(3, bool)), torch.zeros(2, 2))
    torch.testing.assert_close(combine_stale(stale, np.array([1, 0, 0], bool)), 3 * stale[0])
    keep = stale_keep_mask(100_000, 0.3, np.random.default_rng(0))
    assert abs(keep.mean() - 0.7) < 0.01
    assert stale_keep_mask(5, 0.0, np.random.default_rng(0)).all()
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        stale_keep_mask(3, 1.0, np.random.default_rng(0))


# ---------------------------------------------------------------------------- training
def test_fit_gst_decreases_the_loss(rnnlm: data.GraphSamples) -> None:
    net = _net(rnnlm)
    runtime = torch.as_tensor(rnnlm.runtime, dtype=torch.float32)

    def loss() -> float:  # ListMLE of all 32 configurations, scored segmented as trained
        return float(listmle_loss(torch.as_tensor(predict_segmented(net, rnnlm, 80)), runtime))

    before = loss()
    history = fit_gst(net, [rnnlm], segment_size=80, epochs=20, batch_size=8, lr=1e-2, seed=0)
    assert len(history) == 20
    assert set(history[0]) == {"epoch", "train/loss", "time"}
    epoch_loss = [row["train/loss"] for row in history]
    assert np.mean(epoch_loss[-3:]) < np.mean(epoch_loss[:3])
    assert loss() < before - 0.05


def test_fit_gst_validation_keys(rnnlm: data.GraphSamples) -> None:
    train, val = data.split_samples([rnnlm], 0.25, seed=0)
    history = fit_gst(_net(rnnlm), train, val, segment_size=80, epochs=1, batch_size=8)
    assert {"val/kendall_tau", "val/opa", "val/top1_error", "val/num_groups"} <= set(history[0])


def test_table_is_filled_after_one_epoch(rnnlm: data.GraphSamples) -> None:
    net = _net(rnnlm)
    segs = Segments.of(rnnlm, 80)
    table = HistoryTable.for_graphs([rnnlm], [segs], net.layout.hidden)
    assert table.nbytes == rnnlm.num_configs * segs.count * (4 * 16 + 1)
    assert not table.filled[0].any()
    batch = 8 if rnnlm.num_configs % 8 != 1 else 7  # no leftover single configuration
    fit_gst(net, [rnnlm], segment_size=80, epochs=1, batch_size=batch, table=table)
    assert table.filled[0].shape == (rnnlm.num_configs, 4)
    assert table.filled[0].all()
    assert table.emb[0].abs().sum(-1).gt(0).all()
    with pytest.raises(ValueError, match="history table"):
        fit_gst(net, [rnnlm], segment_size=40, epochs=1, table=table)


def test_gradient_flows_only_through_sampled_segments(
    rnnlm: data.GraphSamples, monkeypatch: pytest.MonkeyPatch
) -> None:
    net = _net(rnnlm)
    calls: list[bool] = []
    steps: list[bool] = []
    segment_sum, head = net.segment_sum, net.head

    def counting_segment_sum(*args: object, **kwargs: object) -> torch.Tensor:
        calls.append(torch.is_grad_enabled())
        out = segment_sum(*args, **kwargs)
        assert out.requires_grad == torch.is_grad_enabled()
        return out

    def counting_head(*args: object, **kwargs: object) -> torch.Tensor:
        steps.append(torch.is_grad_enabled())
        return head(*args, **kwargs)

    monkeypatch.setattr(net, "segment_sum", counting_segment_sum)
    monkeypatch.setattr(net, "head", counting_head)
    fit_gst(net, [rnnlm], segment_size=80, sampled_segments=2, epochs=2, batch_size=8)
    num_steps = sum(steps)
    assert num_steps >= 2 * (rnnlm.num_configs // 8)
    assert sum(calls) == 2 * num_steps  # k = 2 segments with gradient per step
    # first epoch: the other 2 segments of every configuration once, without gradient
    assert len(calls) - sum(calls) >= 2 * (rnnlm.num_configs // 8)
    for name, p in net.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_pooled_segmented_is_the_sum_of_segment_embeddings(rnnlm: data.GraphSamples) -> None:
    net = _net(rnnlm)
    whole = pooled_segmented(net, rnnlm, segment_size=10_000)
    t = GraphTensors.of(rnnlm)
    feat = torch.as_tensor(rnnlm.configs.features(np.arange(rnnlm.num_configs)))
    with torch.no_grad():
        expected = net.segment_sum(
            net.static(t.node_feat, t.opcode), t.edges, t.config_node_ids, feat
        )
    torch.testing.assert_close(whole, expected, rtol=1e-4, atol=1e-4)
    seg = pooled_segmented(net, rnnlm, segment_size=64, batch_size=5)  # several segments, batches
    assert seg.shape == whole.shape and not torch.allclose(seg, whole)  # cross edges dropped
    summary = torch.as_tensor(rnnlm.configs.summary(np.arange(rnnlm.num_configs)))
    with torch.no_grad():
        head = net.head(seg, rnnlm.num_nodes, summary).numpy()
    np.testing.assert_allclose(predict_segmented(net, rnnlm, 64), head, rtol=1e-5)


def test_finetune_head_trains_only_the_head(rnnlm: data.GraphSamples) -> None:
    train, val = data.split_samples([rnnlm], 0.25, seed=0)
    net = _net(rnnlm)
    torch.manual_seed(1)
    for layer in net.mlp:  # a fresh random head: knows nothing of the runtimes
        if isinstance(layer, torch.nn.Linear):
            layer.reset_parameters()
    backbone = {k: v.clone() for k, v in net.state_dict().items() if not k.startswith("mlp.")}
    before = ranking_report(predict_segmented(net, train[0], 64), train[0].runtime)
    rows = finetune_head(net, train, val, segment_size=64, epochs=15, batch_size=8, lr=1e-2)
    assert [r["epoch"] for r in rows] == [float(e) for e in range(1, 16)]
    after = ranking_report(predict_segmented(net, train[0], 64), train[0].runtime)
    assert after["kendall_tau"] > before["kendall_tau"] + 0.1  # the head learned to rank
    assert rows[-1]["train/loss"] < rows[0]["train/loss"]
    for k, v in net.state_dict().items():  # the GNN is frozen
        if not k.startswith("mlp."):
            torch.testing.assert_close(v, backbone[k])
    best = max(r["val/kendall_tau"] for r in rows)
    final = ranking_report(predict_segmented(net, val[0], 64), val[0].runtime)["kendall_tau"]
    assert final == pytest.approx(best)  # the head of the best validation epoch is kept
