"""``graphopt/Scheduling-v0``: Operation scheduling: the priority of each op among the ready ops of its device."""

from __future__ import annotations

from envs.one_shot import COMMON_SECTIONS, GraphOptEnv


class SchedulingEnv(GraphOptEnv):
    """Operation scheduling: the priority of each op among the ready ops of its device.

    ## Description

    The placement is fixed to the per-graph reference placement (the best placement heuristic);
    the agent sets a priority level for every op. Among ready ops on a device the lowest level runs
    first, ties by topological index.

    ## Action Space

    ``MultiDiscrete([P] * max_ops)`` with ``P = num_priorities``; padding entries are ignored.

    """

    __doc__ = (__doc__ or "") + COMMON_SECTIONS

    task = "scheduling"
