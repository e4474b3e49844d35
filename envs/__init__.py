"""Gymnasium environments for graphopt's placement, scheduling, fusion and joint tasks.

Importing this package registers five ids with ``gymnasium``: the four one-shot tasks and
``graphopt/PlacementEdit-v0`` (:mod:`envs.placement_edit`: placement improved one move at a time)::

    import gymnasium as gym
    import envs  # noqa: F401

    env = gym.make("graphopt/Placement-v0", graphs="suite:tiny", cluster="v100-nvlink-4")

Keyword arguments of ``gym.make`` go to :class:`envs.base.GraphOptEnv` (graphs, cluster,
cost_model, reward_mode, max_ops, max_edges, num_priorities, reference, obs_mode, seed).
"""

from __future__ import annotations

from gymnasium.envs.registration import register, registry

from envs.base import GraphOptEnv
from envs.fusion import FusionEnv
from envs.joint import JointEnv
from envs.placement import PlacementEnv
from envs.placement_edit import PlacementEditEnv
from envs.scheduling import SchedulingEnv

ENV_IDS = {
    "placement": "graphopt/Placement-v0",
    "scheduling": "graphopt/Scheduling-v0",
    "fusion": "graphopt/Fusion-v0",
    "joint": "graphopt/Joint-v0",
}
"""The one-shot tasks' ids (one decision for every op, one step)."""
EDIT_ENV_ID = "graphopt/PlacementEdit-v0"
"""The multi-step placement task's id (:mod:`envs.placement_edit`)."""

for _id, _cls in (
    (ENV_IDS["placement"], PlacementEnv),
    (ENV_IDS["scheduling"], SchedulingEnv),
    (ENV_IDS["fusion"], FusionEnv),
    (ENV_IDS["joint"], JointEnv),
    (EDIT_ENV_ID, PlacementEditEnv),
):
    if _id not in registry:
        register(id=_id, entry_point=f"{_cls.__module__}:{_cls.__name__}")

__all__ = [
    "EDIT_ENV_ID",
    "ENV_IDS",
    "FusionEnv",
    "GraphOptEnv",
    "JointEnv",
    "PlacementEditEnv",
    "PlacementEnv",
    "SchedulingEnv",
]
