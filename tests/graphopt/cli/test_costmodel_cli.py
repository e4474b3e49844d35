"""`graphopt costmodel dataset|train|eval` with tiny budgets, and bad input: ``dataset`` in a
subprocess, the commands that import torch through the same entry point in this process (a
subprocess would spend ~10 s importing torch again; CI runs ``eval`` in one too)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import graphopt_cli, graphopt_here

from graphopt.cli import main


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """``graphopt costmodel dataset`` in a subprocess, then ``train`` in this process: (dataset,
    run)."""
    tmp = tmp_path_factory.mktemp("cli")
    data, runs = tmp / "ds", tmp / "runs"
    dataset = "costmodel dataset --graphs rnnlm-tiny --cluster v100-nvlink-2 --samples 24 --seed 1"
    out = graphopt_cli(*dataset.split(), "--no-progress", "--out", str(data)).stdout
    assert "1 graph(s) on v100-nvlink-2, 24 placement samples, valid" in out
    train = "costmodel train --epochs 1 --batch-size 8 --hidden 8 --layers 1 --loss hinge --name c"
    out = graphopt_here(*train.split(), "--data", str(data), "--runs-root", str(runs)).stdout
    run = runs / "costmodel" / "c_1"
    assert "epoch 1/1  loss" in out and "val tau" in out and "top-5 error" in out
    assert f"run: {run}" in out and "test: tau" in out
    return data, run


def test_dataset_and_train(trained, run_cli):
    data, run = trained
    assert len(list(data.glob("*.npz"))) == 1 and (data / "meta.json").exists()
    for name in ("config.yaml", "state.json", "metrics.csv", "model.pt", "test_metrics.json"):
        assert (run / name).exists(), name
    assert json.loads((run / "state.json").read_text())["status"] == "finished"
    assert "loss: hinge" in (run / "config.yaml").read_text()
    assert "--time-budget" in run_cli("costmodel", "train", "--help").stdout


def _check_eval(out: str, report: Path) -> None:
    assert "rnnlm-tiny" in out and "configurations/s" in out and "simulator" in out
    result = json.loads(report.read_text())
    assert result["graphs"][0]["configs"] == 24 and "kendall_tau" in result["mean"]
    assert result["throughput"]["simulator_configs_per_second"] > 0


def test_eval(trained, capsys, tmp_path):
    """``graphopt costmodel eval`` through the CLI's entry point, in this process (a subprocess
    would add ~15 s of imports; test_eval_subprocess does that)."""
    data, run = trained
    report = tmp_path / "eval" / "r.json"
    assert main(["costmodel", "eval", str(run), "--data", str(data), "--json", str(report)]) == 0
    _check_eval(capsys.readouterr().out, report)


@pytest.mark.expensive
def test_eval_subprocess(trained, tmp_path):
    data, run = trained
    report = tmp_path / "r.json"
    _check_eval(
        graphopt_cli(
            "costmodel", "eval", str(run), "--data", str(data), "--json", str(report)
        ).stdout,
        report,
    )


def _error(capsys, *argv: str) -> str:
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert err.startswith("graphopt: error: ") and err.count("\n") == 1, err
    return err


def test_bad_inputs(capsys, tmp_path):
    assert "does not exist" in _error(
        capsys, "costmodel", "eval", str(tmp_path / "nope"), "--data", str(tmp_path)
    )
    assert "holds no model.pt" in _error(
        capsys, "costmodel", "eval", str(tmp_path), "--data", str(tmp_path)
    )
    err = _error(capsys, "costmodel", "train", "--data", str(tmp_path), "--loss", "l2")
    assert "unknown loss 'l2'; choose one of: 'mse', 'hinge', 'logistic', 'listmle'" in err
    missing = str(tmp_path / "x.npz")
    err = _error(capsys, "costmodel", "train", "--data", missing, "--runs-root", str(tmp_path))
    assert "x.npz: no such file or directory" in err
    assert "no .npz files" in _error(capsys, "costmodel", "train", "--data", str(tmp_path))
    graph_file = tmp_path / "graph.json"
    graph_file.write_text("{}")
    for argv in (
        ["train", "--data", str(graph_file)],
        ["eval", str(tmp_path), "--data", str(graph_file)],
    ):
        err = _error(capsys, "costmodel", *argv)
        assert "not a dataset" in err and "graphopt costmodel dataset" in err
        assert "pickled" not in err
    (tmp_path / "old.npz").write_bytes(b"")
    err = _error(capsys, "costmodel", "dataset", "--graphs", "rnnlm-tiny", "--out", str(tmp_path))
    assert "already holds a dataset" in err
    assert "unknown graph 'rnnlm-3'" in _error(
        capsys, "costmodel", "dataset", "--graphs", "rnnlm-3", "--out", str(tmp_path / "d")
    )
    with pytest.raises(SystemExit) as exit_info:
        main(["costmodel", "dataset", "--graphs", "rnnlm-tiny", "--task", "fusion", "--out", "x"])
    assert exit_info.value.code == 2 and "invalid choice: 'fusion'" in capsys.readouterr().err
    assert not (tmp_path / "costmodel").exists()


def test_the_bounds_are_the_library_s():
    """The command's ranges (argparse, --help) are those the library checks."""
    from graphopt.cli import costmodel
    from graphopt.costmodel import data, runs

    assert costmodel.MAX_SAMPLES == data.MAX_SAMPLES
    for name in ("MAX_EPOCHS", "MAX_BATCH_SIZE", "MAX_HIDDEN", "MAX_LAYERS", "MAX_LR"):
        assert getattr(costmodel, name) == getattr(runs, name), name
    assert costmodel.MAX_SECONDS == runs.MAX_SECONDS


def test_library_bounds_name_the_argument_before_any_work(tmp_path: Path):
    """A huge count given to the library is refused before anything is written."""
    from graphopt.costmodel import data, runs
    from graphopt.errors import InvalidArgument
    from graphopt.hardware import get_cluster
    from graphopt.workloads import resolve_graphs

    graphs, cluster = resolve_graphs("rnnlm-tiny"), get_cluster("v100-nvlink-2")
    for samples in (0, data.MAX_SAMPLES + 1, 2.5, True):
        with pytest.raises(InvalidArgument, match=r"^samples must be an integer in 1\.\.100000"):
            data.generate(graphs, cluster, tmp_path / "d", samples=samples, progress=False)
    with pytest.raises(InvalidArgument) as e:
        runs.evaluate_run(tmp_path / "nope", tmp_path, batch_size=10**9)
    assert e.value.named({"batch_size": "--batch-size"}).startswith("--batch-size must be an")
    with pytest.raises(InvalidArgument, match="test_data needs val_data"):
        runs.train_run(tmp_path, test_data=tmp_path, runs_root=tmp_path / "runs")
    assert list(tmp_path.iterdir()) == []


def test_eval_json_that_cannot_be_written_is_one_line_and_leaves_nothing(trained, capsys, tmp_path):
    data, run = trained
    (tmp_path / "blocker").write_text("a file where a folder would go")
    err = _error(
        capsys, "costmodel", "eval", str(run), "--data", str(data), "--json",
        str(tmp_path / "blocker" / "r.json"),
    )  # fmt: skip
    assert "cannot write" in err and "r.json': Not a directory" in err
    assert [p.name for p in tmp_path.iterdir()] == ["blocker"]
