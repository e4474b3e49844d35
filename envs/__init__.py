"""Gymnasium environments for graphopt's placement, scheduling, fusion and joint tasks.

Importing this package registers the id of every task of :data:`graphopt.tasks.TASKS`: the four
one-shot tasks (:mod:`envs.one_shot`), ``graphopt/PlacementEdit-v0``
(:mod:`envs.placement_edit`: placement improved one move at a time, priced by an analytic
estimate) and the scheduling, fusion and joint edit tasks (:mod:`envs.decision_edit`: one
simulated move per step)::

    import gymnasium as gym
    import envs  # noqa: F401

    env = gym.make("graphopt/Placement-v0", graphs="suite:tiny", cluster="v100-nvlink-4")

In code, :func:`make_env` builds the environment of a task by name.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gymnasium.envs.registration import register, registry

from envs.base import GraphEnv, GraphSpec
from envs.decision_edit import DecisionEditEnv, FusionEditEnv, JointEditEnv, SchedulingEditEnv
from envs.fusion import FusionEnv
from envs.joint import JointEnv
from envs.one_shot import GraphOptEnv
from envs.placement import PlacementEnv
from envs.placement_edit import PlacementEditEnv
from envs.scheduling import SchedulingEnv
from graphopt.hardware import Cluster
from graphopt.tasks import TASKS, get_task
from graphopt.typing import CostModel

ENV_CLASSES: dict[str, Callable[..., GraphEnv]] = {
    cls.task: cls
    for cls in (
        PlacementEnv,
        SchedulingEnv,
        FusionEnv,
        JointEnv,
        PlacementEditEnv,
        SchedulingEditEnv,
        FusionEditEnv,
        JointEditEnv,
    )
}
"""The environment class of every task."""

for _name, _cls in ENV_CLASSES.items():
    if TASKS[_name].env_id not in registry:
        register(id=TASKS[_name].env_id, entry_point=f"{_cls.__module__}:{_cls.__name__}")


def make_env(
    task: str,
    graphs: GraphSpec,
    cluster: str | Path | Cluster,
    *,
    cost_model: CostModel | None = None,
    seed: int | None = None,
    **settings: Any,
) -> GraphEnv:
    """The environment of ``task`` on ``graphs`` and ``cluster``.

    Args:
        settings: the task's other arguments (``reward_mode``, ``reference``; ``max_ops``,
            ``max_edges``, ``num_priorities``, ``obs_mode``, ``hint`` for the one-shot tasks;
            ``candidates``, ``horizon``, ``reward_scale`` for the edit tasks), as
            ``env.settings()`` returns them.

    Raises:
        ValueError: an unknown task, or a setting the task does not take.
    """
    cls = ENV_CLASSES[get_task(task).name]
    taken = set(inspect.signature(cls).parameters) - {"graphs", "cluster", "cost_model", "seed"}
    unknown = sorted(set(settings) - taken)
    if unknown:
        raise ValueError(
            f"the {task} environment takes no setting {', '.join(unknown)}; "
            f"it takes: {', '.join(sorted(taken))}"
        )
    return cls(graphs=graphs, cluster=cluster, cost_model=cost_model, seed=seed, **settings)


__all__ = [
    "ENV_CLASSES",
    "DecisionEditEnv",
    "FusionEditEnv",
    "FusionEnv",
    "GraphEnv",
    "GraphOptEnv",
    "JointEditEnv",
    "JointEnv",
    "PlacementEditEnv",
    "PlacementEnv",
    "SchedulingEditEnv",
    "SchedulingEnv",
    "make_env",
]
