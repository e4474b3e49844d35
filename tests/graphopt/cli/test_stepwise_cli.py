"""``graphopt stepwise train`` and ``eval`` in a subprocess, with tiny budgets, and their refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

TINY = """
graphs: txl-tiny,random-sp-100-s0
val_graphs: txl-tiny
clusters: v100-nvlink-2
name: tiny
imitation_updates: 1
updates: 1
graphs_per_update: 2
samples_per_graph: 2
eval_every: 1
threads: 1
policy: {hidden: 16, head_hidden: 8, sage_layers: 1, attn_layers: 1, segment_len: 32, mem_len: 32}
"""


def graphopt(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "graphopt", *args], cwd=cwd, capture_output=True, text=True
    )


@pytest.mark.expensive
def test_train_then_eval(tmp_path: Path) -> None:
    (tmp_path / "tiny.yaml").write_text(TINY)
    done = graphopt(
        "stepwise", "train", "--config", "tiny.yaml", "--runs-dir", "runs", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    run = tmp_path / "runs" / "placement-step" / "tiny_1"
    assert {"config.yaml", "policy.pt", "best.pt", "progress.jsonl", "state.json"} <= {
        p.name for p in run.iterdir()
    }
    state = json.loads((run / "state.json").read_text())
    assert state["status"] == "finished" and state["best_val_speedup"] > 0
    done = graphopt(
        "stepwise",
        "eval",
        str(run),
        "--graphs",
        "txl-tiny",
        "--clusters",
        "v100-nvlink-2",
        "--methods",
        "greedy,sample:2,annealing:2",
        "--save-decisions",
        "out",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "| txl-tiny | v100-nvlink-2 | 227 |" in done.stdout
    index = json.loads((tmp_path / "out" / "index.json").read_text())
    assert len(index["decisions"]) == 3
    # a saved decision replays in the simulator
    first = tmp_path / "out" / index["decisions"][0]["file"]
    replay = graphopt("simulate", "txl-tiny", "--decision", str(first), cwd=tmp_path)
    assert replay.returncode == 0, replay.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["stepwise", "train", "--graphs", "suite:nope"], "unknown suite 'nope'"),
        (["stepwise", "train", "--clusters", "v100x3"], "unknown cluster preset 'v100x3'"),
        (["stepwise", "train", "--config", "bad.yaml"], "unknown step-wise config key(s) lr"),
        (["stepwise", "train", "--graphs", "gen:rnnlm?layers=0"], "layers"),
        (["stepwise", "eval", "model.zip", "--graphs", "txl-tiny"], "not a step-wise policy"),
        (["stepwise", "eval", "x.pt", "--graphs", "txl-tiny", "--methods", "best"], "unknown mode"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args, says
) -> None:
    from graphopt import cli

    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.yaml").write_text("lr: 0.1\n")
    (tmp_path / "model.zip").write_bytes(b"PK\x03\x04 not a checkpoint")
    before = sorted(p.name for p in tmp_path.iterdir())
    extra = ["--runs-dir", "runs"] if args[1] == "train" else []
    assert cli.main([*args, *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.expensive
def test_sigterm_keeps_the_weights_and_exits_130(tmp_path: Path) -> None:
    import signal
    import time

    (tmp_path / "long.yaml").write_text(TINY.replace("updates: 1\n", "updates: 100000\n"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "graphopt", "stepwise", "train", "--config", "long.yaml"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    run = tmp_path / "runs" / "placement-step" / "tiny_1"
    deadline = time.monotonic() + 120
    while not (run / "best.pt").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == ["graphopt: interrupted"]
    assert json.loads((run / "state.json").read_text())["status"] == "interrupted"
    assert (run / "policy.pt").exists()


@pytest.mark.parametrize("value", ["-1", "1000001", "many"])
def test_update_counts_are_range_checked_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], value
) -> None:
    from graphopt import cli

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        cli.main(["stepwise", "train", "--updates", value, "--runs-dir", "runs"])
    assert e.value.code == 2
    assert "must be an integer in 0..1000000" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()
