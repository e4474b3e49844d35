"""``graphopt/StepPlacement-v0``: placement one op per step, inside the list scheduler.

Description:
    GO's placement head made state-aware (DOPPLER, Decima and L2D decide this way): an episode
    places every op of one graph, one op per step, in the order the list scheduler takes them
    (the ready op of highest upward rank, :mod:`graphopt.decoders.stepwise`). The observation
    shows the partial schedule as the features of each candidate device; the agent picks the
    device. The graph's own encoding (for the GO encoder, computed once per graph rather than per
    step) is :meth:`StepPlacementEnv.encoded_graph`; the observation names the graph and the op.

Action Space:
    ``Discrete(D)``: the device of the op (``D`` the cluster's devices). A device the mask
    forbids (placement constraints, an enforced colocation group placed elsewhere, no room for
    the op's parameters) is never used: the op goes to the reference's device instead, and
    ``info["masked_action"]`` is True.

Observation Space:
    ================  =================================  =====================================
    key               shape, dtype                       content
    ================  =================================  =====================================
    ``graph``         (1,) int64                         index of the episode's graph
    ``op``            (1,) int64                         index of the op to place
    ``candidates``    (MAX_DEVICES, F) float32           per device, :data:`SCHEDULE_FEATURES`;
                                                         0 beyond the cluster's devices
    ``action_mask``   (MAX_DEVICES,) int8                1 where the op may go
    ================  =================================  =====================================

Rewards:
    Per step, minus the growth of the bound on the step time that the placed ops imply
    (:func:`graphopt.decoders.stepwise.commit`), over the reference's step time ``t_ref``. The
    last step adds the difference between that bound (the decoder's own step time) and the
    simulated step time ``t`` of the whole placement, plus 1, so that an episode's return is
    ``1 - t / t_ref`` (an invalid placement scores as if ``t = 16 t_ref``): the speed-up over
    the best heuristic, summed step by step (L2D's shaping).

Starting State:
    Nothing placed; the graph drawn uniformly from ``graphs`` (or ``options["graph"]``).

Episode End:
    Terminated when every op is placed (``N`` steps); never truncated. The last ``info`` holds
    ``step_time``, ``valid``, ``reference_time``, ``speedup``, ``episode_return`` and
    ``placement``.

Arguments:
    graphs, cluster, cost_model, seed: as every graphopt environment (:class:`envs.base.GraphEnv`);
    reference: the placement the ``anchor`` feature marks and the rewards divide by
    (``"best"``: the best heuristic); contention: the decoder's link-contention model.

Version History:
    v0: first version.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from envs.base import GraphEnv, check_action, episode_end
from envs.rewards import INVALID
from graphopt.decoders.stepwise import (
    NUM_FEATURES,
    StepGraph,
    candidates,
    commit,
    new_state,
    next_op,
    step_graph,
)
from graphopt.encoding import MAX_DEVICES, EncodedGraph, encode
from graphopt.typing import Decision

ENV_ID = "graphopt/StepPlacement-v0"


class StepPlacementEnv(GraphEnv):
    """Placement one op per step (module docstring)."""

    task = "placement"

    takes = ("reference",)

    def __init__(
        self, *args: Any, contention: bool = True, seed: int | None = None, **shared: Any
    ) -> None:
        super().__init__(*args, **shared)
        num_dev = self.cluster.num_devices
        if num_dev > MAX_DEVICES:
            raise ValueError(
                f"cluster {self.cluster.name!r} has {num_dev} devices; at most {MAX_DEVICES} "
                "are supported"
            )
        self.contention = bool(contention)
        most = max(g.num_ops for g in self.graphs)
        self.observation_space = spaces.Dict(
            {
                "graph": spaces.Box(0, max(len(self.graphs) - 1, 1), (1,), np.int64),
                "op": spaces.Box(0, max(most - 1, 1), (1,), np.int64),
                "candidates": spaces.Box(-np.inf, np.inf, (MAX_DEVICES, NUM_FEATURES), np.float32),
                "action_mask": spaces.Box(0, 1, (MAX_DEVICES,), np.int8),
            }
        )
        self.action_space = spaces.Discrete(num_dev)
        self._steps: dict[int, StepGraph] = {}
        self._encoded: dict[int, EncodedGraph] = {}
        self._state: Any = None
        self._feat = np.zeros((num_dev, NUM_FEATURES), dtype=np.float32)
        self._mask = np.zeros(num_dev, dtype=np.bool_)
        self._op = -1
        self._placed = 0
        self._return = 0.0
        if seed is not None:
            self.reset(seed=seed)

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "contention": self.contention}

    def step_graph(self, index: int) -> StepGraph:
        """The decoder's arrays of graph ``index``, anchored at its reference (cached)."""
        sg = self._steps.get(index)
        if sg is None:
            placement = self.reference(index).decision.filled(self.graphs[index].num_ops).placement
            sg = step_graph(self.graphs[index], self.cluster, placement, contention=self.contention)
            self._steps[index] = sg
        return sg

    def encoded_graph(self, index: int) -> EncodedGraph:
        """Graph ``index`` encoded for the GO encoder (unpadded; cached)."""
        enc = self._encoded.get(index)
        if enc is None:
            g = self.graphs[index]
            enc = self._encoded[index] = encode(g, self.cluster, g.num_ops, max(g.num_edges, 1))
        return enc

    def _observe(self) -> dict[str, np.ndarray]:
        cand = np.zeros((MAX_DEVICES, NUM_FEATURES), dtype=np.float32)
        mask = np.zeros(MAX_DEVICES, dtype=np.int8)
        if self._op >= 0:
            sg = self.step_graph(self._current)
            candidates(self._op, sg.arrays, self._state, self._feat, self._mask)
            cand[: len(self._feat)] = self._feat
            mask[: len(self._mask)] = self._mask
        return {
            "graph": np.array([self._current], dtype=np.int64),
            "op": np.array([max(self._op, 0)], dtype=np.int64),
            "candidates": cand,
            "action_mask": mask,
        }

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        index = self._pick(options)
        sg = self.step_graph(index)
        self._state = new_state(sg.arrays)
        self._placed = 0
        self._return = 0.0
        self._op = next_op(self._state) if sg.num_ops else -1
        graph = self.graphs[index]
        return self._observe(), {"graph": graph.name, "num_ops": graph.num_ops}

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        self._check_reset()
        if self._op < 0:
            raise ValueError("the episode has ended (every op is placed): call reset()")
        sg = self.step_graph(self._current)
        device = check_action(action, sg.num_devices, "a device")
        info: dict[str, Any] = {"masked_action": not bool(self._mask[device])}
        if info["masked_action"]:
            device = int(sg.anchor[self._op])
            if not self._mask[device]:
                device = int(np.flatnonzero(self._mask)[0])
        ref_time = self.reference(self._current).measurement.step_time
        growth = commit(self._op, device, sg.arrays, self._state)
        reward = -growth / ref_time
        self._placed += 1
        done = self._placed == sg.num_ops
        if done:
            placement = self._state[0].copy()
            m = self.cost_model.evaluate(sg.graph, self.cluster, Decision(placement=placement))
            t = m.step_time if m.valid else INVALID * ref_time
            bound = float(self._state[17][1])
            reward += (bound - t) / ref_time + 1.0
            self._op = -1
            self._return += reward
            info.update(episode_end(m.step_time, m.valid, ref_time, self._return))
            info["placement"] = placement
        else:
            self._op = next_op(self._state)
            self._return += reward
        return self._observe(), float(reward), done, False, info
