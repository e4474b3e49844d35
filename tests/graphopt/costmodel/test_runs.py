"""Cost-model runs: what a run directory holds, Ctrl-C, bad input, and scoring a run."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from graphopt import rundir
from graphopt.costmodel import runs
from graphopt.costmodel.data import generate, load_dataset
from graphopt.costmodel.fit import feature_layout, load_checkpoint
from graphopt.costmodel.learned import EXPECTED_FEATURES
from graphopt.hardware import get_cluster
from graphopt.workloads import resolve_graphs

TINY = {"epochs": 2, "batch_size": 8, "hidden": 8, "layers": 1}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("data") / "ds"
    generate(
        resolve_graphs("rnnlm-tiny"), get_cluster("v100-nvlink-2"), out, samples=24, progress=False
    )
    return out


def test_train_run_writes_a_complete_run(dataset: Path, tmp_path: Path) -> None:
    seen: list[float] = []
    run = runs.train_run(
        dataset, name="t", runs_root=tmp_path, on_epoch=lambda r: seen.append(r["epoch"]), **TINY
    )
    assert run == tmp_path / "costmodel" / "t_1" and seen == [1.0, 2.0]
    assert sorted(p.name for p in run.iterdir()) == sorted(
        ["config.yaml", "state.json", "metrics.csv", "model.pt", "test_metrics.json"]
    )
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert config["split"] == {"test_fraction": 0.2, "val_fraction": 0.1, "seed": 0}
    assert config["loss"] == "listmle"
    assert config["dataset"] == {
        "graphs": 1,
        "train_configs": 16,
        "val_configs": 3,
        "test_configs": 5,
    }
    assert config["net"]["hidden"] == 8 and config["features"]["kind"] == "graphopt"
    state = json.loads((run / "state.json").read_text())
    assert state["status"] == "finished" and state["epochs"] == 2
    with (run / "metrics.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["epoch"] for r in rows] == ["1.0", "2.0"]
    assert {"train/loss", "val/kendall_tau", "val/top5_error", "time"} <= set(rows[0])
    test = json.loads((run / "test_metrics.json").read_text())
    assert test["best_epoch"] == state["best_epoch"] and -1 <= test["kendall_tau"] <= 1
    assert test["scored_on"] == "test" and test["num_groups"] == 1
    net, ckpt = load_checkpoint(run / "model.pt", expect=EXPECTED_FEATURES)
    assert ckpt["epoch"] == state["best_epoch"] and net.layout.hidden == 8
    # a second run with the same name gets the next number; a given val set is recorded as such
    again = runs.train_run(
        dataset,
        val_data=dataset,
        name="t",
        runs_root=tmp_path,
        epochs=1,
        batch_size=8,
        hidden=8,
        layers=1,
    )
    assert again.name == "t_2"
    assert yaml.safe_load((again / "config.yaml").read_text())["split"] == {
        "val_data": str(dataset),
        "test_data": None,
    }
    scored = json.loads((again / "test_metrics.json").read_text())
    with (again / "metrics.csv").open() as f:
        best_tau = max(float(r["val/kendall_tau"]) for r in csv.DictReader(f))
    assert scored["scored_on"] == "val"  # no test set: the validation set, which picked the epoch
    assert scored["kendall_tau"] == pytest.approx(best_tau)


def test_ctrl_c_keeps_the_best_model_so_far(dataset: Path, tmp_path: Path) -> None:
    def stop(row: dict[str, float]) -> None:
        if row["epoch"] == 2:
            raise KeyboardInterrupt

    with pytest.raises(runs.CostModelInterrupted, match="after 2 epoch") as info:
        runs.train_run(
            dataset, name="i", runs_root=tmp_path, on_epoch=stop, **{**TINY, "epochs": 5}
        )
    run = info.value.run
    state = json.loads((run / "state.json").read_text())
    assert state["status"] == "interrupted" and state["epochs"] == 2
    load_checkpoint(run / "model.pt")  # complete and readable
    assert not (run / "test_metrics.json").exists()
    assert not [p for p in run.iterdir() if ".tmp" in p.name]
    assert len((run / "metrics.csv").read_text().splitlines()) == 3  # header + 2 epochs


def test_a_run_stopped_while_set_up_is_removed(dataset: Path, tmp_path: Path, monkeypatch) -> None:
    """#40: Ctrl-C or SIGTERM before the first epoch's bookkeeping began left a run with a
    config, a "running" state and nothing else."""

    def stop(run: Path, **fields: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(runs.rundir, "write_state", stop)
    with pytest.raises(KeyboardInterrupt):
        runs.train_run(dataset, name="i", runs_root=tmp_path, **TINY)
    assert list((tmp_path / "costmodel").iterdir()) == []


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"loss": "l2"}, "unknown loss 'l2'; choose one of: 'mse'"),
        ({"epochs": 0}, r"epochs must be an integer in 1\.\.1000000, got 0"),
        ({"epochs": 10**12}, r"epochs must be an integer in 1\.\.1000000"),
        ({"epochs": True}, r"epochs must be an integer in 1\.\.1000000, got True"),
        ({"batch_size": 1}, r"batch_size must be an integer in 2\.\.4096, got 1"),
        ({"batch_size": 10**9}, r"batch_size must be an integer in 2\.\.4096"),
        ({"hidden": 10**9}, r"hidden must be an integer in 1\.\.4096"),
        ({"layers": 65}, r"layers must be an integer in 0\.\.64"),
        ({"lr": float("inf")}, r"lr must be a number in \(0, 10\], got inf"),
        ({"lr": 0.0}, r"lr must be a number in \(0, 10\]"),
        ({"time_budget": 1e12}, r"time_budget must be in \(0, 2592000\] seconds"),
        ({"time_budget": float("nan")}, r"time_budget must be in \(0, 2592000\] seconds"),
        ({"test_fraction": 1.0}, r"test_fraction must lie in \(0, 1\)"),
        ({"val_fraction": 0.0}, r"val_fraction must lie in \(0, 1\)"),
        ({"test_fraction": 0.5, "val_fraction": 0.5}, "nothing left to train on"),
        ({"test_data": "x.npz"}, "test_data needs val_data"),
        ({"name": "a b"}, "run name 'a b' may only contain"),
    ],
)
def test_bad_arguments_are_named(dataset: Path, tmp_path: Path, kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        runs.train_run(dataset, runs_root=tmp_path, **kwargs)
    assert not (tmp_path / "costmodel").exists() or not any((tmp_path / "costmodel").iterdir())


def test_bad_data_and_runs(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no such file or directory"):
        runs.train_run(tmp_path / "nope.npz", runs_root=tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no .npz files"):
        runs.train_run(tmp_path / "empty", runs_root=tmp_path)
    with pytest.raises(ValueError, match="does not exist"):
        rundir.resolve_cost_model(tmp_path / "costmodel" / "x_1")
    with pytest.raises(ValueError, match="holds no model.pt"):
        rundir.resolve_cost_model(tmp_path / "empty")


def test_evaluate_run_scores_every_configuration(dataset: Path, tmp_path: Path) -> None:
    run = runs.train_run(dataset, runs_root=tmp_path, **{**TINY, "epochs": 1})
    result = runs.evaluate_run(run, dataset)
    (row,) = result["graphs"]
    assert row["graph"] == "rnnlm-tiny" and row["configs"] == 24
    assert result["mean"]["kendall_tau"] == pytest.approx(row["kendall_tau"])
    t = result["throughput"]
    assert t["configs"] == 24 and t["model_configs_per_second"] > 0
    assert t["simulator_configs_per_second"] > 0
    assert runs.evaluate_run(run / "model.pt", dataset)["graphs"] == result["graphs"]
    # the prior alone, scored on the same decisions: its tau from the summary column itself
    from graphopt.costmodel.data import load_dataset
    from graphopt.costmodel.features import PRIOR, SUMMARY_FEATURES
    from graphopt.costmodel.metrics import ranking_report

    (s,) = load_dataset(dataset)
    column = s.configs.summary(np.arange(s.num_configs))[:, SUMMARY_FEATURES.index(PRIOR)]
    expected = ranking_report(column, s.runtime)["kendall_tau"]
    assert result["prior"]["kendall_tau"] == pytest.approx(expected)


def test_evaluate_run_refuses_another_feature_layout(dataset: Path, tmp_path: Path) -> None:
    run = runs.train_run(dataset, runs_root=tmp_path, **{**TINY, "epochs": 1})
    rng = np.random.default_rng(0)
    layout = tmp_path / "layout.npz"
    np.savez(
        layout,
        node_feat=rng.normal(size=(5, 3)).astype(np.float32),
        node_opcode=np.array([1, 2, 2, 7, 3]),
        edge_index=np.array([[1, 0], [2, 1], [3, 1], [4, 2]]),
        node_config_ids=np.array([1, 3]),
        node_config_feat=rng.normal(size=(4, 2, 2)).astype(np.float32),
        config_runtime=np.array([40, 10, 30, 20]),
    )
    assert feature_layout(load_dataset(layout))["kind"] == "tpugraphs"
    with pytest.raises(ValueError, match="trained on"):
        runs.evaluate_run(run, layout)
