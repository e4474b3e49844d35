"""`graphopt train` and `graphopt eval` of the learned baselines (GDP, HDP, Placeto), tiny budgets.

The commands run in this process (:func:`graphopt.cli.main`: one import of torch for the file;
a subprocess costs seconds of imports each), except one subprocess run of each command.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from graphopt.cli import main

COMMON = """\
cluster: v100-nvlink-2
graphs: {graphs}
val_graphs: random-layered-16-s1
total_timesteps: 64
n_envs: 2
n_steps: 16
batch_size: 16
n_epochs: 1
eval_every: 32
checkpoint_every: 32
"""
METHODS = {
    "gdp": (
        "task: placement\npolicy: gdp\n"
        "policy_kwargs: {hidden: 16, sage_layers: 1, attn_layers: 1, heads: 2, segment_len: 32,"
        " mem_len: 32}\n",
        "random-layered-16-s1,random-sp-12-s0",
    ),
    "hdp": (
        "task: placement\npolicy: hdp\nalgorithm: reinforce\ngroups: 4\n"
        "policy_kwargs: {hidden: 16}\n",
        "random-layered-16-s1",
    ),
    "placeto": (
        "task: placement-edit\npolicy: placeto\nalgorithm: reinforce\n"
        "policy_kwargs: {hidden: 16, layers: 2}\n",
        "random-layered-16-s1,random-sp-12-s0",
    ),
}


def cli(capsys, *args: str) -> tuple[int, str, str]:
    """``graphopt ARGS`` in this process: exit code, stdout, stderr."""
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def train(capsys, tmp_path: Path, method: str) -> Path:
    text, graphs = METHODS[method]
    config = tmp_path / f"{method}.yaml"
    config.write_text(text + COMMON.format(graphs=graphs))
    runs = tmp_path / "runs"
    args = ["--runs-dir", str(runs), "--name", method, "--no-progress", "--device", "cpu"]
    code, _, err = cli(capsys, "train", "--config", str(config), *args)
    assert code == 0, err
    task = "placement-edit" if method == "placeto" else "placement"
    return runs / task / f"{method}_1"


@pytest.mark.parametrize("method", list(METHODS))
def test_trains_and_evaluates_beside_the_baselines(capsys, tmp_path, method):
    run = train(capsys, tmp_path, method)
    assert (run / "best_model.pt").exists() and "val," in (run / "metrics.csv").read_text()
    code, out, _ = cli(capsys, "eval", str(run), "--graphs", "random-layered-16-s1")
    assert code == 0 and "policy (greedy)" in out and "m-etf" in out
    results = json.loads((run / "eval" / "greedy" / "results.json").read_text())
    row = [r for r in results["graphs"][0]["results"] if r["kind"] == "policy"][0]
    assert row["valid"] and row["evaluations"] == 1  # Placeto's rollout prices only its end
    if method != "gdp":  # no per-op device probabilities, no candidate moves
        code, _, err = cli(capsys, "eval", str(run), "--graphs", "txl-tiny", "--mode", "search:4")
        assert code == 2 and f"a {method} run takes greedy, sample:K or finetune:STEPS" in err


def test_resume_and_another_methods_model_is_refused(capsys, tmp_path):
    hdp = train(capsys, tmp_path, "hdp")
    code, _, _ = cli(capsys, "train", "--resume", str(hdp), "--total-timesteps", "96")
    assert code == 0 and json.loads((hdp / "state.json").read_text())["timesteps"] == 96
    gdp = train(capsys, tmp_path, "gdp")
    mixed = tmp_path / "mixed"
    shutil.copytree(hdp, mixed)
    shutil.copy(gdp / "best_model.pt", mixed / "best_model.pt")
    code, _, err = cli(capsys, "eval", str(mixed), "--graphs", "random-layered-16-s1")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "holds a model of GDPPolicy, but its run's config.yaml builds HDPPolicy" in err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("task: scheduling\npolicy: gdp\n", "policy gdp is trained on task placement"),
        ("task: placement\npolicy: placeto\n", "policy placeto is trained on task placement-edit"),
        ("task: placement\npolicy: hdp\ngroups: 0\n", "groups must be >= 1"),
        ("algorithm: sgd\n", "algorithm 'sgd' is unknown; choose one of: ppo, reinforce"),
        ("policy: gdp\npolicy_kwargs: {film: true}\n", "unknown GDPPolicy argument(s) ['film']"),
    ],
)
def test_bad_configs_are_one_line(capsys, tmp_path, text, message):
    config = tmp_path / "bad.yaml"
    config.write_text(text)
    code, _, err = cli(capsys, "train", "--config", str(config), "--runs-dir", str(tmp_path))
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_the_command_in_a_subprocess(run_cli, tmp_path):
    """One run of the real command: a bad learned-baseline config exits 2 with one line."""
    config = tmp_path / "bad.yaml"
    config.write_text("task: fusion\npolicy: hdp\n")
    proc = run_cli("train", "--config", str(config), "--runs-dir", str(tmp_path), check=False)
    assert proc.returncode == 2 and "policy hdp is trained on task placement" in proc.stderr
