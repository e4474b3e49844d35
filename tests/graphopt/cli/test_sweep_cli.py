"""``graphopt sweep``: a table per setting, one-line errors for bad input."""

from __future__ import annotations

from pathlib import Path

import yaml
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


def test_sweep_of_two_settings_prints_the_summary(tmp_path: Path, run_cli):
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
