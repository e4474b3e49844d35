"""``graphopt/Joint-v0``: Joint placement, scheduling and fusion."""

from __future__ import annotations

from envs.one_shot import COMMON_SECTIONS, GraphOptEnv


class JointEnv(GraphOptEnv):
    """Joint placement, scheduling and fusion.

    ## Description

    The agent makes all three decisions for every op at once.

    ## Action Space

    ``MultiDiscrete([D] * max_ops + [P] * max_ops + [2] * max_ops)``: the first ``max_ops`` entries
    are devices, the next ``max_ops`` priority levels, the last ``max_ops`` fusion bits; padding
    entries are ignored.

    """

    __doc__ = (__doc__ or "") + COMMON_SECTIONS

    task = "joint"
