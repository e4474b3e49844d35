"""The step-wise run configuration (:mod:`graphopt.train.step_run`)."""

from __future__ import annotations

from default_sources import default_sources


def test_the_cluster_default_is_the_one_default_cluster():
    # one home: StepRunConfig.clusters reads DEFAULT_CLUSTER, as TrainConfig and EnvSettings do
    import graphopt.train.step_run as step_run
    from graphopt.hardware import DEFAULT_CLUSTER

    assert default_sources(step_run, "StepRunConfig")["clusters"] == "DEFAULT_CLUSTER"
    assert step_run.StepRunConfig().clusters == DEFAULT_CLUSTER
