"""The step-wise run configuration (:mod:`graphopt.train.step_run`)."""

from __future__ import annotations


def test_the_cluster_default_is_the_one_default_cluster():
    # one home: StepRunConfig.clusters reads DEFAULT_CLUSTER, as TrainConfig and EnvSettings do
    import ast
    import inspect

    import graphopt.train.step_run as step_run
    from graphopt.hardware import DEFAULT_CLUSTER

    tree = ast.parse(inspect.getsource(step_run))
    body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "StepRunConfig")
    defaults = {
        n.target.id: ast.unparse(n.value)
        for n in body.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.value
    }
    assert defaults["clusters"] == "DEFAULT_CLUSTER"
    assert step_run.StepRunConfig().clusters == DEFAULT_CLUSTER
