"""`graphopt train` and `graphopt eval` with tiny budgets: in subprocesses, as a user runs them,
and in this process where a subprocess would only import torch again."""

from __future__ import annotations

import csv
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, graphopt_here

from graphopt.decisions.io import load_decision
from graphopt.hardware import get_cluster
from graphopt.sim import Simulator
from graphopt.workloads import get_graph

TINY = """\
task: placement
graphs: txl-tiny,random-layered-100-s0
val_graphs: random-sp-100-s0
cluster: v100-nvlink-2
total_timesteps: {total}
n_envs: 2
n_steps: 16
batch_size: 16
n_epochs: 1
eval_every: 32
checkpoint_every: 32
threads: 1
policy_kwargs: {{hidden: 16, sage_layers: 1, attn_layers: 1, heads: 2, segment_len: 32, mem_len: 32}}
"""


def write_config(tmp_path: Path, total: int) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY.format(total=total))
    return path


def edited_copy(run: Path, dst: Path, old: str, new: str) -> Path:
    """A copy of run directory ``run`` at ``dst`` whose config.yaml has ``old`` replaced by ``new``."""
    shutil.copytree(run, dst)
    config = dst / "config.yaml"
    config.write_text(config.read_text().replace(old, new))
    return dst


@pytest.mark.expensive  # 18 s; every run keeps the decoder and edit runs' train-then-eval tests
def test_train_then_eval(run_cli, tmp_path):
    # training in this process (test_ctrl_c_or_sigterm_leaves_a_resumable_run trains in a
    # subprocess), the first eval in a subprocess, as a user runs it; the rest in this process,
    # torch being loaded already: the commands are the same, a subprocess would only spend
    # seconds importing torch again
    here = graphopt_here
    runs = tmp_path / "runs"
    out = here(
        "train",
        "--config",
        str(write_config(tmp_path, 64)),
        "--runs-dir",
        str(runs),
        "--name",
        "t",
        "--no-progress",
    ).stdout
    run = runs / "placement" / "t_1"
    assert out.startswith(f"run: {run} (training 64 timesteps)")  # the directory comes first
    assert "finished: 64 timesteps" in out and "validation speed-up" in out  # then a summary
    assert out.rstrip().endswith(f"run: {run}")
    for name in (
        "config.yaml",
        "state.json",
        "metrics.csv",
        "final_model.pt",
        "best_model.pt",
        "checkpoints/last.pt",
    ):
        assert (run / name).exists(), name
    assert any((run / "tb").iterdir())
    state = json.loads((run / "state.json").read_text())
    assert state["status"] == "finished" and state["timesteps"] >= 64
    assert "val," in (run / "metrics.csv").read_text()

    text = run_cli(
        "eval", str(run), "--graphs", "txl-tiny,random-sp-100-s0", "--mode", "sample:2"
    ).stdout
    assert "policy (sample:2)" in text and "geometric mean" in text
    assert text.startswith(f"model: {run / 'best_model.pt'} (best by validation")
    results = json.loads((run / "eval" / "sample-2" / "results.json").read_text())
    assert [g["graph"] for g in results["graphs"]] == ["txl-tiny", "random-sp-100-s0"]
    assert (run / "eval" / "sample-2" / "comparison.png").exists()
    assert (run / "eval" / "sample-2" / "training_curve.png").exists()

    text = here("eval", str(run), "--graphs", "txl-tiny", "--mode", "finetune:16").stdout
    assert "policy (finetune:16)" in text
    tuned = json.loads((run / "eval" / "finetune-16" / "results.json").read_text())
    policy_row = [r for r in tuned["graphs"][0]["results"] if r["kind"] == "policy"][0]
    assert policy_row["evaluations"] >= 16 + 1  # fine-tuning decisions plus the final one

    here("eval", str(run), "--graphs", "random-sp-100-s0")  # greedy, for the plan's start
    text = here("eval", str(run), "--graphs", "random-sp-100-s0", "--mode", "plan:256").stdout
    assert "policy (plan:256)" in text and "estimate-search@256" in text
    planned = json.loads((run / "eval" / "plan-256" / "results.json").read_text())
    rows = {r["method"]: r for r in planned["graphs"][0]["results"]}
    best = min(r["step_time"] for r in rows.values() if r["kind"] == "heuristic" and r["valid"])
    greedy_results = json.loads((run / "eval" / "greedy" / "results.json").read_text())
    greedy = [r for r in greedy_results["graphs"][0]["results"] if r["kind"] == "policy"][0]
    # the plan keeps its start unless the simulator measures the refined placement faster
    assert rows["policy (plan:256)"]["step_time"] <= greedy["step_time"] * (1 + 1e-9)
    assert rows["estimate-search@256"]["step_time"] <= best * (1 + 1e-9)
    assert rows["policy (plan:256)"]["evaluations"] == 2  # greedy decision + planned one

    # bad input: other device count, graph too large, unknown mode, plan for another task
    # (refusals before any work)
    proc = here("eval", str(run), "--graphs", "txl-tiny", "--cluster", "v100-nvlink-4", check=False)
    assert proc.returncode == 2 and "trained for 2 devices" in proc.stderr
    proc = here("eval", str(run), "--graphs", "gnmt-tiny", check=False)
    assert proc.returncode == 2 and "supports at most" in proc.stderr
    proc = here("eval", str(run), "--graphs", "txl-tiny", "--mode", "best", check=False)
    assert proc.returncode == 2 and "unknown --mode 'best'" in proc.stderr
    proc = here("eval", str(run), "--graphs", "txl-tiny", "--budget", "-3", check=False)
    assert proc.returncode == 2 and "--budget must be >= 0, got -3" in proc.stderr
    other = edited_copy(run, tmp_path / "scheduling_run", "task: placement", "task: scheduling")
    proc = here("eval", str(other), "--graphs", "txl-tiny", "--mode", "plan:8", check=False)
    assert proc.returncode == 2 and "refines placements" in proc.stderr

    # resume: a finished run says so; flags that would change the run are refused by name;
    # --total-timesteps extends the run, recorded in its config and state, its clock going on
    metrics = (run / "metrics.csv").read_text()
    proc = here("train", "--resume", str(run), "--no-progress")
    assert "already finished (64 timesteps)" in proc.stdout and "--total-timesteps N" in proc.stdout
    assert (run / "metrics.csv").read_text() == metrics
    proc = here("train", "--resume", str(run), "--seed", "3", "--graphs", "x", check=False)
    assert proc.returncode == 2 and "--graphs, --seed would change the run" in proc.stderr
    proc = here("train", "--resume", str(run), "--total-timesteps", "32", check=False)
    assert proc.returncode == 2 and "below the 64 timesteps" in proc.stderr
    out = here("train", "--resume", str(run), "--total-timesteps", "96", "--no-progress").stdout
    assert out.startswith(f"resuming {run} at 64 of 96 timesteps") and "finished: 96" in out
    state = json.loads((run / "state.json").read_text())
    assert state["status"] == "finished" and state["timesteps"] >= 96
    assert (
        state["total_timesteps"] == 96
        and "total_timesteps: 96" in (run / "config.yaml").read_text()
    )
    walls = [float(r.split(",")[1]) for r in (run / "metrics.csv").read_text().splitlines()[1:]]
    assert len(walls) > metrics.count("\n") - 1 and walls == sorted(walls)  # no restart from 0
    assert state["wall_seconds"] >= walls[-1]


EDIT = """\
task: placement-edit
graphs: txl-tiny,random-layered-100-s0
val_graphs: random-sp-100-s0
cluster: v100-nvlink-2
total_timesteps: 64
candidates: 4
horizon: 8
n_envs: 2
n_steps: 16
batch_size: 16
n_epochs: 1
gamma: 0.0
eval_every: 32
checkpoint_every: 32
policy_kwargs: {hidden: 16}
"""


def test_placement_edit_train_then_eval(tmp_path):
    config = tmp_path / "edit.yaml"
    config.write_text(EDIT)
    runs = tmp_path / "runs"
    here = graphopt_here  # in this process (torch is loaded); subprocesses: test_train_then_eval
    here("train", "--config", str(config), "--runs-dir", str(runs), "--name", "e", "--no-progress")
    run = runs / "placement-edit" / "e_1"
    assert (run / "best_model.pt").exists() and "val," in (run / "metrics.csv").read_text()
    train_rows = [r for r in (run / "metrics.csv").read_text().splitlines() if ",train," in r]
    assert train_rows  # episodes of 8 moves ended and were recorded
    # any graph size: the policy never sees it (gnmt-tiny is larger than every training graph)
    text = here("eval", str(run), "--graphs", "gnmt-tiny", "--mode", "sample:2").stdout
    assert "policy (sample:2)" in text and "m-etf" in text
    results = json.loads((run / "eval" / "sample-2" / "results.json").read_text())
    row = [r for r in results["graphs"][0]["results"] if r["kind"] == "policy"][0]
    assert row["valid"] and row["evaluations"] == 2
    proc = here("eval", str(run), "--graphs", "txl-tiny", "--mode", "plan:8", check=False)
    assert proc.returncode == 2 and "refines placements" in proc.stderr
    other = edited_copy(run, tmp_path / "other", "candidates: 4", "candidates: 6")
    proc = here("eval", str(other), "--graphs", "txl-tiny", check=False)
    assert proc.returncode == 2 and "number of candidates it was trained with" in proc.stderr


def test_bad_runs_and_configs(run_cli_here, tmp_path):
    run_cli = run_cli_here  # refusals before any work: in this process
    proc = run_cli("eval", str(tmp_path / "nope"), "--graphs", "txl-tiny", check=False)
    assert proc.returncode == 2 and "does not exist" in proc.stderr
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "config.yaml").write_text("task: placement\n")
    proc = run_cli("eval", str(tmp_path / "empty"), "--graphs", "txl-tiny", check=False)
    assert proc.returncode == 2 and "holds no model" in proc.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("task: placement\nlearning_rat: 0.1\n")
    proc = run_cli("train", "--config", str(bad), "--runs-dir", str(tmp_path), check=False)
    assert proc.returncode == 2 and "unknown config key 'learning_rat'" in proc.stderr
    bogus = tmp_path / "bogus.yaml"
    bogus.write_text(TINY.format(total=32).replace("hidden: 16", "hidden: 16, bogus: 1"))
    proc = run_cli("train", "--config", str(bogus), "--runs-dir", str(tmp_path / "r"), check=False)
    assert proc.returncode == 2 and "unknown GOPolicy argument(s) ['bogus']" in proc.stderr
    assert not (tmp_path / "r" / "placement").exists() or not any(
        (tmp_path / "r" / "placement").iterdir()
    )
    proc = run_cli("train", "--resume", str(tmp_path / "nope"), check=False)
    assert proc.returncode == 2 and "does not exist" in proc.stderr
    typed = tmp_path / "typed.yaml"
    typed.write_text("learning_rate: fast\n")
    proc = run_cli("train", "--config", str(typed), "--runs-dir", str(tmp_path), check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "config key 'learning_rate' must be a number, got 'fast'" in proc.stderr


@pytest.mark.parametrize(
    "signum",
    [
        # both end-to-end runs (12 s each) are left to CI: tests/graphopt/train/test_sweep.py
        # sends SIGTERM to training in this process through the same handler
        # (rundir.graceful_stop) in every run
        pytest.param(signal.SIGINT, id="ctrl-c", marks=pytest.mark.expensive),
        pytest.param(signal.SIGTERM, id="sigterm", marks=pytest.mark.expensive),
    ],
)
def test_ctrl_c_or_sigterm_leaves_a_resumable_run(tmp_path, signum):
    runs = tmp_path / "runs"
    cmd = [
        sys.executable,
        "-m",
        "graphopt",
        "train",
        "--config",
        str(write_config(tmp_path, 4096)),
        "--runs-dir",
        str(runs),
        "--name",
        "i",
        "--no-progress",
    ]
    # A shell without job control starts background jobs with SIGINT ignored, and Python then
    # never turns it into KeyboardInterrupt: give the child the default disposition back, as an
    # interactive terminal would.
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    run = runs / "placement" / "i_1"
    deadline = time.time() + 240
    while not (run / "checkpoints" / "last.pt").exists():
        assert proc.poll() is None and time.time() < deadline, proc.communicate()
        time.sleep(0.5)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (out, err)
    assert f"graphopt train --resume {run}" in out
    state = json.loads((run / "state.json").read_text())
    assert state["status"] == "interrupted" and 0 < state["timesteps"] < 4096
    wall = state["wall_seconds"]
    # resume with a smaller target so the test stays short
    target = state["timesteps"] + 32
    # (in this process: the interrupted run is the subprocess's; resuming it needs no other)
    graphopt_here("train", "--resume", str(run), "--no-progress", "--total-timesteps", str(target))
    state = json.loads((run / "state.json").read_text())
    assert state["status"] == "finished" and state["timesteps"] >= target
    assert (run / "final_model.pt").exists()
    rows = (run / "metrics.csv").read_text().splitlines()
    assert rows[0].startswith("timesteps") and len(rows) > 2  # appended across the two sessions
    walls = [float(r.split(",")[1]) for r in rows[1:]]
    assert walls == sorted(walls) and state["wall_seconds"] >= wall  # one clock over both sessions


@pytest.mark.parametrize("bad", ["--total-timesteps=0"])
def test_bad_flag_values(run_cli_here, tmp_path, bad):
    proc = run_cli_here("train", bad, "--runs-dir", str(tmp_path), check=False)
    assert proc.returncode == 2 and "total_timesteps must be >= 1" in proc.stderr


def fabricated_run(root: Path) -> Path:
    """A run directory as the commands check it before any work: a config, a state and model
    files (never loaded by the refusals below, so any bytes will do)."""
    from tiny_runs import tiny_config

    from graphopt import rundir

    run = rundir.new_run_dir(root, "placement", "fab")
    tiny_config().save(run / rundir.CONFIG_FILE)
    rundir.write_state(run, status="interrupted", timesteps=16, total_timesteps=32)
    for name in (rundir.BEST, rundir.LAST):
        (run / name).write_bytes(b"never loaded")
    return run


def assert_one_line(proc: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert proc.stderr.startswith("graphopt: error: ")
    for fragment in fragments:
        assert fragment in proc.stderr, (fragment, proc.stderr)


def test_output_paths_under_a_file_fail_first(run_cli, tmp_path):
    blocker = tmp_path / "F"
    blocker.write_text("a regular file")
    proc = run_cli("train", "--runs-dir", str(blocker), "--no-progress", check=False)
    assert_one_line(proc, f"--runs-dir {str(blocker)!r} is a file, not a directory")
    proc = run_cli("train", "--runs-dir", str(blocker / "runs"), "--no-progress", check=False)
    assert_one_line(proc, f"{str(blocker)!r} is a file, not a directory")
    proc = run_cli("train", "--name", "a/b", "--runs-dir", str(tmp_path / "r"), check=False)
    assert_one_line(proc, "run name 'a/b' may only contain")
    run = fabricated_run(tmp_path / "runs")
    for out in (blocker / "sub", blocker):
        proc = run_cli("eval", str(run), "--graphs", "txl-tiny", "--out", str(out), check=False)
        assert_one_line(proc, f"--out {str(out)!r}", f"{str(blocker)!r} is a file")
        assert proc.stdout == ""  # refused before the model was even described
    assert sorted(p.name for p in tmp_path.iterdir()) == ["F", "runs"]
    assert not (run / "eval").exists() and blocker.read_text() == "a regular file"


def test_resume_while_another_process_trains_is_refused_with_its_pid(run_cli, tmp_path):
    from run_locks import lock_held_elsewhere

    run = fabricated_run(tmp_path / "runs")
    state = (run / "state.json").read_text()
    with lock_held_elsewhere(run) as holder:
        proc = run_cli("train", "--resume", str(run), "--no-progress", check=False)
        assert_one_line(proc, f"run {run} is in use: process {holder.pid}", f"kill {holder.pid}")
    assert (run / "state.json").read_text() == state and not (run / "metrics.csv").exists()


def test_a_corrupt_state_file_is_named(run_cli_here, tmp_path):
    run = fabricated_run(tmp_path / "runs")
    (run / "state.json").write_text('{"status": "interrupted", "timesteps')
    for args in (
        ("train", "--resume", str(run), "--no-progress"),
        ("eval", str(run), "--graphs", "txl-tiny"),
    ):
        proc = run_cli_here(*args, check=False)
        assert_one_line(proc, f"{run / 'state.json'} is corrupt (Unterminated string", "delete it")


def test_resume_reports_the_total_of_the_config_it_resumes_with(
    run_cli_here, tmp_path, monkeypatch
):
    # the line "resuming RUN at N of TOTAL" takes TOTAL from the configuration resume() loaded
    # (with --total-timesteps applied), not from config.yaml read a second time
    import graphopt.train.config
    import graphopt.train.trainer
    from graphopt.train.config import load_config

    run = fabricated_run(tmp_path / "runs")  # config.yaml: 32 timesteps; done: 16
    extended = load_config(run / "config.yaml").replace(total_timesteps=96)

    def fake_resume(path, total_timesteps=None, show_progress=True, on_start=None, **kwargs):
        on_start(Path(path), extended)
        return Path(path)

    def never(*args, **kwargs):
        raise AssertionError("config.yaml read again")

    monkeypatch.setattr(graphopt.train.trainer, "resume", fake_resume)
    monkeypatch.setattr(graphopt.train.config, "load_config", never)
    proc = run_cli_here("train", "--resume", str(run), "--no-progress")
    assert proc.stdout.startswith(f"resuming {run} at 16 of 96 timesteps")


def test_decoder_run_trains_evaluates_and_saves_its_decisions(run_cli, tmp_path):
    runs = tmp_path / "runs"
    config = write_config(tmp_path, 32)
    config.write_text(config.read_text() + "decoder: heft-lc\n")
    here = graphopt_here  # train and eval in this process (torch is loaded), simulate in another
    here("train", "--config", str(config), "--runs-dir", str(runs), "--name", "d", "--no-progress")
    run = runs / "placement" / "d_1"
    assert "decoder: heft-lc" in (run / "config.yaml").read_text()  # the run records its decoder
    saved = tmp_path / "decisions"
    graphs = "txl-tiny,random-sp-100-s0"
    here("eval", str(run), "--graphs", graphs, "--budget", "8", "--save-decisions", str(saved))
    greedy = json.loads((run / "eval" / "greedy" / "results.json").read_text())
    for graph in greedy["graphs"]:  # at first every op stays on the best heuristic's device
        rows = graph["results"]
        policy = next(r for r in rows if r["kind"] == "policy")
        best = min(r["step_time"] for r in rows if r["kind"] == "heuristic" and r["valid"])
        assert policy["step_time"] <= best * (1 + 1e-12)

    # every row's decision is saved, named in results.json, and replays to its step time exactly
    index = json.loads((saved / "index.json").read_text())["decisions"]
    named = {
        (g["graph"], r["method"]): r["decision_file"]
        for g in greedy["graphs"]
        for r in g["results"]
        if r["decision_file"] is not None
    }
    assert set(named) == {(e["graph"], e["method"]) for e in index}
    for g in greedy["graphs"]:  # a row without a decision is a method that refused the graph
        for r in g["results"]:
            assert r["decision_file"] is not None or (not r["valid"] and r["reason"])
    cluster = get_cluster("v100-nvlink-2")
    for entry in index:
        assert named[entry["graph"], entry["method"]] == entry["file"]
        graph = get_graph(entry["graph"])
        decision = load_decision(saved / entry["file"], graph, cluster=cluster)
        assert Simulator().evaluate(graph, cluster, decision).step_time == entry["step_time"]
    with (run / "eval" / "greedy" / "results.csv").open() as f:  # the CSV names them too
        csv_files = {
            (row["graph"], row["method"]): row["decision_file"]
            for row in csv.DictReader(f)
            if row["decision_file"]
        }
    assert csv_files == named
    entry = next(e for e in index if e["graph"] == "txl-tiny" and e["method"].startswith("policy"))
    replay = run_cli("simulate", "txl-tiny", "--decision", str(saved / entry["file"]), "--json")
    assert json.loads(replay.stdout)[0]["step_time"] == entry["step_time"]  # and by the command

    text = here("eval", str(run), "--graphs", "txl-tiny", "--mode", "search:16").stdout
    assert "policy (search:16)" in text
    searched = json.loads((run / "eval" / "search-16" / "results.json").read_text())
    row = next(r for r in searched["graphs"][0]["results"] if r["kind"] == "policy")
    assert row["evaluations"] == 16
    bad = here("eval", str(run), "--graphs", "txl-tiny", "--mode", "plan:8", check=False)
    assert bad.returncode == 2 and "a run with a decoder takes greedy" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_bad_decoder_setting_is_one_line(run_cli, tmp_path):
    path = write_config(tmp_path, 32)  # the other bad settings: tests/graphopt/train/test_config.py
    path.write_text(path.read_text() + "decoder: list\n")
    proc = run_cli("train", "--config", str(path), "--runs-dir", str(tmp_path / "r"), check=False)
    assert proc.returncode == 2, proc.stderr
    fragment = "decoder 'list' is unknown; choose none or one of: heft, heft-lc"
    assert fragment in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
