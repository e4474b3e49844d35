"""The one-pass decoder policy's training with many samples per graph (Jeon et al.)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphopt.hardware import get_cluster
from graphopt.train.one_pass import (
    OnePassConfig,
    Samples,
    distribution,
    draw,
    group_advantages,
    load_checkpoint,
    make_item,
    make_policy,
    outputs,
    train,
    update,
)
from graphopt.train.shared_baseline import INVALID_LOG_REWARD
from graphopt.workloads import get_graph

SMALL = dict(hidden=16, sage_layers=1, attn_layers=1, segment_len=32, mem_len=32)


@pytest.fixture(scope="module")
def items():
    torch.set_num_threads(1)
    cluster = get_cluster("v100-nvlink-4")
    return [make_item(get_graph(n), cluster) for n in ("txl-tiny", "random-sp-100-s0")]


def _samples(item, actions: torch.Tensor, ratios: list[float], valid=None) -> Samples:
    k = len(actions)
    step_times = np.asarray(ratios) * item.reference_time
    valid = np.ones(k, bool) if valid is None else np.asarray(valid)
    placements = np.tile(item.reference, (k, 1))
    return Samples(item, actions, torch.zeros(k), step_times, valid, placements)


def test_advantages_are_standardised_within_each_graph(items) -> None:
    """Each graph's returns are standardised among its own samples: a graph whose samples differ
    by 0.1% weighs as much as one whose samples differ by a factor of 4."""
    a, b = items
    zeros = torch.zeros((3, 1, 1))
    wide = _samples(a, zeros, [1.0, 2.0, 4.0])
    narrow = _samples(b, zeros, [1.000, 1.001, 1.002])
    invalid = _samples(a, zeros, [1.0, 1.0, 1.0], valid=[True, True, False])
    advs = group_advantages([wide, narrow, invalid], 1e-6)
    for adv in advs:
        assert adv.mean() == pytest.approx(0.0, abs=1e-9)
        assert adv.std() == pytest.approx(1.0)
    assert advs[0][0] > advs[0][1] > advs[0][2]  # faster samples first
    assert advs[1][0] > advs[1][1] > advs[1][2]
    assert invalid.returns()[2] == INVALID_LOG_REWARD and advs[2][2] < 0 < advs[2][0]
    # one graph's scale does not leak into another's: the same ranks, the same advantages
    assert advs[0] == pytest.approx(group_advantages([narrow], 1e-6)[0], abs=0.2)


def test_an_update_moves_the_policy_towards_the_better_sample(items) -> None:
    """Two samples of one graph, one faster than the other: after one REINFORCE update the mean
    action moves towards the faster one and its log-probability rises against the slower's."""
    torch.manual_seed(0)
    item = items[0]
    policy = make_policy(4, item.graph.num_ops, **SMALL)
    with torch.no_grad():
        mean = outputs(policy, item)
        direction = torch.randn(mean.shape) * policy.channel_log_std().exp()[:, None]
    actions = torch.stack([mean + direction, mean - direction])
    batch = _samples(item, actions, [0.9, 1.1])  # the first is faster
    with torch.no_grad():
        batch.old_logp = distribution(policy, mean, 2).log_prob(actions.reshape(2, -1))
    optimizer = torch.optim.SGD(policy.parameters(), lr=1e-3)
    figures = update(policy, optimizer, [batch], OnePassConfig())
    assert figures["pg/clip_fraction"] == 0.0  # one gradient step: the ratio is exactly 1
    with torch.no_grad():
        moved = outputs(policy, item)
        logp = distribution(policy, moved, 2).log_prob(actions.reshape(2, -1))
    assert float(((moved - mean) * direction).sum()) > 0
    assert float(logp[0] - logp[1]) > float(batch.old_logp[0] - batch.old_logp[1])


def test_draw_prices_every_sample_and_greedy_starts_at_the_reference(items) -> None:
    """At initialisation the mean action keeps every op on the best heuristic's device; samples
    are decoded, priced in one batch and reproducible from the generator's seed."""
    torch.manual_seed(0)
    item = items[1]
    policy = make_policy(4, item.graph.num_ops, **SMALL)
    one = draw(policy, item, 5, torch.Generator().manual_seed(3))
    two = draw(policy, item, 5, torch.Generator().manual_seed(3))
    assert one.placements.shape == (5, item.graph.num_ops) and one.valid.all()
    assert np.array_equal(one.placements, two.placements)
    assert torch.equal(one.old_logp, two.old_logp)
    assert one.actions.shape == (5, 6, item.graph.num_ops)  # shift, gate, 4 affinities


def test_train_writes_checkpoints_that_load_with_weights_only(items, tmp_path) -> None:
    config = OnePassConfig(
        updates=2, graphs_per_update=2, samples_per_graph=3, eval_every=1, policy=SMALL
    )
    config.decoder = "heft"  # the decoder settings travel with the checkpoint
    policy, rows = train(items, items[:1], config, out_dir=tmp_path)
    vals = [r["val/speedup"] for r in rows if "val/speedup" in r]
    assert vals == [1.0, 1.0, 1.0]  # greedy (the mean action) is the best heuristic at first
    assert sum("train/speedup" in r for r in rows) == 2
    for name in ("policy.pt", "best.pt"):
        loaded, settings = load_checkpoint(tmp_path / name)
        assert settings == config.settings()
        with torch.no_grad():
            assert torch.equal(outputs(loaded, items[0]), outputs(policy, items[0]))
    (tmp_path / "other.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="not a one-pass decoder policy checkpoint"):
        load_checkpoint(tmp_path / "other.pt")


@pytest.mark.parametrize(
    "field, value, match",
    [
        ("samples_per_graph", 0, "samples_per_graph must be an integer in 1"),
        ("updates", True, "updates must be an integer"),
        ("learning_rate", 0.0, "learning_rate must be a finite number > 0"),
        ("decoder", "etf", "unknown decoder 'etf'"),
        ("anchor", "yes", "anchor must be true or false"),
        ("max_seconds", -1.0, "max_seconds must be a finite number >= 0"),
    ],
)
def test_bad_configs_name_the_field(field, value, match) -> None:
    with pytest.raises(ValueError, match=match):
        OnePassConfig(**{field: value}).validate()


@pytest.mark.expensive  # a subprocess per verb; the validation graphs' references (about 1 min)
def test_bench_script_trains_and_evaluates_in_a_subprocess(tmp_path) -> None:
    """bench/bench_decoder_samples.py with a tiny budget: train writes a run from the shipped
    config, eval prints the table of its checkpoint."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    script = str(root / "bench" / "bench_decoder_samples.py")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    config = str(root / "graphopt" / "configs" / "decoder-samples.yaml")
    train_args = ["train", "--config", config, "--graphs", "random-sp-100-s0", "--updates", "1"]
    done = subprocess.run(
        [sys.executable, script, *train_args, "--runs-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
    )
    assert done.returncode == 0, done.stderr
    run = tmp_path / "placement-one-pass" / "decoder-samples_1"
    assert (run / "best.pt").exists() and (run / "config.yaml").exists()
    done = subprocess.run(
        [
            sys.executable,
            script,
            "eval",
            str(run),
            "--graphs",
            "txl-tiny",
            "--methods",
            "greedy,sample:2",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
    )
    assert done.returncode == 0, done.stderr
    assert "| geometric mean | | | | 1.000x |" in done.stdout
