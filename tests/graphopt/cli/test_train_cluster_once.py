"""``graphopt train --cluster``: the cluster is resolved once, by the option's check, and that
Cluster is the one the run's configuration (and so every environment) holds."""

from __future__ import annotations

from typing import Any

import pytest

import graphopt.hardware
import graphopt.train.config
import graphopt.train.trainer
from graphopt import cli
from graphopt.hardware import Cluster


class Stop(Exception):
    """Ends the command where training would begin."""


def test_train_resolves_its_cluster_once(monkeypatch: pytest.MonkeyPatch) -> None:
    resolved: list[Cluster] = []
    real = graphopt.hardware.get_cluster

    def counting(spec: Any) -> Cluster:
        cluster = real(spec)
        if not isinstance(spec, Cluster):
            resolved.append(cluster)
        return cluster

    seen: list[Cluster] = []

    def fake_train(config: Any, **kwargs: Any) -> None:
        config = config.replace(cost_model="simulator", total_timesteps=8)  # as train() may
        seen.append(config.resolved_cluster)
        raise Stop

    monkeypatch.setattr(graphopt.hardware, "get_cluster", counting)
    monkeypatch.setattr(graphopt.train.config, "get_cluster", counting)
    monkeypatch.setattr(graphopt.train.trainer, "train", fake_train)
    with pytest.raises(Stop):
        cli.main(["train", "--cluster", "v100-nvlink-2", "--graphs", "txl-tiny", "--no-progress"])
    assert len(resolved) == 1 and seen == resolved and seen[0] is resolved[0]


def test_an_unknown_preset_is_one_line_naming_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["train", "--cluster", "v100x3"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("graphopt: error: --cluster v100x3: unknown cluster preset 'v100x3'")
    assert "\n" not in err
