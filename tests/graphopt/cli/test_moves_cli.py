"""``graphopt moves train`` writes a model that ``graphopt optimize --moves`` uses; bad input is
one line, exit 2, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import torch

GRAPHS = "random-sp-200-s0,wavenet-tiny"


def test_the_losses_are_the_trainers():
    import inspect

    from graphopt.cli import moves
    from graphopt.train.move_gain import LOSSES, fit_move_net

    assert moves.LOSSES == LOSSES
    assert inspect.signature(fit_move_net).parameters["loss"].default == LOSSES[0]


def test_a_trained_model_drives_optimize(run_cli_here, tmp_path: Path):
    model = tmp_path / "m" / "moves.pt"  # missing folders are created
    proc = run_cli_here(
        "moves",
        "train",
        "--graphs",
        GRAPHS,
        "--clusters",
        "v100-nvlink-2,hetero-cpu-2gpu",
        "--ops",
        "16",
        "--epochs",
        "2",
        "-o",
        str(model),
    )
    assert "epoch 2/2" in proc.stdout and model.is_file()
    assert sorted(p.name for p in model.parent.iterdir()) == ["moves.pt"]  # no temporary left
    out = tmp_path / "best.json"
    proc = run_cli_here(
        "optimize",
        "txl-tiny",
        "--cluster",
        "v100-nvlink-4",
        "--calls",
        "24",
        "--moves",
        str(model),
        "-o",
        str(out),
    )
    saved = json.loads(out.read_text())
    assert saved["method"] == "decoder-search+annealing+learned-moves@calls=24"
    replay = run_cli_here("simulate", "txl-tiny", "--decision", str(out), "--json")
    assert float(json.loads(replay.stdout)[0]["step_time"]) == saved["step_time"]


def test_bad_input_is_one_line_exit_2_and_writes_nothing(run_cli_here, tmp_path: Path):
    torch.save({"weights": torch.zeros(2)}, tmp_path / "policy.pt")
    out = tmp_path / "best.json"
    cases = [
        (["moves", "train", "--graphs", GRAPHS, "-o", str(tmp_path)], "is a directory"),
        (["moves", "train", "--graphs", GRAPHS, "-o", str(tmp_path / "m.json")], ".pt"),
        (
            ["moves", "train", "--graphs", GRAPHS, "--max-ops", "5", "-o", str(tmp_path / "m.pt")],
            "--max-ops",
        ),
        (
            ["moves", "train", "--graphs", "suite:nope", "-o", str(tmp_path / "m.pt")],
            "unknown suite",
        ),
        (
            ["moves", "train", "--clusters", "v100-nvlink-4,nope", "-o", str(tmp_path / "m.pt")],
            "unknown cluster preset 'nope'",
        ),
        (
            ["moves", "train", "--graphs", GRAPHS, "--epochs", "0", "-o", str(tmp_path / "m.pt")],
            "--epochs",
        ),
        (
            [
                "optimize",
                "txl-tiny",
                "--cluster",
                "v100-nvlink-4",
                "--calls",
                "8",
                "--moves",
                str(tmp_path / "policy.pt"),
                "-o",
                str(out),
            ],
            "not a move-gain model",
        ),
        (
            [
                "optimize",
                "txl-tiny",
                "--cluster",
                "v100-nvlink-4",
                "--calls",
                "8",
                "--moves",
                str(tmp_path / "none.pt"),
                "-o",
                str(out),
            ],
            "no such move-gain model",
        ),
        (
            [
                "optimize",
                "txl-tiny",
                "--cluster",
                "v100-nvlink-4",
                "--calls",
                "8",
                "--task",
                "joint",
                "--moves",
                str(tmp_path / "policy.pt"),
                "-o",
                str(out),
            ],
            "--task joint",
        ),
        (
            [
                "optimize",
                "txl-tiny",
                "--cluster",
                "accel-host",  # route: via-host, which the model's decoder does not run
                "--calls",
                "8",
                "--moves",
                "builtin",
                "-o",
                str(out),
            ],
            "cannot read route: via-host of cluster 'accel-host'",
        ),
    ]
    for args, says in cases:
        proc = run_cli_here(*args, check=False)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, (args, proc.stderr)
        assert says in proc.stderr, (args, proc.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy.pt"]
