"""``graphopt/Placeto-v0``: Placeto's episodes, one node placed per step in topological order.

Placeto (Addanki et al., NeurIPS 2019, "Placeto: Learning Generalizable Device Placement
Algorithms for Distributed Machine Learning") improves a placement iteratively: an episode visits
every node once in a fixed order; at each step the policy sees the graph with the current
placement and picks a device for the visited node; the reward is the improvement of the step time
that move made. The placement-edit environment (:mod:`envs.placement_edit`) does not fit: it
offers a few candidate moves chosen by an estimate, in no fixed order, so Placeto has its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from gymnasium import spaces
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import breadth_first_order

from envs.base import GraphEnv, check_action, episode_end
from envs.rewards import reward
from graphopt import encoding
from graphopt.graph import CompGraph
from graphopt.typing import Decision, Measurement

PARALLEL, ANCESTOR, DESCENDANT, CURRENT = 0, 1, 2, 3
"""The values of the observation's ``relation``: each op's relation to the visited node."""
STARTS = ("random", "single", "reference")


class PlacetoEnv(GraphEnv):
    """Placeto's iterative placement: one node per step, in topological order.

    ## Description

    An episode starts from a placement (``start``) and visits the ops of one graph in
    topological order, one per step; the action is the visited op's device. Each step's reward is
    the improvement the move made (Placeto's incremental reward), so an episode's return is the
    improvement from the start placement to the final one.

    ## Action Space

    ``Discrete(D)``: the device of the visited op.

    ## Observation Space

    The graph's encoding (:mod:`graphopt.encoding`: ``op_features``, ``op_type``, ``op_mask``,
    ``edge_index``, ``edge_features``, ``device_features``, ``device_mask``,
    ``graph_features``, ``counts``) and the state of the episode:

    | key | shape | content |
    |-----|-------|---------|
    | placement | (max_ops,) int64 | the current device of every op; -1 in padding |
    | visited | (max_ops,) int8 | 1 for the ops placed so far in this episode |
    | relation | (max_ops,) int8 | to the visited op: 3 itself, 1 an ancestor, 2 a descendant, 0 neither (parallel, and padding) |

    ## Rewards

    With ``R(t)`` the reward of step time ``t`` in ``reward_mode`` (:mod:`envs.rewards`, against
    the reference's time), the step that changes the placement from ``p`` to ``p'`` earns
    ``R(t(p')) - R(t(p))``: each step is one cost-model call, and the return telescopes to
    ``R(t(final)) - R(t(start))``. The final step's ``info`` carries ``step_time``, ``valid``,
    ``reason``, ``reference_time``, ``speedup``, ``graph`` and ``episode_return``.

    ## Starting State

    ``reset`` draws a graph uniformly with ``self.np_random`` (``options={"graph": i}`` picks
    graph ``i``) and the start placement: ``random`` (each op on a device drawn uniformly;
    default), ``single`` (every op on device 0) or ``reference`` (the best heuristic's). The
    start is priced once: an episode of ``N`` ops makes ``N + 1`` cost-model calls
    (``single`` and ``reference`` are priced once per graph and cached).

    ## Episode End

    ``terminated`` after the last op's step; never ``truncated``.

    ## Arguments

    - ``graphs``, ``cluster``, ``cost_model``, ``reward_mode``, ``reference``: as for
      ``graphopt/Placement-v0``.
    - ``max_ops`` / ``max_edges``: padding sizes (default: the largest graph; ``4 * max_ops``).
    - ``start``: ``random``, ``single`` or ``reference``.
    - ``seed``: seeds the first ``reset``.

    ## Version History

    - v0: initial version.
    """

    task = "placement-edit"
    variant = "placeto"

    takes = ("reward_mode", "reference", "max_ops", "max_edges")

    def __init__(
        self, *args: Any, start: str = "random", seed: int | None = None, **shared: Any
    ) -> None:
        super().__init__(*args, **shared)
        if start not in STARTS:
            raise ValueError(f"unknown start {start!r}; choose one of: {', '.join(STARTS)}")
        self.start = start
        self._pad()
        self._encoded = [
            encoding.encode(g, self.cluster, self.max_ops, self.max_edges) for g in self.graphs
        ]
        self._adjacency: dict[int, tuple[csr_matrix, csr_matrix]] = {}
        self._fixed_starts: dict[int, tuple[np.ndarray, Measurement]] = {}
        devices = self.cluster.num_devices
        self.action_space: spaces.Space = spaces.Discrete(devices)
        space = encoding.observation_space(self.max_ops, self.max_edges)
        self.observation_space = spaces.Dict(
            {
                **space.spaces,
                "placement": spaces.Box(-1, devices - 1, (self.max_ops,), np.int64),
                "visited": spaces.Box(0, 1, (self.max_ops,), np.int8),
                "relation": spaces.Box(0, CURRENT, (self.max_ops,), np.int8),
            }
        )
        self.placement = np.zeros(0, dtype=np.int64)
        """The current placement of the episode's graph."""
        self.cursor = 0
        """The op visited next (topological index)."""
        self._return = 0.0
        self._last: Measurement | None = None
        if seed is not None:
            self.reset(seed=seed)

    def settings(self) -> dict[str, Any]:
        """Keyword arguments of :func:`envs.make_env` that recreate this environment."""
        return {
            **super().settings(),
            "variant": self.variant,
            "start": self.start,
        }

    # ------------------------------------------------------------------ state
    def _graph(self) -> CompGraph:
        return self.graphs[self._current]

    def relation(self, index: int, op: int) -> np.ndarray:
        """``(max_ops,)`` int8: every op's relation to ``op`` in graph ``index`` (the values
        :data:`ANCESTOR`, :data:`DESCENDANT`, :data:`CURRENT`, :data:`PARALLEL`)."""
        adjacency = self._adjacency.get(index)
        if adjacency is None:
            g = self.graphs[index]
            ones = np.ones(g.num_edges, dtype=np.int8)
            down = csr_matrix((ones, (g.edge_src, g.edge_dst)), shape=(g.num_ops, g.num_ops))
            adjacency = (down, down.T.tocsr())
            self._adjacency[index] = adjacency
        out = np.zeros(self.max_ops, dtype=np.int8)
        out[breadth_first_order(adjacency[1], op, directed=True, return_predecessors=False)] = (
            ANCESTOR
        )
        out[breadth_first_order(adjacency[0], op, directed=True, return_predecessors=False)] = (
            DESCENDANT
        )
        out[op] = CURRENT
        return out

    def _observation(self) -> dict[str, np.ndarray]:
        n = self._graph().num_ops
        obs = {k: v.copy() for k, v in self._encoded[self._current].observation.items()}
        placement = np.full(self.max_ops, -1, dtype=np.int64)
        placement[:n] = self.placement
        visited = np.zeros(self.max_ops, dtype=np.int8)
        visited[: self.cursor] = 1
        op = min(self.cursor, n - 1)
        obs.update(placement=placement, visited=visited, relation=self.relation(self._current, op))
        return obs

    def _placed(self, placement: np.ndarray, op: int, device: int) -> np.ndarray:
        """``placement`` with ``op`` on ``device``, keeping the placement constraints
        (:mod:`graphopt.constraints`): the op takes its enforced colocation group (its block,
        under ``contiguous: true``) along, and a device that some moved op may not use, or a
        move that puts the stages on a cycle, leaves the placement as it is."""
        rules = self.constraints(self._current)
        out = placement.copy()
        if not rules.active:
            out[op] = device
            return out
        members = rules.members(op)
        if rules.choices(members)[device]:
            out[members] = device
        if rules.contiguous and rules.violations(out[None])[0]:
            return placement.copy()  # the stages would form a cycle (contiguous: true)
        return out

    def _start(self) -> tuple[np.ndarray, Measurement | None]:
        """The start placement of the current graph and, when cached, its measurement (projected
        onto the allowed devices, :mod:`graphopt.constraints`)."""
        n = self._graph().num_ops
        if self.start == "random":
            drawn = self.np_random.integers(self.cluster.num_devices, size=n)
            rules = self.constraints(self._current)
            return (rules.project(drawn) if rules.active else drawn), None
        cached = self._fixed_starts.get(self._current)
        if cached is None:
            if self.start == "single":  # device 0, where the constraints allow it
                rules = self.constraints(self._current)
                placement = np.zeros(n, dtype=np.int64)
                placement = rules.project(placement) if rules.active else placement
            else:
                ref = self.reference(self._current).decision.filled(n).placement
                assert ref is not None
                placement = np.asarray(ref, dtype=np.int64)
            cached = (placement, self._measure(placement))
            self._fixed_starts[self._current] = cached
        return cached[0].copy(), cached[1]

    def _measure(self, placement: np.ndarray) -> Measurement:
        return self.cost_model.evaluate(self._graph(), self.cluster, Decision(placement=placement))

    def _score(self, m: Measurement) -> float:
        ref = self.reference(self._current).measurement.step_time
        return reward(self.reward_mode, m.step_time, m.valid, ref)

    # ------------------------------------------------------------------ gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Draw a graph and the start placement; the first op is visited first."""
        super().reset(seed=seed)
        self._pick(options)
        placement, measured = self._start()
        self.placement = placement.astype(np.int64)
        self.cursor = 0
        self._return = 0.0
        self._last = measured
        graph = self._graph()
        return self._observation(), {"graph": graph.name, "num_ops": graph.num_ops}

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """Place the visited op on device ``action``; the reward is the improvement it made."""
        self._check_reset()
        graph = self._graph()
        if self.cursor >= graph.num_ops:
            raise ValueError("the episode is over (every op was visited): call reset()")
        device = check_action(action, self.cluster.num_devices, "a device")
        if self._last is None:  # a random start: priced on the first step
            self._last = self._measure(self.placement)
        before = self._last
        moved = self._placed(self.placement, self.cursor, device)
        changed = bool((moved != self.placement).any())
        self.placement = moved
        after = self._measure(self.placement) if changed else before
        r = self._score(after) - self._score(before)
        self._return += r
        self._last = after
        self.cursor += 1
        done = self.cursor >= graph.num_ops
        info: dict[str, Any] = {"graph": graph.name}
        if done:
            ref = self.reference(self._current).measurement.step_time
            info.update(episode_end(after.step_time, after.valid, ref, self._return))
            info["reason"] = after.reason
        return self._observation(), r, done, False, info

    def rollout(
        self, act: Callable[[dict[str, np.ndarray]], int], index: int, seed: int = 0
    ) -> Decision:
        """The placement a policy reaches on graph ``index`` in one episode (``act(obs) ->
        device``), with no cost-model call: only the rewards need one, and a rollout has none.
        Deterministic for a deterministic ``act`` and ``seed``."""
        super().reset(seed=seed)
        self._pick({"graph": index})
        n = self._graph().num_ops
        self.placement = self._start()[0].astype(np.int64)
        self.cursor = 0
        while self.cursor < n:
            device = check_action(act(self._observation()), self.cluster.num_devices, "a device")
            self.placement = self._placed(self.placement, self.cursor, device)
            self.cursor += 1
        self._last = None
        return Decision(placement=self.placement.copy())
