"""``graphopt eval RUN --workers N``: one Ray task per graph, each loading the run's model itself;
the table and the anytime curves of the serial evaluation, wall-clock columns excepted."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from ray_testing import local_ray
from tiny_runs import tiny_config

from graphopt.cli import main
from graphopt.train.trainer import train

torch.set_num_threads(1)  # the workers' setting: the same arithmetic in both processes

GRAPHS = "txl-tiny,random-sp-100-s0,wavenet-tiny"
"""Three graphs within the tiny run's 227 op slots."""


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    yield from local_ray()


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train(tiny_config(), runs_root=tmp_path_factory.mktemp("runs"), show_progress=False)


def _rows(path: Path, drop: tuple[str, ...]) -> list[dict[str, str]]:
    with path.open() as f:
        return [{k: v for k, v in r.items() if k not in drop} for r in csv.DictReader(f)]


def test_two_workers_give_the_serial_table(ray_cluster: Any, run: Path, tmp_path: Path):
    args = ["eval", str(run), "--graphs", GRAPHS, "--mode", "sample:4", "--budget", "4"]
    assert main([*args, "--out", str(tmp_path / "serial")]) == 0
    assert main([*args, "--workers", "2", "--out", str(tmp_path / "ray")]) == 0
    serial = _rows(tmp_path / "serial" / "results.csv", ("wall_seconds",))
    assert _rows(tmp_path / "ray" / "results.csv", ("wall_seconds",)) == serial
    assert list(dict.fromkeys(r["graph"] for r in serial)) == GRAPHS.split(",")
    assert any(r["method"] == "policy (sample:4)" for r in serial)


def test_two_workers_give_the_serial_curves(ray_cluster: Any, run: Path, tmp_path: Path):
    args = ["eval", str(run), "--graphs", GRAPHS, "--curve", "--curve-calls", "0,4"]
    args += ["--curve-seconds", "0.01", "--finetune-max", "4"]
    assert main([*args, "--out", str(tmp_path / "serial")]) == 0
    assert main([*args, "--workers", "2", "--out", str(tmp_path / "ray")]) == 0

    def calls_axis(path: Path) -> list[dict[str, str]]:  # seconds: measured, so not compared
        return [r for r in _rows(path, ("seconds",)) if r["axis"] == "calls"]

    serial = calls_axis(tmp_path / "serial" / "curves.csv")
    assert calls_axis(tmp_path / "ray" / "curves.csv") == serial
    assert {"greedy", "sample", "finetune", "plan"} <= {r["method"] for r in serial}


def test_workers_below_one_is_a_one_line_error(tmp_path: Path, capsys):
    for extra in ([], ["--curve"]):
        argv = ["eval", str(tmp_path), "--graphs", "txl-tiny", "--workers", "0", *extra]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err == "graphopt: error: --workers must be >= 1, got 0\n"


def test_cuda_with_workers_is_a_one_line_error(tmp_path: Path, capsys):
    from ray_testing import need_ray

    need_ray()
    argv = ["eval", str(tmp_path), "--graphs", "txl-tiny", "--workers", "2", "--device", "cuda"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("graphopt: error: --device cuda with --workers/--ray-address: ")
    assert err.endswith("use --device cpu, or run on the GPU without --workers\n")
    assert err.count("\n") == 1
