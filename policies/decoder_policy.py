"""``GODecoderPolicy``: the GO network steering a decoder, as a Stable-Baselines3 policy.

For the one-shot environments made with a decoder (``decoder="heft"`` or ``"heft-lc"``,
:mod:`envs.one_shot`), whose action is ``C`` real numbers per op slot
(:func:`graphopt.decoders.decision.channels`). The network is
:class:`~policies.go_network.GONetwork` (GraphSAGE, segment attention, FiLM, the hint) with the
task's heads and ``outputs`` real outputs per op; the mean action is

- ``affinity:d``: the placement head's score of device ``d`` (device-agnostic or not; the hinted
  device's bias included, so a released op leans towards the reference's device at first);
- ``shift``, ``gate``, ``priority``, ``fusion``: the real outputs, in that order.

The network also reads the reference decision's schedule (observation key ``op_context``: each
op's slack, wait, transfer and whether it is critical), so it can tell where departing from the
reference may pay. The gate's bias
  starts at :data:`GATE_BIAS`, so at initialisation every op stays on its anchor (the greedy
  decision is the reference) and samples release a few of them.

Actions are drawn from :class:`~policies.gaussian.BatchedGaussian` with one learned
log-standard-deviation per channel kind (``shift``, ``gate``, ``affinity``, ``priority``,
``fusion``), starting at ``log_std_init``. PPO trains it on the reward of the decoded decision.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.type_aliases import Schedule
from torch import Tensor, nn

from graphopt.decoders.decision import channels
from policies.gaussian import GaussianActionDistribution
from policies.go_network import GONetwork
from policies.heads import blocks_of
from policies.sb3_policy import GOPolicy

GATE_BIAS = -1.5
"""Initial mean gate: with ``log_std_init=-0.5`` about one op in 200 is released by a sample."""
KINDS = ("shift", "gate", "affinity", "priority", "fusion")
"""Channel kinds, each with its own learned standard deviation."""


def scalar_channels(task: str) -> tuple[str, ...]:
    """The real outputs per op of ``task``'s decoder: its channels but the device affinities
    (:func:`graphopt.decoders.decision.channels` with no device)."""
    return channels(task, 0)


class GODecoderPolicy(GOPolicy):
    """Actor-critic policy whose actions steer a decoder (module docstring).

    Args:
        observation_space, action_space, lr_schedule, task, graphs, dedup: as
            :class:`~policies.sb3_policy.GOPolicy` (the action space is the decoder env's ``Box``).
        log_std_init: initial log standard deviation of every channel kind (default -0.5).
        **kwargs: the network's hyper-parameters, as for :class:`~policies.sb3_policy.GOPolicy`.
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        lr_schedule: Schedule,
        task: str | None = None,
        graphs: Sequence[Mapping[str, np.ndarray]] | None = None,
        dedup: bool = True,
        log_std_init: float = -0.5,
        **kwargs: Any,
    ) -> None:
        self.initial_log_std = float(log_std_init)
        super().__init__(
            observation_space, action_space, lr_schedule, task, graphs, dedup, **kwargs
        )

    def _blocks(
        self, observation_space: spaces.Dict, action_space: spaces.Space, max_ops: int, task: str
    ) -> dict[str, int]:
        if not isinstance(action_space, spaces.Box) or len(action_space.shape or ()) != 1:
            raise ValueError(
                f"GODecoderPolicy needs the Box action space of a decoder env, got {action_space}"
            )
        size = int(action_space.shape[0])
        scalars = scalar_channels(task)
        if size % max_ops:
            raise ValueError(f"action space of {size} is not a multiple of max_ops={max_ops}")
        num_devices = size // max_ops - len(scalars)
        blocks = blocks_of(task)
        if ("placement" in blocks) != (num_devices > 0) or num_devices < 0:
            raise ValueError(
                f"a {task} decoder action has {len(scalars)} output(s) per op"
                f"{' plus one per device' if 'placement' in blocks else ''}; got {size // max_ops}"
            )
        hint = self._hint_space(observation_space)
        levels = int(np.max(hint.high)) + 1 if hint is not None else 2
        sizes = {"placement": num_devices, "scheduling": max(levels, 2), "fusion": 2}
        self.num_devices = num_devices
        self.scalars = scalars
        self.channels = channels(task, num_devices)
        """The action's channels, in order (``affinity:d`` from the placement head)."""
        return {b: sizes[b] for b in blocks}

    @staticmethod
    def _hint_space(observation_space: spaces.Dict) -> spaces.Box | None:
        hint = observation_space.spaces.get("hint")
        return hint if isinstance(hint, spaces.Box) else None

    def _build_network(self) -> None:
        space = self.observation_space
        assert isinstance(space, spaces.Dict)
        context = space.spaces.get("op_context")
        width = int(context.shape[-1]) if context is not None and context.shape else 0
        if self.graphs is not None and "op_context" in self.graphs[0]:  # obs_mode="id"
            width = int(np.asarray(self.graphs[0]["op_context"]).shape[-1])
        self.network = GONetwork(
            self.num_classes,
            self.network_settings,
            context_features=width,
            outputs=len(self.scalars),
        )
        head = self.network.output_head
        assert head is not None
        nn.init.normal_(head.weight, std=0.01)
        nn.init.zeros_(head.bias)
        if "gate" in self.scalars:
            with torch.no_grad():
                head.bias[self.scalars.index("gate")] = GATE_BIAS
        self.kinds = [
            k for k in KINDS if k in self.scalars or (k == "affinity" and self.num_devices)
        ]
        self.log_std = nn.Parameter(torch.full((len(self.kinds),), self.initial_log_std))
        self.action_dist = GaussianActionDistribution()

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data["log_std_init"] = self.initial_log_std
        return data

    def channel_log_std(self) -> Tensor:
        """``(C,)`` log standard deviation of every channel, in the action's channel order."""
        order = [self.kinds.index(name.split(":")[0]) for name in self.channels]
        return self.log_std[torch.tensor(order, device=self.log_std.device)]

    def means(self, logits: dict[str, Tensor]) -> Tensor:
        """``(G, C, M)`` mean action from the network's outputs, in the action's channel order."""
        outputs = logits["outputs"]  # (G, M, S)
        parts = [
            logits["placement"][..., int(name.split(":")[1])]
            if name.startswith("affinity:")
            else outputs[..., self.scalars.index(name)]
            for name in self.channels
        ]
        return torch.stack(parts, dim=1)

    def _distribution(  # type: ignore[override]
        self, logits: dict[str, Tensor], mask: Tensor, index: Tensor | None
    ) -> GaussianActionDistribution:
        dist = GaussianActionDistribution()
        return dist.proba_distribution(self.means(logits), self.channel_log_std(), mask, index)
