"""``make demo`` as a user sees it: an interrupted run ends in one line and status 130, not a
traceback; section headings stay narrow when the output is piped; every graph it names resolves
from a copy of the repository alone. Training itself is replaced (``graphopt.demo.train``), so
these tests take no time."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch
from rich.console import Console

from graphopt import demo
from graphopt.eval.console import PIPE_WIDTH, make_console
from graphopt.train.trainer import TrainingInterrupted


@pytest.fixture(autouse=True)
def _keep_torch_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)  # main sets the config's


def test_interrupted_training_ends_with_one_line_and_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
):
    run = tmp_path / "placement" / "demo_0"

    def interrupted(config, runs_root):
        raise TrainingInterrupted(run)

    monkeypatch.setattr(demo, "train", interrupted)
    assert demo.main(["--runs-dir", str(tmp_path)]) == demo.INTERRUPTED == 130
    out, err = capsys.readouterr()
    assert err.splitlines() == [
        f"demo: training interrupted; resume with: graphopt train --resume {run}"
    ]
    assert "Traceback" not in out + err
    assert "1. PPO training" in out  # the heading before training began


@pytest.mark.parametrize(
    "error",
    [KeyboardInterrupt(), SystemError("numba call")],  # the second caused by a Ctrl-C, below
)
def test_ctrl_c_outside_training_ends_with_one_line_and_130(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    error: BaseException,
):
    def evaluate(*args, **kwargs):
        if isinstance(error, SystemError):
            raise error from KeyboardInterrupt()
        raise error

    monkeypatch.setattr(demo, "train", lambda config, runs_root: tmp_path / "run")
    monkeypatch.setattr(demo, "evaluate_run", evaluate)
    assert demo.main(["--runs-dir", str(tmp_path)]) == 130
    assert capsys.readouterr().err.splitlines() == ["demo: interrupted"]


def test_other_errors_are_not_taken_for_an_interruption(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    def broken(config, runs_root):
        raise ValueError("a bad graph")

    monkeypatch.setattr(demo, "train", broken)
    with pytest.raises(ValueError, match="a bad graph"):
        demo.main(["--runs-dir", str(tmp_path)])


def test_section_headings_are_no_wider_than_their_title_or_the_rule_width():
    buffer = io.StringIO()
    console = Console(file=buffer, width=PIPE_WIDTH, color_system=None)
    long_title = "2b. " + "x" * 150
    demo.section(console, "3. the policy's schedule")
    demo.section(console, long_title)
    lines = buffer.getvalue().splitlines()
    assert lines == [
        "",
        "3. the policy's schedule",
        "─" * len("3. the policy's schedule"),
        "",
        long_title,  # the title whole, on one line: the console is as wide as a pipe's
        "─" * demo.RULE_WIDTH,
    ]


def test_piped_demo_output_has_no_wide_rules(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
):
    assert make_console().width >= PIPE_WIDTH  # capsys is no terminal: tables get every column

    def interrupted(config, runs_root):
        raise TrainingInterrupted(tmp_path)

    monkeypatch.setattr(demo, "train", interrupted)
    demo.main(["--runs-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert out.strip() and max(len(line) for line in out.splitlines()) <= demo.RULE_WIDTH


# ---------------------------------------------------------------------------------- its graphs
ROOT = Path(__file__).resolve().parents[2]

# Run in the copy: resolves every graph of the specs in argv[1] and prints, as JSON, where
# graphopt was imported from, the graph names, and every file opened outside the copy and the
# interpreter's own prefixes. Zoo models (torch:) are built from code and read no data; their
# specs are checked, not built (about 20 s for the demo's three).
RESOLVE = """
import json, os, sys
opened = []
sys.addaudithook(
    lambda event, args: opened.append(args[0])
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike))
    else None
)
import graphopt
from graphopt.importers.zoo import parse_spec
from graphopt.workloads.registry import SUITES, resolve_graphs, split_spec

names = []
for spec in json.loads(sys.argv[1]):
    for item in split_spec(spec):
        for member in SUITES[item[len("suite:"):]] if item.startswith("suite:") else [item]:
            if member.startswith("torch:"):
                parse_spec(member)
                names.append(member)
            else:
                names += [graph.name for graph in resolve_graphs(member)]
allowed = [os.getcwd(), sys.prefix, sys.base_prefix, sys.exec_prefix]
outside = sorted(
    {path for path in map(os.path.realpath, map(os.fsdecode, opened))
     if not any(os.path.commonpath([path, base]) == base for base in map(os.path.realpath, allowed))}
)
print(json.dumps({"graphopt": graphopt.__file__, "names": names, "outside": outside}))
"""


def _demo_graph_specs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """Every graph spec ``make demo`` trains, validates or evaluates on, in order: the demo runs
    with training and evaluation replaced by functions that note their graphs."""
    specs: list[str] = []

    def train(config, runs_root):
        specs.extend([config.graphs, config.val_graphs])
        return tmp_path / "run"

    def evaluate_run(run, graphs, **kwargs):
        specs.append(graphs)
        return [types.SimpleNamespace(graph="")]

    def stepwise(config_path, eval_graphs, *args):
        from graphopt.train.step_run import load_step_config

        config = load_step_config(config_path)
        specs.extend([config.graphs, config.val_graphs, eval_graphs])

    monkeypatch.setattr(demo, "train", train)
    monkeypatch.setattr(demo, "evaluate_run", evaluate_run)
    monkeypatch.setattr(demo, "load_run_model", lambda run: None)
    monkeypatch.setattr(demo, "_gantt", lambda *args: None)
    monkeypatch.setattr(demo, "_stepwise", stepwise)
    assert demo.main(["--runs-dir", str(tmp_path)]) == 0
    return list(dict.fromkeys(specs))


def _copy_of_the_repository(dest: Path) -> Path:
    """The files a clone of :data:`ROOT` would hold (tracked, or new and not ignored) in
    ``dest``; skips the test where ``ROOT`` is no git checkout."""
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the files of a clone are unknown")
    listed = subprocess.run(
        [git, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, dest / name)
    return dest


def test_demo_graphs_resolve_from_a_copy_of_the_repository_alone(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
):
    specs = _demo_graph_specs(monkeypatch, tmp_path / "runs")
    capsys.readouterr()
    assert any("pipedream:" in spec for spec in specs)
    copy = _copy_of_the_repository(tmp_path / "clone")
    env = {k: v for k, v in os.environ.items() if k not in ("GRAPHOPT_PIPEDREAM_DIR", "PYTHONPATH")}
    env.update(PYTHONPATH=str(copy), PYTHONDONTWRITEBYTECODE="1")
    done = subprocess.run(
        [sys.executable, "-c", RESOLVE, json.dumps(specs)],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert Path(found["graphopt"]).is_relative_to(copy)
    assert found["outside"] == []
    for model in ("resnet50", "inception_v3", "gnmt"):
        assert f"pipedream:{model} (training)" in found["names"]
    assert {"wavenet-tiny", "torch:resnet"} <= set(found["names"])  # held-out, validation


def _record_stages(monkeypatch, tmp_path) -> tuple[list[tuple[str, int]], list]:
    """Training and evaluation replaced by recorders: the (mode, budget) of every evaluation and
    the config of every training run, in order."""
    calls: list[tuple[str, int]] = []
    configs = []

    def train(config, runs_root):
        configs.append(config)
        return tmp_path / "run"

    def evaluate_run(run, graphs, mode, budget, **kwargs):
        calls.append((mode, budget))
        return [types.SimpleNamespace(graph="")]

    monkeypatch.setattr(demo, "train", train)
    monkeypatch.setattr(demo, "evaluate_run", evaluate_run)
    monkeypatch.setattr(demo, "load_run_model", lambda run: None)
    monkeypatch.setattr(demo, "_gantt", lambda *args: None)
    return calls, configs


def test_the_demo_run_steers_the_decoder_and_is_searched_through_it(monkeypatch, tmp_path):
    calls, configs = _record_stages(monkeypatch, tmp_path)
    args = [
        "--runs-dir",
        str(tmp_path),
        "--edit-config",
        "",
        "--edit-tasks",
        "",
        "--step-config",
        "",
    ]
    assert demo.main(args) == 0
    assert configs[0].decoder == "heft-lc" and configs[0].task == "placement"
    assert calls == [("greedy", 64), ("search:256", 256)]


def test_search_0_skips_the_decoder_search_and_stage_5_validates_on_random_dags(
    monkeypatch, tmp_path
):
    calls, configs = _record_stages(monkeypatch, tmp_path)
    args = ["--runs-dir", str(tmp_path), "--search", "0", "--edit-config", ""]
    args += ["--edit-tasks", "fusion", "--step-config", ""]
    assert demo.main(args) == 0
    # a decoder run is never refined by plan:K (that mode needs device probabilities)
    assert calls == [("greedy", 64), ("search:256", 256)]
    assert configs[1].task == "fusion-edit" and configs[1].val_graphs == demo.EDIT_VAL_GRAPHS
    assert not any(name.startswith("torch:") for name in configs[1].val_graphs.split(","))
