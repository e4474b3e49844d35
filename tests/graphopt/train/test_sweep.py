"""Sweeps: settings x seeds as normal runs, a summary per setting, failures kept, resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from tiny_runs import tiny_config

from graphopt import rundir
from graphopt.train.sweep import (
    SUMMARY_CSV,
    SUMMARY_PNG,
    SweepInterrupted,
    parse_sets,
    plan_trials,
    summarize,
    sweep,
)
from graphopt.train.trainer import train

torch.set_num_threads(1)


def test_parse_sets_reads_yaml_values_and_names_valid_keys():
    assert parse_sets(["learning_rate=1e-4,3e-4", "n_epochs=1"]) == {
        "learning_rate": [1e-4, 3e-4],
        "n_epochs": [1],
    }
    with pytest.raises(
        ValueError, match=r"^sets 'lr' is not a config key; valid keys: .*learning_rate"
    ):
        parse_sets(["lr=1e-4"])
    with pytest.raises(ValueError, match="use seeds for seeds"):
        parse_sets(["seed=1,2"])
    with pytest.raises(ValueError, match="config key 'n_epochs' must be an integer"):
        parse_sets(["n_epochs=1.5"])
    with pytest.raises(ValueError, match="is not KEY=VALUE"):
        parse_sets(["learning_rate"])


def test_plan_crosses_settings_with_seeds():
    plan = plan_trials({"a": [1, 2], "b": ["x"]}, seeds=2, base_seed=5)
    assert [(t["setting"], t["seed"]) for t in plan] == [
        ({"a": 1, "b": "x"}, 5),
        ({"a": 1, "b": "x"}, 6),
        ({"a": 2, "b": "x"}, 5),
        ({"a": 2, "b": "x"}, 6),
    ]


@pytest.mark.parametrize(
    ("sets", "seeds", "match"),
    [
        ({}, 0, r"^seeds must be an integer in 1\.\.1000, got 0$"),
        ({}, 10**9, r"^seeds must be an integer in 1\.\.1000, got 1000000000$"),
        ({}, 2.0, r"^seeds must be an integer in 1\.\.1000, got 2\.0$"),
        (
            {"a": list(range(200)), "b": list(range(100))},
            1,
            r"20,000 trials; at most 10,000: give fewer values of sets or fewer seeds",
        ),
    ],
)
def test_plan_is_bounded_before_any_trial_is_listed(sets, seeds, match):
    with pytest.raises(ValueError, match=match):
        plan_trials(sets, seeds=seeds, base_seed=0)


def test_the_command_s_bound_is_the_library_s():
    from graphopt.cli import sweep as sweep_cli
    from graphopt.train import sweep as sweep_lib

    assert (
        sweep_cli.MAX_SEEDS == sweep_lib.MAX_SEEDS and sweep_lib.MAX_SEEDS <= sweep_lib.MAX_TRIALS
    )


def test_the_summary_table_and_plot_appear_together(tmp_path: Path):
    from graphopt.train.sweep import SUMMARY_CSV, SUMMARY_PNG, _write_summary

    trials = [{"setting": {"a": 1}, "seed": 0, "status": "finished", "val_speedup": 1.2}]
    _write_summary(tmp_path, trials)
    assert (tmp_path / SUMMARY_PNG).read_bytes().startswith(b"\x89PNG")
    (tmp_path / SUMMARY_CSV).write_text("old")
    (tmp_path / SUMMARY_PNG).unlink()
    (tmp_path / SUMMARY_PNG).mkdir()  # the plot cannot be put in place: the table is kept too
    with pytest.raises(ValueError, match=SUMMARY_PNG):
        _write_summary(tmp_path, trials)
    assert (tmp_path / SUMMARY_CSV).read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == [SUMMARY_CSV, SUMMARY_PNG]


def test_summary_mean_and_spread_over_finished_seeds():
    trials = [
        {"setting": {"a": 1}, "status": "finished", "val_speedup": 1.0},
        {"setting": {"a": 1}, "status": "finished", "val_speedup": 3.0},
        {"setting": {"a": 1}, "status": "failed", "val_speedup": None},
    ]
    (row,) = summarize(trials)
    assert row == {
        "setting": "a=1",
        "finished": "2/3",
        "mean": 2.0,
        "std": 2**0.5,
        "min": 1.0,
        "max": 3.0,
    }


def test_sweep_trials_are_the_serial_runs(tmp_path: Path):
    """2 settings x 2 seeds of the tiny run: each trial has the figures of the run ``graphopt
    train`` makes alone with the same setting and seed."""
    config = tiny_config(total_timesteps=16, eval_every=16, checkpoint_every=16)
    sweep_dir, trials, rows = sweep(
        config, {"learning_rate": [1e-4, 3e-4]}, seeds=2, runs_root=tmp_path / "runs"
    )
    assert [t["status"] for t in trials] == ["finished"] * 4
    assert (sweep_dir / SUMMARY_CSV).is_file() and (sweep_dir / SUMMARY_PNG).is_file()
    assert [r["finished"] for r in rows] == ["2/2", "2/2"]
    # a trial is the run `graphopt train` makes with its setting and seed
    t = trials[3]
    alone = train(
        tiny_config(
            total_timesteps=16, eval_every=16, checkpoint_every=16, learning_rate=3e-4, seed=1
        ),
        runs_root=tmp_path / "alone",
        show_progress=False,
    )
    assert t["setting"] == {"learning_rate": 3e-4} and t["seed"] == 1
    a = torch.load(alone / rundir.FINAL, weights_only=True)["policy"]
    b = torch.load(Path(t["run"]) / rundir.FINAL, weights_only=True)["policy"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert t["val_speedup"] == rundir.read_state(alone)["last_val_speedup"]


def test_a_failed_trial_is_kept_and_resume_reruns_only_it(tmp_path: Path, monkeypatch):
    from graphopt.train import trainer

    real_train = trainer.train

    def failing(config, **kwargs):  # a trial that fails once started (a worker lost, a bug)
        if config.learning_rate == 1e-4:
            raise RuntimeError("the trial broke")
        return real_train(config, **kwargs)

    monkeypatch.setattr(trainer, "train", failing)
    config = tiny_config(total_timesteps=16, eval_every=16, checkpoint_every=16)
    sweep_dir, trials, rows = sweep(
        config, {"learning_rate": [3e-4, 1e-4]}, seeds=1, runs_root=tmp_path
    )
    assert [t["status"] for t in trials] == ["finished", "failed"]
    assert "RuntimeError: the trial broke" in trials[1]["error"]
    assert [r["finished"] for r in rows] == ["1/1", "0/1"]
    finished_run = trials[0]["run"]
    monkeypatch.setattr(trainer, "train", real_train)  # fixed
    _, trials, rows = sweep(resume=sweep_dir)
    assert [t["status"] for t in trials] == ["finished", "finished"]
    assert trials[0]["run"] == finished_run  # kept, not trained again
    assert [r["finished"] for r in rows] == ["1/1", "1/1"]


def test_a_trial_train_would_refuse_stops_the_sweep_before_any_work(tmp_path: Path):
    config = tiny_config(total_timesteps=16, eval_every=16, checkpoint_every=16)
    with pytest.raises(
        ValueError,
        match=r"^sweep trial graphs=no-such-graph \(seed 0\) would fail: .*no-such-graph",
    ):
        sweep(config, {"graphs": ["txl-tiny", "no-such-graph"]}, seeds=1, runs_root=tmp_path)
    with pytest.raises(ValueError, match=r"sweep trial max_ops=8 .*max_ops"):
        sweep(config, {"max_ops": [8]}, seeds=1, runs_root=tmp_path)  # txl-tiny has more ops
    with pytest.raises(ValueError, match=r"sweep trial cluster=v100x3 .*unknown cluster"):
        sweep(config, {"cluster": ["v100x3"]}, seeds=1, runs_root=tmp_path)
    assert not list(tmp_path.iterdir())  # no sweep directory, no trial started
    # a resumed sweep is checked again (its sweep.json edited, a graph file gone since)
    sweep_dir = tmp_path / "sweep" / "s_1"
    sweep_dir.mkdir(parents=True)
    plan = {
        "base": config.to_dict(),
        "runs_root": str(tmp_path),
        "trials": [{"setting": {"graphs": "gone.json"}, "seed": 0, "name": "s_1-t0"}],
    }
    (sweep_dir / "sweep.json").write_text(json.dumps(plan))
    with pytest.raises(ValueError, match=r"sweep trial graphs=gone\.json \(seed 0\) would fail"):
        sweep(resume=sweep_dir)
    assert not (tmp_path / "placement").exists()


def sigterm_at(monkeypatch, timesteps: int) -> None:
    """Send this process SIGTERM once the first trial trained ``timesteps`` (0: as it starts,
    before its training loop), as ``kill`` or a batch scheduler's preemption would."""
    import os
    import signal

    from graphopt.train import trainer

    class Killed(trainer.RunCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps == timesteps:
                os.kill(os.getpid(), signal.SIGTERM)
            return super()._on_step()

    real_train = trainer.train

    def train_killed_at_start(config, **kwargs):
        return real_train(
            config, on_start=lambda run, config: os.kill(os.getpid(), signal.SIGTERM), **kwargs
        )

    if timesteps:
        monkeypatch.setattr(trainer, "RunCallback", Killed)
    else:
        monkeypatch.setattr(trainer, "train", train_killed_at_start)


@pytest.mark.parametrize("timesteps", [8, 0], ids=["while-training", "as-a-trial-starts"])
def test_sigterm_stops_the_sweep_with_every_trial_saved_and_resume_finishes_it(
    tmp_path: Path, monkeypatch, timesteps
):
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals are only handled in the main thread")
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # as in a fresh process
    sigterm_at(monkeypatch, timesteps)
    config = tiny_config(total_timesteps=32, eval_every=16, checkpoint_every=16)
    with pytest.raises(SweepInterrupted, match=r"graphopt sweep --resume .*sweep/tiny_1") as e:
        sweep(config, {"learning_rate": [1e-4, 3e-4]}, seeds=1, runs_root=tmp_path)
    sweep_dir = e.value.sweep_dir
    assert [t.get("status") for t in e.value.trials] == ["interrupted", None]
    plan = json.loads((sweep_dir / "sweep.json").read_text())  # recorded, as the summary
    assert [t.get("status") for t in plan["trials"]] == ["interrupted", None]
    assert (sweep_dir / SUMMARY_CSV).is_file() and [r["finished"] for r in e.value.rows] == [
        "0/1",
        "0/1",
    ]
    (run,) = (tmp_path / "placement").iterdir()  # the second trial never started
    state = rundir.read_state(run)
    assert state["status"] == "interrupted" and state["timesteps"] < 32
    assert (run / rundir.LAST).is_file()  # checkpointed after its current step
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL

    monkeypatch.undo()
    _, trials, rows = sweep(resume=sweep_dir)
    assert [t["status"] for t in trials] == ["finished", "finished"]
    assert trials[0]["run"] == str(run)  # resumed from its checkpoint, not started again
    assert rundir.read_state(run)["timesteps"] >= 32
    assert [r["finished"] for r in rows] == ["1/1", "1/1"]


def test_on_ray_tune_the_trials_have_the_serial_figures(tmp_path: Path):
    from ray_testing import need_ray

    ray = need_ray()
    config = tiny_config(total_timesteps=16, eval_every=16, checkpoint_every=16)
    sets = {"learning_rate": [1e-4, 3e-4]}
    _, serial, _ = sweep(config, sets, seeds=1, runs_root=tmp_path / "serial")
    from graphopt.distributed import keep_sigterm

    with keep_sigterm():  # later tests in this process expect SIGTERM's default action
        ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING", address="local")
    try:
        sweep_dir, tuned, rows = sweep(
            config, sets, seeds=1, runs_root=tmp_path / "tune", workers=2
        )
    finally:
        ray.shutdown()
    assert [t["status"] for t in tuned] == ["finished"] * 2
    assert [t["val_speedup"] for t in tuned] == [t["val_speedup"] for t in serial]
    assert all(Path(t["run"]).is_relative_to(tmp_path / "tune") for t in tuned)
    assert (sweep_dir / SUMMARY_PNG).is_file()
