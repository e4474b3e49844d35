"""``python -m graphopt.warmup``: each part runs its paths; a failing part is reported, exit 1."""

from __future__ import annotations

import pytest

from graphopt import warmup


def test_a_part_runs_in_this_process(capsys: pytest.CaptureFixture[str]) -> None:
    assert warmup.main(["--part", "placement"]) == 0
    assert "graphopt.warmup: placement in" in capsys.readouterr().out


def test_a_failing_part_is_reported(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken() -> None:
        raise RuntimeError("no such graph")

    monkeypatch.setitem(warmup.PARTS, "placement", broken)
    assert warmup.main(["--part", "placement"]) == 1
    assert "part placement failed: no such graph" in capsys.readouterr().err


def test_an_unknown_part_is_refused() -> None:
    with pytest.raises(SystemExit) as e:
        warmup.main(["--part", "gpu"])
    assert e.value.code == 2
