"""The step-wise policy's training: imitation, PPO with a shared baseline, checkpoints."""

from __future__ import annotations

import math
import zipfile

import numpy as np
import pytest
import torch

from graphopt.decoders.stepwise import ANCHOR_FEATURE, decode
from graphopt.hardware import get_cluster
from graphopt.train.stepwise import (
    INVALID_LOG_REWARD,
    StepTrainConfig,
    advantages,
    canonical_target,
    first_use_labels,
    greedy_speedups,
    improve_target,
    load_checkpoint,
    lookahead_batch,
    make_item,
    returns,
    rollout,
    save_checkpoint,
    search_batch,
    train,
)
from graphopt.workloads import get_graph
from policies.step_policy import StepPolicy

SMALL = dict(hidden=16, head_hidden=8, sage_layers=1, attn_layers=1, segment_len=32, mem_len=32)


@pytest.fixture(scope="module")
def items():
    cluster = get_cluster("v100-nvlink-4")
    return [make_item(get_graph(n), cluster) for n in ("txl-tiny", "random-sp-100-s0")]


def test_imitation_makes_greedy_the_heuristic_exactly(items) -> None:
    """Without the anchor's initial bonus, greedy decoding starts away from the best heuristic;
    imitation teaches it, on the training graphs and on an unseen one."""
    config = StepTrainConfig(
        updates=0,
        imitation_updates=8,
        samples_per_graph=2,
        epochs=12,
        minibatches=1,
        learning_rate=2e-2,
        eval_every=100,
        policy=dict(SMALL, anchor_weight=0.0),
        threads=1,
    )
    torch.manual_seed(0)
    untrained = StepPolicy(**config.policy)
    with torch.no_grad():
        head = untrained.head_params(untrained.embed(items[0].observation))
    assert (decode(items[0].sg, "greedy", head).placement != items[0].sg.anchor).any()
    policy, rows = train(items, [], config)
    assert rows[-1]["imitation/accuracy"] == 1.0
    unseen = make_item(get_graph("random-layered-100-s0"), get_cluster("v100-nvlink-4"))
    for item in [*items, unseen]:
        with torch.no_grad():
            head = policy.head_params(policy.embed(item.observation))
        assert np.array_equal(decode(item.sg, "greedy", head).placement, item.sg.anchor)
    assert greedy_speedups(policy, items) == pytest.approx(1.0)


def test_returns_and_advantages(items) -> None:
    policy = StepPolicy(**SMALL)
    batch = rollout(policy, items[0], 6, np.random.default_rng(0))
    batch.valid[0] = False
    r = returns(batch)
    assert r[0] == INVALID_LOG_REWARD == pytest.approx(-math.log(16))
    expected = np.log(items[0].reference_time / batch.step_times[1:])
    assert r[1:] == pytest.approx(expected)
    a = advantages(np.array([1.0, 2.0, 3.0]), 1e-3)
    assert a == pytest.approx([-1.2247, 0.0, 1.2247], abs=1e-4)
    # equal returns (every sample the same decision): no signal, not a division by zero
    assert advantages(np.full(4, 0.5), 1e-3) == pytest.approx(np.zeros(4))


def test_batch_keeps_only_steps_with_a_choice(items) -> None:
    policy = StepPolicy(**SMALL)
    batch = rollout(policy, items[1], 3, np.random.default_rng(0))
    assert batch.decisions == 3 * items[1].sg.num_ops
    assert (batch.masks.sum(dim=1) >= 2).all()
    assert len(batch.episode) == len(batch.ops) == len(batch.actions)


def test_self_imitation_takes_a_faster_sample() -> None:
    item = make_item(get_graph("random-sp-100-s0"), get_cluster("v100-nvlink-4"))
    policy = StepPolicy(**SMALL, anchor_weight=1.0)
    batch = rollout(policy, item, 32, np.random.default_rng(0))
    r = returns(batch)
    item.target_return = float(r.max()) - 1.0  # pretend the target is slower than every sample
    samples = np.zeros((32, item.sg.num_ops), dtype=np.int64) + np.arange(32)[:, None] % 4
    assert improve_target(batch, samples)
    assert item.target_return == pytest.approx(r.max())
    assert np.array_equal(item.target, samples[int(np.argmax(r))])
    assert not improve_target(batch, samples)  # not faster than itself


def test_ppo_moves_the_policy_and_logs(items, tmp_path) -> None:
    config = StepTrainConfig(
        updates=2,
        imitation_updates=1,
        samples_per_graph=4,
        eval_every=1,
        ent_coef=0.01,
        imitation_coef=0.5,
        self_imitation=True,
        policy=SMALL,
        threads=1,
    )
    torch.manual_seed(0)
    start = StepPolicy(**SMALL)
    before = {k: v.clone() for k, v in start.state_dict().items()}
    policy, rows = train(items, items[:1], config, out_dir=tmp_path, policy=start)
    changed = [k for k, v in policy.state_dict().items() if not torch.equal(v, before[k])]
    assert "w_feat.weight" in changed and "anchor_weight" in changed
    assert any("ppo/clip_fraction" in r for r in rows)
    assert [r["update"] for r in rows if "val/speedup" in r] == [0, 1, 2, 3]
    assert (tmp_path / "policy.pt").exists() and (tmp_path / "best.pt").exists()
    assert len((tmp_path / "progress.jsonl").read_text().splitlines()) == len(rows)
    again = load_checkpoint(tmp_path / "policy.pt")
    for key, value in policy.state_dict().items():
        assert torch.equal(again.state_dict()[key], value)


def test_checkpoint_errors(tmp_path) -> None:
    with pytest.raises(ValueError, match="no such checkpoint"):
        load_checkpoint(tmp_path / "missing.pt")
    model_zip = tmp_path / "model.zip"  # what a one-shot run saves (SB3)
    with zipfile.ZipFile(model_zip, "w") as z:
        z.writestr("data", "{}")
    with pytest.raises(ValueError, match="not a step-wise policy checkpoint"):
        load_checkpoint(model_zip)
    torch.save({"state_dict": {}}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="no kind"):
        load_checkpoint(tmp_path / "other.pt")
    save_checkpoint(tmp_path / "ok.pt", StepPolicy(**SMALL), {"update": 0})
    assert isinstance(load_checkpoint(tmp_path / "ok.pt"), StepPolicy)
    (tmp_path / "cut.pt").write_bytes((tmp_path / "ok.pt").read_bytes()[:100])
    with pytest.raises(ValueError, match="not a step-wise policy checkpoint"):
        load_checkpoint(tmp_path / "cut.pt")


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("samples_per_graph", 0, "samples_per_graph must be an integer in 1..1000000"),
        ("samples_per_graph", 10**12, "samples_per_graph must be an integer in 1..1000000"),
        ("updates", -1, "updates must be an integer in 0..1000000"),
        ("updates", True, "updates must be an integer in 0..1000000"),
        ("learning_rate", float("nan"), "learning_rate must be a finite number > 0"),
        ("ent_coef", -0.1, "ent_coef must be a finite number >= 0"),
        ("algorithm", "reinforce", "algorithm must be one of ppo, lookahead"),
        ("lookahead_steps", 0, "lookahead_steps must be an integer in 1..1000000"),
        ("device", "gpu", "device 'gpu' is unknown; use auto, cpu, cuda or cuda:N"),
    ],
)
def test_config_ranges(field, value, match) -> None:
    with pytest.raises(ValueError, match=match):
        StepTrainConfig(**{field: value}).validate()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_training_on_cuda(items, tmp_path) -> None:
    """The encoder and the updates on the GPU, the decoder on the CPU; the checkpoint loads on a
    machine without one."""
    config = StepTrainConfig(
        updates=1,
        imitation_updates=1,
        samples_per_graph=4,
        eval_every=1,
        policy=SMALL,
        threads=1,
        device="cuda",
    )
    torch.manual_seed(0)
    start = StepPolicy(**SMALL)
    before = {k: v.clone() for k, v in start.state_dict().items()}
    policy, rows = train(items, items[:1], config, out_dir=tmp_path, policy=start)
    assert policy.proj.weight.is_cuda
    assert [r["update"] for r in rows if "val/speedup" in r] == [0, 1, 2]
    again = load_checkpoint(tmp_path / "policy.pt")
    assert not again.proj.weight.is_cuda
    changed = [k for k, v in again.state_dict().items() if not torch.equal(v, before[k])]
    assert "w_feat.weight" in changed


def test_no_training_graph() -> None:
    with pytest.raises(ValueError, match="no training graph"):
        train([], [], StepTrainConfig())


def test_ablation_without_schedule_features_reads_only_the_anchor(items) -> None:
    policy = StepPolicy(**SMALL, schedule_features=False)
    batch = rollout(policy, items[0], 2, np.random.default_rng(0))
    pre = policy.embed(items[0].observation)
    base = policy.logits(pre[batch.ops], batch.feats, batch.masks)
    noisy = batch.feats + torch.randn_like(batch.feats)
    noisy[..., ANCHOR_FEATURE] = batch.feats[..., ANCHOR_FEATURE]  # every feature but the anchor
    assert torch.allclose(base, policy.logits(pre[batch.ops], noisy, batch.masks))


def test_lookahead_labels_are_the_fastest_branch_or_the_policy_own(items) -> None:
    """A label differs from the policy's own device only where the simulator prices that branch
    faster by more than the margin; the fastest branch becomes the item's target."""
    item = make_item(get_graph("random-sp-100-s0"), get_cluster("v100-nvlink-4"))
    policy = StepPolicy(**SMALL)
    with torch.no_grad():
        pre = policy.embed(item.observation)
    rng = np.random.default_rng(0)
    kept = lookahead_batch(policy, item, pre, 40, 10.0, rng)  # no branch is 10x faster
    assert kept.own is not None and torch.equal(kept.actions, kept.own)
    assert len(kept.ops) == 40 and kept.calls > 40
    item.target_return = -math.inf
    batch = lookahead_batch(policy, item, pre, 1000, 0.0, np.random.default_rng(0))
    head = policy.head_params(pre)
    episode = decode(item.sg, "greedy", head)
    assert len(batch.ops) == int((episode.masks.sum(axis=1) >= 2).sum())
    assert batch.step_times[0] == pytest.approx(
        item.prepared.evaluate_batch(episode.placement[None, :]).step_time[0]
    )
    changed = batch.actions != batch.own
    assert changed.any()  # some one-op change helps a random head
    assert np.isfinite(item.target_return)  # the fastest branch is the new target
    fastest = item.prepared.evaluate_batch(item.target[None, :]).step_time[0]
    assert fastest <= batch.step_times[0]


def test_lookahead_training_runs_and_counts_calls(items) -> None:
    config = StepTrainConfig(
        updates=2,
        imitation_updates=1,
        samples_per_graph=2,
        algorithm="lookahead",
        lookahead_steps=8,
        eval_every=10,
        policy=SMALL,
        threads=1,
    )
    _, rows = train(items, [], config)
    assert any("lookahead/changed" in r for r in rows)
    calls = [r["calls"] for r in rows]
    assert calls[0] == 2 * len(items) and calls[-1] > calls[1] > calls[0]


def test_search_batch_improves_the_target_and_labels_its_trajectory() -> None:
    """Expert iteration's batch: the decoder search from the policy's greedy placement finds a
    faster placement than the best heuristic's (on this graph, within 64 calls); it becomes the
    target, its step time the batch's, and the batch holds the target's own trajectory."""
    item = make_item(get_graph("random-sp-100-s1"), get_cluster("v100-nvlink-4"))
    policy = StepPolicy(**SMALL)
    with torch.no_grad():
        pre = policy.embed(item.observation)
    batch = search_batch(policy, item, pre, 1, 64, np.random.default_rng(0))
    assert 0 < batch.calls <= 64
    assert item.target_return > 0 and not np.array_equal(item.target, item.sg.anchor)
    priced = item.prepared.evaluate_batch(item.target[None, :]).step_time[0]
    assert batch.step_times[0] == pytest.approx(priced)
    assert item.target_return == pytest.approx(math.log(item.reference_time / priced))
    own = decode(item.sg, "given", given=item.target)
    choice = own.masks.sum(axis=1) >= 2
    first = int(choice.sum())
    assert torch.equal(batch.ops[:first], torch.from_numpy(own.ops[choice]))
    assert torch.equal(batch.actions[:first], torch.from_numpy(own.actions[choice]))
    target, target_return = item.target.copy(), item.target_return
    item.target_return = math.inf  # nothing beats it: the target stays
    search_batch(policy, item, pre, 0, 16, np.random.default_rng(1))
    assert np.array_equal(item.target, target)
    item.target_return = target_return


def test_canonical_target_numbers_interchangeable_devices_by_first_use() -> None:
    """On a cluster whose devices are interchangeable (v100-pcie-4), a target is renumbered so
    that the decoder meets its devices in the order 0, 1, 2, ..., the anchor with it, and both
    keep their step times; on the DGX-1 quad (v100-nvlink-4: one or two NVLinks a pair) the same
    renumbering changes the step time, so nothing is renumbered."""
    graph = get_graph("random-sp-100-s1")
    for preset, renumbered in (("v100-pcie-4", True), ("v100-nvlink-4", False)):
        item = make_item(graph, get_cluster(preset))
        order = decode(item.sg, "anchor").ops
        spread = np.random.default_rng(0).integers(0, 4, graph.num_ops)  # transfers on every link
        spread = first_use_labels(item.sg, spread)[spread]  # used in the order 0, 1, 2, 3
        item.target = np.array([3, 2, 1, 0])[spread]
        before_target, before_anchor = item.target.copy(), item.sg.anchor.copy()
        assert (first_use_labels(item.sg, item.target) != np.arange(4)).any()
        assert canonical_target(item) is renumbered
        if not renumbered:
            assert np.array_equal(item.target, before_target)
            assert np.array_equal(item.sg.anchor, before_anchor)
            continue
        used = list(dict.fromkeys(item.target[order].tolist()))
        assert used == sorted(used) == list(range(len(used)))
        times = item.prepared.evaluate_batch(
            np.stack([before_target, item.target, before_anchor, item.sg.anchor])
        ).step_time
        assert times[0] == pytest.approx(times[1]) and times[2] == pytest.approx(times[3])
        assert (item.sg.arrays[13] == item.sg.anchor).all()  # the decoder reads the new anchor
        assert canonical_target(item) is False  # already canonical


def test_search_training_makes_greedy_decode_what_the_search_found() -> None:
    """Trained on one graph by expert iteration, with the ops' position features, the greedy
    decode is the search's placement."""
    item = make_item(get_graph("random-sp-100-s1"), get_cluster("v100-nvlink-4"))
    config = StepTrainConfig(
        updates=3,
        imitation_updates=0,
        graphs_per_update=1,
        samples_per_graph=1,
        epochs=300,
        minibatches=1,
        learning_rate=1e-2,
        algorithm="search",
        search_calls=48,
        eval_every=100,
        policy=dict(SMALL, positions=12),
        threads=1,
    )
    policy, rows = train([item], [], config)
    assert rows[-1]["calls"] <= 3 * 48 and rows[-1]["search/matched"] == 1.0
    greedy = float(greedy_speedups(policy, [item])[0])
    assert greedy == pytest.approx(math.exp(item.target_return)) and greedy > 1.0


def test_shipped_step_configs_load() -> None:
    from pathlib import Path

    import graphopt
    from graphopt.train.step_run import load_step_config

    shipped = sorted((Path(graphopt.__file__).parent / "configs").glob("stepwise*.yaml"))
    assert len(shipped) >= 3
    algorithms = {load_step_config(path).train.algorithm for path in shipped}
    assert algorithms == {"ppo", "lookahead", "search"}


def test_the_command_line_bound_is_the_config_bound() -> None:
    from graphopt.cli import stepwise as cli
    from graphopt.train import stepwise as lib

    assert cli.MAX_COUNT == lib.MAX_COUNT
