"""``graphopt sweep``: a table per setting, one-line errors for bad input."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import ROOT
from tiny_runs import TINY

from graphopt.cli import main


def test_a_bad_set_key_is_one_line_listing_the_keys(tmp_path: Path, capsys):
    assert main(["sweep", "--set", "lr=1e-4,3e-4", "--runs-dir", str(tmp_path)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("graphopt: error: --set 'lr' is not a config key; valid keys: ")
    assert "learning_rate" in line and not list(tmp_path.iterdir())


def test_a_trial_train_would_refuse_is_one_line_before_any_trial(tmp_path: Path, capsys):
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump({**TINY, "total_timesteps": 16}))
    args = ["sweep", str(config), "--set", "graphs=txl-tiny,no-such-graph", "--seeds", "1"]
    assert main([*args, "--runs-dir", str(tmp_path / "runs")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(
        "graphopt: error: sweep trial graphs=no-such-graph (seed 0) would fail: "
    )
    assert "no-such-graph" in line[60:] and not (tmp_path / "runs").exists()


def test_sweep_of_two_settings_prints_the_summary(tmp_path: Path, run_cli_here):
    run_cli = run_cli_here  # in this process (torch is loaded); CI runs the next in a subprocess
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump({**TINY, "total_timesteps": 16}))
    out = run_cli(
        "sweep",
        str(config),
        "--set",
        "learning_rate=1e-4,3e-4",
        "--seeds",
        "1",
        "--runs-dir",
        str(tmp_path / "runs"),
    ).stdout
    assert "learning_rate=0.0001" in out and "learning_rate=0.0003" in out and "1/1" in out
    assert len(list((tmp_path / "runs" / "placement").iterdir())) == 2
    assert list((tmp_path / "runs" / "sweep").glob("tiny_1/summary.png"))


@pytest.mark.expensive  # end to end: tests/graphopt/train/test_sweep.py sends SIGTERM in-process
def test_sigterm_stops_the_sweep_after_the_current_step_with_exit_130(tmp_path: Path):
    config = tmp_path / "long.yaml"
    config.write_text(yaml.safe_dump({**TINY, "total_timesteps": 4096}))
    runs = tmp_path / "runs"
    proc = subprocess.Popen(
        [sys.executable, "-m", "graphopt", "sweep", str(config), "--set"]
        + ["learning_rate=1e-4,3e-4", "--seeds", "1", "--runs-dir", str(runs)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    last = runs / "placement" / "tiny_1-t0_1" / "checkpoints" / "last.pt"
    deadline = time.time() + 240
    while not last.exists():
        assert proc.poll() is None and time.time() < deadline, proc.communicate()
        time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)  # kill, a batch scheduler's preemption
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (out, err)
    sweep_dir = runs / "sweep" / "tiny_1"
    assert f"graphopt: sweep interrupted; continue with: graphopt sweep --resume {sweep_dir}" in out
    assert "Traceback" not in err
    assert [p.name for p in (runs / "placement").iterdir()] == ["tiny_1-t0_1"]  # no next trial
    state = json.loads((last.parents[1] / "state.json").read_text())
    assert state["status"] == "interrupted" and 0 < state["timesteps"] < 4096
    plan = json.loads((sweep_dir / "sweep.json").read_text())
    assert [t.get("status") for t in plan["trials"]] == ["interrupted", None]
