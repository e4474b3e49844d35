"""``graphopt/HierarchicalPlacement-v0``: placement decided as groups of ops and a device per group.

The environment of HDP (Mirhoseini et al., ICLR 2018, "A Hierarchical Model for Device
Placement"), whose policy makes two choices: a grouper puts every op in one of ``G`` groups, and
a placer puts every group on a device. Both are sampled, and both enter the policy's
log-probability, so the action carries both; the placement is ``device[group[op]]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from envs.base import check_action_values
from envs.one_shot import COMMON_SECTIONS
from envs.placement import PlacementEnv
from graphopt.typing import Decision


class HierarchicalPlacementEnv(PlacementEnv):
    """Device placement through groups: which group each op joins, which device each group takes.

    ## Description

    As ``graphopt/Placement-v0`` (one decision for the whole graph, priced by the cost model),
    with HDP's two-level action: ``G`` groups, each op assigned to one, each group placed on one
    of the ``D`` devices; op ``i`` runs on ``device[group[i]]``. An empty group's device changes
    nothing.

    ## Action Space

    ``MultiDiscrete([G] * max_ops + [D] * G)``: the group of each op slot (entries of padding
    slots are ignored), then the device of each group.

    The observation's ``hint`` is all ``-1`` (HDP starts from no reference decision); the
    reference still sets the reward.

    """

    __doc__ = (__doc__ or "") + COMMON_SECTIONS

    variant = "hierarchical"

    def __init__(
        self, *args: Any, groups: int = 16, seed: int | None = None, **shared: Any
    ) -> None:
        if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups < 1:
            raise ValueError(f"groups must be an integer >= 1, got {groups!r}")
        self.groups = int(groups)
        super().__init__(*args, hint=False, seed=None, **shared)
        devices = self.cluster.num_devices
        self.nvec = np.concatenate(
            [np.full(self.max_ops, self.groups, np.int64), np.full(self.groups, devices, np.int64)]
        )
        self.action_space = spaces.MultiDiscrete(self.nvec)
        high = int(self.nvec.max()) - 1
        hint_space = spaces.Box(-1, high, (len(self.nvec),), np.int64)
        self.observation_space = spaces.Dict({**self.observation_space.spaces, "hint": hint_space})
        if seed is not None:
            self.reset(seed=seed)

    def settings(self) -> dict[str, Any]:
        """Keyword arguments of :func:`envs.make_env` that recreate this environment."""
        out = super().settings()
        for key in ("num_priorities", "obs_mode", "hint", "decoder", "decoder_anchor"):
            out.pop(key)
        return {**out, "variant": self.variant, "groups": self.groups}

    def hint_action(self, index: int) -> np.ndarray:
        """All ``-1``: no hint (HDP learns from nothing)."""
        return np.full(len(self.nvec), -1, dtype=np.int64)

    def decode(self, action: np.ndarray) -> Decision:
        """The placement ``device[group[op]]`` of the current graph (padding ignored).

        Raises:
            ValueError: an action of the wrong shape, not integers, or out of range.
        """
        layout = (
            f"a group per op slot, max_ops={self.max_ops}, then a device per group, "
            f"groups={self.groups}"
        )
        a = check_action_values(action, self.nvec, layout)
        n = self.graphs[self._current].num_ops
        group = a[:n].astype(np.int64)
        device = a[self.max_ops :].astype(np.int64)
        rules = self.constraints(self._current)  # onto the allowed devices, as every one-shot env
        placement = device[group]
        return Decision(placement=rules.project(placement) if rules.active else placement)
