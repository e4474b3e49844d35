"""``graphopt train --workers N [--ray-address ADDR]``: rollouts on Ray, and its one-line errors."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest
import yaml
from tiny_runs import TINY

from graphopt.cli import main


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_workers_without_ray_name_the_extra(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)
    assert main(["train", "--workers", "2", "--runs-dir", str(tmp_path)]) == 2
    assert "pip install 'graphopt[ray]'" in _one_error_line(capsys)
    assert not list(tmp_path.iterdir())


def test_an_unreachable_address_is_one_line_at_once(tmp_path: Path, capsys, monkeypatch):
    ray = pytest.importorskip("ray", reason="the address is checked once Ray is known to be there")
    port = _closed_port()

    def never(*args, **kwargs):  # "at once": refused before Ray's own minute of retries
        raise AssertionError("ray.init was called for an address where nothing answers")

    monkeypatch.setattr(ray, "init", never)
    code = main(["train", "--ray-address", f"127.0.0.1:{port}", "--runs-dir", str(tmp_path)])
    assert code == 2
    line = _one_error_line(capsys)
    assert line.startswith(f"graphopt: error: no Ray cluster answers at 127.0.0.1:{port}")
    assert "ray start --head" in line and not list(tmp_path.iterdir())


def test_bad_worker_counts(tmp_path: Path, capsys):
    assert main(["train", "--workers", "0", "--runs-dir", str(tmp_path)]) == 2
    assert _one_error_line(capsys) == "graphopt: error: --workers must be >= 1, got 0"


def test_train_on_two_ray_workers_then_resume_in_process(tmp_path: Path, run_cli):
    from ray_testing import need_ray

    need_ray()
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump({**TINY, "n_envs": 2}))
    runs = tmp_path / "runs"
    out = run_cli(
        "train", "--config", str(config), "--workers", "2", "--runs-dir", str(runs), "--no-progress"
    ).stdout
    assert "finished: 32 timesteps" in out
    (run,) = (runs / "placement").iterdir()
    out = run_cli(
        "train",
        "--resume",
        str(run),
        "--total-timesteps",
        "64",
        "--vec-env",
        "dummy",
        "--no-progress",
    ).stdout
    assert "finished: 64 timesteps" in out
