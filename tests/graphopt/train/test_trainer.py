"""Training runs save weights only; resume rebuilds the model from the run's config and refuses
model files that could run code (an SB3 zip, a pickled object) without opening or running them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from crafted_files import assert_payload_runs, crafted_run
from tiny_runs import tiny_config

from graphopt import rundir
from graphopt.train.trainer import load_model, resume, train

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train(tiny_config(), runs_root=tmp_path_factory.mktemp("runs"), show_progress=False)


def test_a_run_holds_weights_and_plain_data_only(trained: Path):
    for name in (rundir.BEST, rundir.FINAL, rundir.LAST):
        data = torch.load(trained / name, weights_only=True)  # plain weights files
        assert data["format"] == "graphopt-ppo-weights", name
    assert torch.load(trained / rundir.LAST, weights_only=True)["num_timesteps"] == 32
    info = json.loads((trained / rundir.MODEL_INFO).read_text())  # plain JSON
    assert info["task"] == "placement" and info["action_space"]["type"] == "MultiDiscrete"
    assert not list(trained.rglob("*.zip")) and not list(trained.rglob("*.tmp*"))


def test_load_model_rebuilds_the_trained_policy(trained: Path):
    model = load_model(trained, trained / rundir.FINAL)
    saved = torch.load(trained / rundir.FINAL, weights_only=True)["policy"]
    for key, value in model.policy.state_dict().items():
        assert torch.equal(value, saved[key]), key
    assert model.num_timesteps == 32 and model.env is None  # predicts; learns once given an env


def test_resume_goes_on_from_the_weights(trained: Path, tmp_path: Path):
    run = Path(shutil.copytree(trained, tmp_path / "run"))
    before = torch.load(run / rundir.LAST, weights_only=True)
    resume(run, total_timesteps=48, show_progress=False)
    state = rundir.read_state(run)
    assert state["status"] == "finished" and state["timesteps"] == 48
    after = torch.load(run / rundir.LAST, weights_only=True)
    assert after["num_timesteps"] == 48 and after["n_updates"] > before["n_updates"]
    assert any(not torch.equal(after["policy"][k], v) for k, v in before["policy"].items())
    assert not list(run.rglob("*.zip"))


def test_resume_refuses_a_changed_environment(trained: Path, tmp_path: Path):
    run = Path(shutil.copytree(trained, tmp_path / "run"))
    info = json.loads((run / rundir.MODEL_INFO).read_text())
    info["action_space"]["nvec"][0][0] = 3  # trained for 3 devices, the cluster has 2
    (run / rundir.MODEL_INFO).write_text(json.dumps(info))
    with pytest.raises(ValueError, match="no longer match its model"):
        resume(run, total_timesteps=48, show_progress=False)


@pytest.mark.parametrize("kind", ["zip", "pt"])
def test_resume_refuses_crafted_models_and_runs_nothing(tmp_path: Path, kind: str):
    assert_payload_runs(tmp_path / "live")  # the payloads do run when unpickled unsafely
    marker = tmp_path / "marker"
    run = crafted_run(
        tmp_path / "runs", marker, kind, "interrupted", 16, (rundir.BEST, rundir.LAST)
    )
    config, state = (run / "config.yaml").read_text(), (run / "state.json").read_text()
    expected = (
        r"holds only an SB3 \.zip model .* which can execute code when loaded; .* retrain the run"
        if kind == "zip"
        else r"last\.pt is not a plain weights file \(it holds a pickled object"
    )
    with pytest.raises(ValueError, match=expected) as e:
        resume(run, total_timesteps=64, show_progress=False)
    assert "\n" not in str(e.value) and str(run) in str(e.value)
    assert not marker.exists()
    # refused before anything was written
    assert (run / "config.yaml").read_text() == config and (run / "state.json").read_text() == state
    assert not (run / rundir.METRICS).exists()


def test_resume_is_refused_while_another_process_trains_the_run(trained: Path, tmp_path: Path):
    from run_locks import lock_held_elsewhere

    run = Path(shutil.copytree(trained, tmp_path / "run"))
    files = {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != rundir.LOCK}
    with lock_held_elsewhere(run) as holder:
        with pytest.raises(rundir.RunLocked, match=f"process {holder.pid} is training it") as e:
            resume(run, total_timesteps=48, show_progress=False)
        assert "\n" not in str(e.value) and str(run) in str(e.value)
    # refused before anything was read or written
    assert {p: p.read_bytes() for p in files} == files
    # the holder is gone (killed): its lock is stale, and resume goes on
    resume(run, total_timesteps=48, show_progress=False)
    assert rundir.read_state(run)["status"] == "finished"
    assert rundir.read_state(run)["timesteps"] == 48


def test_resume_drops_the_metrics_past_its_checkpoint(trained: Path, tmp_path: Path):
    """As after a ``kill -9``: rows were recorded past the checkpoint at 32 (and state.json lags
    behind it, killed between saving the checkpoint and recording it), and a crash's error is
    still in state.json."""
    run = Path(shutil.copytree(trained, tmp_path / "run"))
    metrics = run / rundir.METRICS
    before = metrics.read_text().splitlines()
    assert max(int(r.split(",")[0]) for r in before[1:]) == 32
    with metrics.open("a") as f:
        f.write("40,99.0,train,12345,1.0,1.0,0.01,10\n48,99.5,val,,54321,1.0,0.01,\n")
    rundir.write_state(run, status="crashed", timesteps=16, error="RuntimeError: boom")
    resumed = []
    resume(
        run,
        total_timesteps=48,
        show_progress=False,
        on_start=lambda r, config: resumed.append(
            (rundir.read_state(r)["timesteps"], config.total_timesteps)
        ),
    )
    assert resumed == [(32, 48)]  # the checkpoint's count, recorded before training went on
    rows = metrics.read_text().splitlines()
    assert rows[: len(before)] == before  # the rows up to the checkpoint are kept as they were
    assert "12345" not in metrics.read_text() and "54321" not in metrics.read_text()
    steps = [int(r.split(",")[0]) for r in rows[1:]]
    assert steps == sorted(steps) and max(steps) == 48 and 40 not in steps  # re-done once
    state = rundir.read_state(run)
    assert state["status"] == "finished" and "error" not in state and "traceback" not in state


def test_train_refuses_a_runs_root_under_a_file_before_any_work(tmp_path: Path, monkeypatch):
    import graphopt.train.trainer as trainer

    def never(*args, **kwargs):
        raise AssertionError("set-up began")

    monkeypatch.setattr(trainer, "make_envs", never)
    (tmp_path / "F").write_text("")
    with pytest.raises(ValueError, match=r"create runs directory '.*F/runs': '.*F' is a file"):
        train(tiny_config(), runs_root=tmp_path / "F" / "runs", show_progress=False)
    with pytest.raises(ValueError, match="run name 'a/b' may only contain"):
        train(tiny_config(name="a/b"), runs_root=tmp_path / "runs", show_progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["F"]


@pytest.mark.parametrize("where", ["write_model_info", "set_logger"])
def test_a_run_stopped_before_its_first_checkpoint_is_removed(
    tmp_path: Path, monkeypatch, where: str
) -> None:
    """#40: Ctrl-C or SIGTERM while the run directory was set up (before training's own stop
    handling) left a run whose state said "starting", with no checkpoint to resume from."""
    import graphopt.train.trainer as trainer

    def stop(*args, **kwargs):
        raise KeyboardInterrupt

    if where == "write_model_info":
        monkeypatch.setattr(trainer.checkpoint, "write_model_info", stop)
    else:
        monkeypatch.setattr(trainer, "RunCallback", stop)  # in _learn, before model.learn
    with pytest.raises(KeyboardInterrupt):
        train(tiny_config(), runs_root=tmp_path, show_progress=False)
    assert list((tmp_path / "placement").iterdir()) == []


def test_each_validation_is_one_metrics_row(trained: Path) -> None:
    """The last step is a validation step (32 = 2 x eval_every): the final model is not
    validated a second time."""
    import csv

    with (trained / rundir.METRICS).open() as f:
        val = [int(r["timesteps"]) for r in csv.DictReader(f) if r["kind"] == "val"]
    assert val == [16, 32]
