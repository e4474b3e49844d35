"""``graphopt baselines --curve`` and ``graphopt eval RUN --curve``: the files, and bad budgets
refused in one line before any work."""

from __future__ import annotations

import csv
import json

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
        "--save-decisions",
        str(tmp_path / "saved"),
    )
    rows = list(csv.DictReader((out / "curves.csv").open()))
    got = {(r["method"], r["axis"], float(r["budget"])) for r in rows}
    for method in ("best heuristic", "random-search", "annealing"):
        assert {(method, "calls", 0.0), (method, "calls", 8.0), (method, "seconds", 0.05)} <= got
    assert (out / "curves.png").exists() and (out / "curves.json").exists()
    # every point's decision is saved and replays to the point's step time
    from graphopt.decisions.io import load_decision
    from graphopt.hardware import get_cluster
    from graphopt.sim import simulate
    from graphopt.workloads import get_graph

    index = json.loads((tmp_path / "saved" / "index.json").read_text())["decisions"]
    by_method = {e["method"]: e for e in index}
    assert "best heuristic" in by_method and "annealing@seconds=0.05" in by_method
    graph, cluster = get_graph("txl-tiny"), get_cluster("v100-nvlink-2")
    for r in rows:
        name = r["method"] if r["method"] == "best heuristic" else None
        name = name or f"{r['method']}@{r['axis']}={float(r['budget']):g}"
        entry = by_method[name]
        decision = load_decision(tmp_path / "saved" / entry["file"], graph)
        replay = simulate(graph, cluster, decision).step_time
        assert replay == float(r["step_time"]) == entry["step_time"], name


def test_baselines_curve_draws_the_decoder_search_for_placement(run_cli, tmp_path) -> None:
    out, saved = tmp_path / "curves", tmp_path / "saved"
    run_cli(  # txl-tiny: gnmt-tiny's placement chain takes most of a second (the max-load DP)
        "baselines", "txl-tiny", "--curve", str(out), "--curve-calls", "0,16",
        "--curve-seconds", "0.05", "--save-decisions", str(saved),
    )  # fmt: skip
    rows = list(csv.DictReader((out / "curves.csv").open()))
    got = {(r["axis"], float(r["budget"])) for r in rows if r["method"] == "decoder-search"}
    assert got == {("calls", 0.0), ("calls", 16.0), ("seconds", 0.05)}
    index = json.loads((saved / "index.json").read_text())["decisions"]
    names = {e["method"] for e in index}
    assert {"decoder-search@calls=16", "decoder-search@seconds=0.05"} <= names


def test_a_sigterm_before_curves_and_decisions_are_moved_into_place_leaves_neither(
    run_cli_here, tmp_path, monkeypatch
) -> None:
    """``--curve`` and ``--save-decisions`` are one set: a SIGTERM once the curves and the
    decisions are staged, before either is moved into place, leaves neither directory and no
    staging directory."""
    import os
    import signal

    from graphopt.file_set import FileSet

    def stopped(self):
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("not interrupted")  # pragma: no cover

    monkeypatch.setattr(FileSet, "flush", stopped)
    out, saved = tmp_path / "curves", tmp_path / "saved"
    proc = run_cli_here(
        "baselines", "txl-tiny", "--curve", str(out), "--curve-calls", "0,8",
        "--curve-seconds", "0.05", "--save-decisions", str(saved), check=False,
    )  # fmt: skip
    assert proc.returncode == 130 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_baselines_curve_refuses_a_bad_budget(run_cli, tmp_path) -> None:
    out = tmp_path / "curves"
    proc = run_cli(
        "baselines", "txl-tiny", "--curve", str(out), "--curve-calls", "16,-4", check=False
    )
    assert proc.returncode == 2 and "--curve-calls budget '-4'" in proc.stderr
    assert not out.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
def test_train_and_eval_refuse_cuda_without_a_gpu(run_cli_here, tmp_path) -> None:
    run_cli = run_cli_here  # refusals before any work: in this process
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
