"""``graphopt/Fusion-v0``: Operator fusion: which ops are fused into their consumers."""

from __future__ import annotations

from envs.one_shot import COMMON_SECTIONS, GraphOptEnv


class FusionEnv(GraphOptEnv):
    """Operator fusion: which ops are fused into their consumers.

    ## Description

    Placement and priorities are fixed to the per-graph reference (the best placement and
    scheduling heuristics); the agent sets a fusion bit per op. An op with bit 1 is merged with all
    of its consumers into one kernel; fusion that makes the kernel graph cyclic is illegal (an
    invalid decision).

    ## Action Space

    ``MultiDiscrete([2] * max_ops)``; padding entries are ignored.

    """

    __doc__ = (__doc__ or "") + COMMON_SECTIONS

    task = "fusion"
