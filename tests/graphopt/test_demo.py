"""``make demo`` as a user sees it: an interrupted run ends in one line and status 130, not a
traceback; section headings stay narrow when the output is piped. Training itself is replaced
(``graphopt.demo.train``), so these tests take no time."""

from __future__ import annotations

import io
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
