"""Gymnasium environments for graphopt's placement, scheduling, fusion and joint tasks.

Importing this package registers four ids with ``gymnasium``::

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
from envs.scheduling import SchedulingEnv

ENV_IDS = {
    "placement": "graphopt/Placement-v0",
    "scheduling": "graphopt/Scheduling-v0",
    "fusion": "graphopt/Fusion-v0",
    "joint": "graphopt/Joint-v0",
}

for _task, _cls in (
    ("placement", PlacementEnv),
    ("scheduling", SchedulingEnv),
    ("fusion", FusionEnv),
    ("joint", JointEnv),
):
    if ENV_IDS[_task] not in registry:
        register(id=ENV_IDS[_task], entry_point=f"{_cls.__module__}:{_cls.__name__}")

__all__ = ["ENV_IDS", "FusionEnv", "GraphOptEnv", "JointEnv", "PlacementEnv", "SchedulingEnv"]
