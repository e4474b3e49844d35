from __future__ import annotations

import pytest

from graphopt.train import rundir


def test_run_dirs_are_numbered_and_checked(tmp_path):
    a = rundir.new_run_dir(tmp_path, "placement", "go")
    b = rundir.new_run_dir(tmp_path, "placement", "go")
    assert (a.name, b.name) == ("go_1", "go_2") and (a / "checkpoints").is_dir()
    with pytest.raises(ValueError, match="may only contain"):
        rundir.new_run_dir(tmp_path, "placement", "bad name/")
    with pytest.raises(ValueError, match="does not exist"):
        rundir.check_run_dir(tmp_path / "placement" / "go_9")
    with pytest.raises(ValueError, match="is not a graphopt run"):
        rundir.check_run_dir(a)
    (a / rundir.CONFIG_FILE).write_text("task: placement\n")
    with pytest.raises(ValueError, match="holds no model yet"):
        rundir.check_run_dir(a)


def test_state_and_metrics_append(tmp_path):
    rundir.write_state(tmp_path, status="running", timesteps=5)
    rundir.write_state(tmp_path, status="interrupted")
    assert rundir.read_state(tmp_path) == {"status": "interrupted", "timesteps": 5}
    log = rundir.MetricsLog(tmp_path)
    log.write(timesteps=1, kind="train", reward_mean=0.5)
    rundir.MetricsLog(tmp_path).write(timesteps=2, kind="val")  # reopening appends
    lines = (tmp_path / rundir.METRICS).read_text().splitlines()
    assert len(lines) == 3 and lines[0].startswith("timesteps,") and lines[2].startswith("2,")
