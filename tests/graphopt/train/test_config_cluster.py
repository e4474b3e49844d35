"""The cluster of a training configuration is resolved once: given by the caller, or by
:meth:`TrainConfig.validate`, and carried over by :meth:`TrainConfig.replace`."""

from __future__ import annotations

import pytest

from graphopt.hardware import get_cluster
from graphopt.train.config import TrainConfig, load_config


def test_a_cluster_resolved_by_the_caller_is_kept() -> None:
    cluster = get_cluster("v100-nvlink-2")
    config = load_config(cluster="v100-nvlink-2", resolved_cluster=cluster)
    assert config.resolved_cluster is cluster
    assert load_config(resolved_cluster=cluster).resolved_cluster is not cluster  # no override


def test_replace_carries_the_cluster_unless_it_changes() -> None:
    config = TrainConfig(cluster="v100-nvlink-2").validate()
    longer = config.replace(total_timesteps=99)
    assert longer.total_timesteps == 99 and config.total_timesteps == 20000
    assert longer.resolved_cluster is config.resolved_cluster
    other = config.replace(cluster="v100-nvlink-4")
    assert other.resolved_cluster.num_devices == 4
    with pytest.raises(ValueError, match="unknown cluster preset 'v100x3'"):
        config.replace(cluster="v100x3")
