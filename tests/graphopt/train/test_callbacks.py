"""Training progress as a log sees it: the plain progress line, its interval, and a tiny run whose
output is not a terminal printing those lines instead of a live bar."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
import torch
from tiny_runs import tiny_config

from graphopt.train.callbacks import (
    format_duration,
    progress_interval,
    progress_line,
    speedup_status,
)
from graphopt.train.trainer import train

torch.set_num_threads(1)

LINE = re.compile(
    r"^train (?P<done>[\d,]+)/(?P<total>[\d,]+) \(\d+%\) \| val speed-up (-|\d+\.\d{3}x"
    r"( \(best \d+\.\d{3}x\))?) \| \d+\.\d decisions/s \| elapsed [\d:]+ \| ETA ([\d:]+|-)$"
)


def test_progress_line_from_given_figures():
    line = progress_line(4096, 16384, 1.0234, 1.05, 27.31, 150.0)
    assert line == (
        "train 4,096/16,384 (25%) | val speed-up 1.023x (best 1.050x) | 27.3 decisions/s | "
        "elapsed 2:30 | ETA 7:30"
    )
    assert LINE.match(line)
    first = progress_line(0, 16384, None, None, 0.0, 0.0)  # nothing known yet
    assert first == "train 0/16,384 (0%) | val speed-up - | 0.0 decisions/s | elapsed 0:00 | ETA -"
    assert progress_line(16384, 16384, 1.1, 1.2, 30.0, 4000.0).endswith(
        "elapsed 1:06:40 | ETA 0:00"
    )


def test_durations_and_statuses():
    assert format_duration(None) == format_duration(float("inf")) == format_duration(-1.0) == "-"
    assert format_duration(59.6) == "1:00" and format_duration(3725) == "1:02:05"
    assert speedup_status(None, 1.2) == "val speed-up -"
    assert speedup_status(0.9876, float("-inf")) == "val speed-up 0.988x"  # no best yet
    assert speedup_status(1.0, 1.25) == "val speed-up 1.000x (best 1.250x)"


@pytest.mark.parametrize(
    ("total", "eval_every", "every"),
    [(16384, 2048, 820), (16384, 512, 512), (32, 16, 2), (10, 100, 1)],
)
def test_progress_interval(total: int, eval_every: int, every: int):
    assert progress_interval(total, eval_every) == every


def test_a_run_with_piped_output_prints_progress_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    train(tiny_config(), runs_root=tmp_path, show_progress=True)  # capsys: not a terminal
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("train ")]
    assert lines, out
    for line in lines:
        assert LINE.match(line), line
    done = [int(LINE.match(line)["done"].replace(",", "")) for line in lines]  # type: ignore[index]
    assert done == sorted(done) and done[-1] == 32
    every = progress_interval(32, 16)
    assert len(lines) >= 32 // every  # a line at least every `every` timesteps
    assert lines[-1].endswith("ETA 0:00") and re.search(r"val speed-up \d+\.\d{3}x", lines[-1])
    # the last step (32 = 2 x eval_every) validated the final model: no second validation line
    assert out.splitlines()[-1] == lines[-1] and "final validation" not in out
    assert "\x1b" not in out  # no terminal control codes in a log


def test_no_progress_prints_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    train(tiny_config(), runs_root=tmp_path, show_progress=False)
    assert "train " not in capsys.readouterr().out


def test_the_final_model_is_validated_once_more_when_the_last_step_did_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    run = train(
        tiny_config(total_timesteps=48, eval_every=32), runs_root=tmp_path, show_progress=True
    )
    last = capsys.readouterr().out.splitlines()[-1]
    assert re.fullmatch(r"final validation: val speed-up \d+\.\d{3}x \(best \d+\.\d{3}x\)", last)
    with (run / "metrics.csv").open() as f:
        assert [r["timesteps"] for r in csv.DictReader(f) if r["kind"] == "val"] == ["32", "48"]
