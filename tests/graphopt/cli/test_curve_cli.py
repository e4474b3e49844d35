"""``graphopt baselines --curve`` and ``graphopt eval RUN --curve``: the files, and bad budgets
refused in one line before any work."""

from __future__ import annotations

import csv

import pytest
import torch
from tiny_runs import tiny_config

from graphopt import rundir


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--curve-calls", "0,16,lots", "--curve-calls budget 'lots' is not an integer"),
        ("--curve-seconds", "-1", "--curve-seconds budget '-1' is not a positive number"),
        ("--finetune-max", "-2", "--finetune-max must be >= 0, got -2"),
    ],
)
def test_bad_curve_budgets_are_one_line_errors(run_cli, tmp_path, flag, value, message) -> None:
    run = rundir.new_run_dir(tmp_path / "runs", "placement", "c")
    tiny_config().save(run / rundir.CONFIG_FILE)
    proc = run_cli(
        "eval", str(run), "--graphs", "txl-tiny", "--curve", f"{flag}={value}", check=False
    )
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (run / "eval").exists()


def test_baselines_curve_writes_every_method_at_every_budget(run_cli, tmp_path) -> None:
    out = tmp_path / "curves"
    run_cli(
        "baselines",
        "txl-tiny",
        "--task",
        "scheduling",
        "--cluster",
        "v100-nvlink-2",
        "--curve",
        str(out),
        "--curve-calls",
        "0,8",
        "--curve-seconds",
        "0.05",
    )
    rows = list(csv.DictReader((out / "curves.csv").open()))
    got = {(r["method"], r["axis"], float(r["budget"])) for r in rows}
    for method in ("best heuristic", "random-search", "annealing"):
        assert {(method, "calls", 0.0), (method, "calls", 8.0), (method, "seconds", 0.05)} <= got
    assert (out / "curves.png").exists() and (out / "curves.json").exists()


def test_baselines_curve_refuses_a_bad_budget(run_cli, tmp_path) -> None:
    out = tmp_path / "curves"
    proc = run_cli(
        "baselines", "txl-tiny", "--curve", str(out), "--curve-calls", "16,-4", check=False
    )
    assert proc.returncode == 2 and "--curve-calls budget '-4'" in proc.stderr
    assert not out.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
def test_train_and_eval_refuse_cuda_without_a_gpu(run_cli, tmp_path) -> None:
    runs = tmp_path / "runs"
    proc = run_cli(
        "train",
        "--task",
        "placement",
        "--graphs",
        "txl-tiny",
        "--total-timesteps",
        "16",
        "--runs-dir",
        str(runs),
        "--device",
        "cuda",
        "--no-progress",
        check=False,
    )
    assert (
        proc.returncode == 2 and "--device cuda:" in proc.stderr and "--device cpu" in proc.stderr
    )
    assert len(proc.stderr.strip().splitlines()) == 1 and not runs.exists()
    bad = run_cli("train", "--device", "tpu", "--runs-dir", str(runs), check=False)
    assert bad.returncode == 2 and "device 'tpu' is unknown" in bad.stderr
