"""``graphopt/Placement-v0``: Device placement: on which device each op runs."""

from __future__ import annotations

from envs.one_shot import COMMON_SECTIONS, GraphOptEnv


class PlacementEnv(GraphOptEnv):
    """Device placement: on which device each op runs.

    ## Description

    The agent places every op of a computation graph on one of the cluster's ``D`` devices at
    once (GO, Zhou et al. 2020). Ops run in topological order on each device without fusion; the
    simulator (or another cost model) prices the placement.

    ## Action Space

    ``MultiDiscrete([D] * max_ops)``: the device of each op slot; entries of padding slots are
    ignored.

    """

    __doc__ = (__doc__ or "") + COMMON_SECTIONS

    task = "placement"
