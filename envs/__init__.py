"""Gymnasium environments for graphopt's placement, scheduling, fusion and joint tasks.

Importing this package registers the id of every task of :data:`graphopt.tasks.TASKS`: the four
one-shot tasks (:mod:`envs.one_shot`), ``graphopt/PlacementEdit-v0``
(:mod:`envs.placement_edit`: placement improved one move at a time, priced by an analytic
estimate) and the scheduling, fusion and joint edit tasks (:mod:`envs.decision_edit`: one
simulated move per step), and ``graphopt/StepPlacement-v0`` (:mod:`envs.step_placement`: placement
one op per step inside the list scheduler)::

    import gymnasium as gym
    import envs  # noqa: F401

    env = gym.make("graphopt/Placement-v0", graphs="suite:tiny", cluster="v100-nvlink-4")

In code, :func:`make_env` builds the environment of a task by name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gymnasium.envs.registration import register, registry

from envs.base import GraphEnv, GraphSpec
from envs.decision_edit import DecisionEditEnv, FusionEditEnv, JointEditEnv, SchedulingEditEnv
from envs.fusion import FusionEnv
from envs.hierarchical import HierarchicalPlacementEnv
from envs.joint import JointEnv
from envs.one_shot import GraphOptEnv
from envs.placement import PlacementEnv
from envs.placement_edit import PlacementEditEnv
from envs.placeto import PlacetoEnv
from envs.scheduling import SchedulingEnv
from envs.settings import EnvSettings
from envs.step_placement import ENV_ID as STEP_PLACEMENT_ID
from envs.step_placement import StepPlacementEnv
from graphopt.hardware import Cluster
from graphopt.tasks import TASKS, get_task
from graphopt.typing import CostModel

ENV_CLASSES: dict[str, type[GraphEnv]] = {
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

VARIANTS: dict[str, tuple[str, type[GraphEnv], str]] = {
    "hierarchical": ("placement", HierarchicalPlacementEnv, "graphopt/HierarchicalPlacement-v0"),
    "placeto": ("placement-edit", PlacetoEnv, "graphopt/Placeto-v0"),
}
"""The environments of the learned baselines (``variant`` of :func:`make_env`): the task whose
decision each makes, its class and its Gymnasium id."""

for _task, _cls, _id in VARIANTS.values():
    if _id not in registry:
        register(id=_id, entry_point=f"{_cls.__module__}:{_cls.__name__}")

if STEP_PLACEMENT_ID not in registry:  # placement one op per step: envs.step_placement
    register(id=STEP_PLACEMENT_ID, entry_point="envs.step_placement:StepPlacementEnv")


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
        settings: ``variant`` (``hierarchical`` or ``placeto``: the environment of a learned
            baseline, :data:`VARIANTS`, for its task), then the task's other arguments (``reward_mode``, ``reference``; ``max_ops``,
            ``max_edges``, ``num_priorities``, ``obs_mode``, ``hint`` for the one-shot tasks;
            ``candidates``, ``horizon``, ``reward_scale`` for the edit tasks), as
            ``env.settings()`` returns them (the shared ones are the fields of
            :class:`~envs.settings.EnvSettings`).

    Raises:
        ValueError: an unknown task, or a setting the task does not take.
    """
    cls = ENV_CLASSES[get_task(task).name]
    variant = settings.pop("variant", None)
    if variant is not None:
        if variant not in VARIANTS or VARIANTS[variant][0] != get_task(task).name:
            known = ", ".join(f"{v} (task {t})" for v, (t, _, _) in VARIANTS.items())
            raise ValueError(f"no environment variant {variant!r} for task {task}; known: {known}")
        cls = VARIANTS[variant][1]
    taken = cls.setting_names()
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
    "EnvSettings",
    "FusionEditEnv",
    "FusionEnv",
    "GraphEnv",
    "GraphOptEnv",
    "HierarchicalPlacementEnv",
    "JointEditEnv",
    "JointEnv",
    "PlacementEditEnv",
    "PlacementEnv",
    "PlacetoEnv",
    "SchedulingEditEnv",
    "SchedulingEnv",
    "StepPlacementEnv",
    "VARIANTS",
    "make_env",
]
