"""``graphopt/SchedulingEdit-v0``, ``graphopt/FusionEdit-v0``, ``graphopt/JointEdit-v0``: a
decision improved one simulated move at a time, the policy choosing which move to try.

The placement-edit environment (:mod:`envs.placement_edit`) prices its candidate moves with an
analytic estimate; for priorities and fusion there is none, so here every step tries one move in
the simulator (one call) and keeps it only if the step gets faster: a hill climb whose proposal
distribution is the policy. What the policy sees of each candidate is what the schedule of the
current decision says about its op (:mod:`graphopt.sim.critical`: whether it is on the critical
path, its slack, how long it waited for its device, its share of the step), so it can learn
which moves pay on graphs it never saw; an episode of ``K - 1`` steps costs exactly ``K``
simulator calls (the start's included), the budget of annealing it is compared with.
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import numpy as np
from gymnasium import spaces

from envs.base import EditEnv, GraphEnv, check_action, episode_end
from envs.placement_edit import CLIP, percent_gain, symlog
from envs.rewards import reward
from graphopt.baselines.search import placement_groups
from graphopt.encoding import encode, observation_space
from graphopt.sim import PreparedGraph, Simulator, Timeline
from graphopt.sim.critical import ScheduleTimes, timeline_times
from graphopt.sim.fusion_rules import fusion_mask
from graphopt.typing import Decision, IntArray, Measurement

FAMILIES = ("priority", "fusion", "placement", "group")
"""Kinds of move:

- ``priority``: promote a kernel that waited for its device ahead of the first kernel that ran
  there while it was ready (its root op's priority is set just below that kernel's, priorities
  kept as ranks ``0..N-1``);
- ``fusion``: flip one op's fusion bit (among the ops the fusion mask allows; only flips that
  keep the decision legal are offered);
- ``placement``: move one op alone in its kernel (nothing fused to it) to another device;
- ``group``: move several ops to one other device, as annealing does: half of the time a
  colocation group, else a layer (:func:`graphopt.baselines.search.placement_groups`), else a
  run of ``2 .. max(2, N // D)`` ops in topological order (only moves that keep the fusion legal
  are offered).

Placement and group moves that would break a placement constraint (an op on a device kind it
may not use, an enforced colocation group split: :mod:`graphopt.constraints`) are never
offered; the rows they would have filled stay empty."""

FEATURES = (
    "prior",  # symlog of the move's promise, % of the step (wait or fused time of a critical op)
    "is_priority",  # the move's family, one-hot (all 0: an empty row)
    "is_fusion",
    "is_placement",
    "is_group",
    "critical",  # 1 when the op (a group: any of its ops) is on the critical path
    "slack",  # symlog of its slack (a group: the least of its ops'), % of the step
    "duration",  # symlog of its kernel's time (a group: its ops' total), % of the step
    "wait",  # symlog of how long it waited for its device, % of the step
    "transfer",  # symlog of the time of its output's transfers, % of the step
    "fused",  # its fusion bit now
    "tried",  # 1 when this move was tried (and rejected) since the decision last changed
    "gained",  # symlog of the gain since the start of the episode, %
    "progress",  # steps made / horizon
)
"""Per-row features of the observation, in column order; column 0 is the prior that an untrained
:class:`~policies.move_policy.MovePolicy` follows (a critical-path hill climb)."""


OP_STATE = (
    "critical",  # 1 on the critical path of the current schedule
    "slack",  # symlog of its slack, % of the step
    "wait",  # symlog of how long it waited for its device, % of the step
    "duration",  # symlog of its kernel's time, % of the step
    "transfer",  # symlog of the time of its output's transfers, % of the step
    "fused",  # its fusion bit
    "device_load",  # busy time of its device / step
)
"""Per-op state of the current decision, for ``obs_mode="graph"``: what the schedule says of
every op (padding slots 0), beside the graph's static encoding (:mod:`graphopt.encoding`)."""
OBS_MODES = ("rows", "graph")
"""``rows``: the candidates' rows only (:data:`FEATURES`), for :class:`~policies.MovePolicy`;
``graph``: also the encoded graph and :data:`OP_STATE`, for a graph network that scores each
candidate by its op's embedding (:class:`~policies.go_move_policy.GOMovePolicy`)."""


class Move(NamedTuple):
    """One candidate move: ``family`` an index into :data:`FAMILIES`, ``op`` the op moved (a
    group's first op), ``value``: the op whose kernel it is promoted ahead of (priority), the new
    fusion bit, or the new device; ``run``: for a group move, 0 for ``op``'s colocation group or
    layer, else the length of the run of ops ``op .. op + run - 1`` (topological order) moved."""

    family: int
    op: int
    value: int
    run: int = 0


def ranks(priority: IntArray) -> IntArray:
    """Priorities as ranks ``0..N-1`` that order the ops as ``priority`` does (ties by
    topological index, as in the simulator): the same schedule, and room to insert anywhere."""
    order = np.lexsort((np.arange(len(priority)), np.asarray(priority)))
    out = np.empty(len(priority), dtype=np.int64)
    out[order] = np.arange(len(priority))
    return out


def promote(priority: IntArray, op: int, ahead_of: int) -> IntArray:
    """Ranks with ``op`` moved to just ahead of ``ahead_of`` (both keep their relative order to
    every other op; a new array)."""
    key = np.asarray(priority, dtype=float).copy()
    key[op] = key[ahead_of] - 0.5
    return ranks(key)


class DecisionEditEnv(EditEnv):
    """A decision improved one simulated move at a time (module docstring).

    ## Description

    An episode starts from the reference decision (the best heuristic chain of the task) and
    makes ``horizon`` steps. At each step the environment draws ``candidates`` moves of the
    task's families (:data:`FAMILIES`; each slot's family uniformly, slots a family cannot fill
    going to the others) with ``self.np_random``; the agent picks one; the environment simulates the moved decision and
    keeps it when it is valid and faster (or the current one is invalid), else keeps the current
    one and marks the move ``tried``.

    ## Action Space

    ``Discrete(C)``: try candidate ``i``. An empty row (fewer legal moves than ``C``) costs a
    step but no simulator call.

    ## Observation Space

    ``Box(-100, 100, (C, 14), float32)``: a row per candidate, columns :data:`FEATURES`; always
    finite. With ``obs_mode="graph"`` a ``Dict``: the encoded graph of
    :func:`graphopt.encoding.observation_space` (padded to ``max_ops`` / ``max_edges``),
    ``op_state`` ``(max_ops, 7)`` (:data:`OP_STATE`), ``rows`` (the box above) and ``row_op``
    ``(C,)``, each row's op (a group's first op; 0 for an empty row).

    ## Rewards

    ``reward_scale`` times the change in the task reward (:mod:`envs.rewards`) of the best
    decision: 0 for a rejected move, so an episode's return telescopes to
    ``reward_scale * (reward(final) - reward(start))``. ``info`` carries ``calls`` (simulator
    calls so far, the start's included) and ``moves`` (accepted) at every step, and
    ``step_time``, ``valid``, ``reference_time``, ``speedup``, ``episode_return`` at the last.

    ## Starting State

    ``reset`` draws a graph uniformly (``options={"graph": i}`` picks graph ``i``) and simulates
    its reference decision (one call).

    ## Episode End

    ``terminated`` after ``horizon`` steps; ``truncated`` is always False.

    ## Arguments

    - ``graphs``, ``cluster``, ``reward_mode``, ``reference``, ``seed``: as for
      ``graphopt/Placement-v0``.
    - ``cost_model``: the simulator (default); the features need its schedules, so no other cost
      model is accepted.
    - ``candidates``: moves offered per step ``C`` (default 16).
    - ``horizon``: steps per episode (default 64).
    - ``reward_scale``: multiplies the reward (default 100: percent).
    - ``obs_mode``: ``"rows"`` (default) or ``"graph"`` (:data:`OBS_MODES`).
    - ``max_ops``, ``max_edges``: the padding of ``obs_mode="graph"`` (default: the graphs'
      largest; a larger graph is refused by :func:`graphopt.encoding.encode`).

    ## Version History

    - v0: initial version.
    """

    families: ClassVar[tuple[str, ...]] = ()

    takes = EditEnv.takes + ("max_ops", "max_edges")

    def __init__(
        self, *args: Any, obs_mode: str = "rows", seed: int | None = None, **shared: Any
    ) -> None:
        super().__init__(*args, **shared)
        if not isinstance(self.cost_model, Simulator):
            raise ValueError(
                f"the {self.task} environment reads the simulator's schedules; it takes no other "
                f"cost model (got {type(self.cost_model).__name__}): use cost_model: simulator"
            )
        self.sim: Simulator = self.cost_model
        self.action_space = spaces.Discrete(self.candidates)
        rows = spaces.Box(-CLIP, CLIP, (self.candidates, len(FEATURES)), np.float32)
        if obs_mode not in OBS_MODES:
            raise ValueError(
                f"unknown obs_mode {obs_mode!r}; choose one of: {', '.join(OBS_MODES)}"
            )
        self.obs_mode = obs_mode
        self._pad(zero_is_default=True)
        self.observation_space: spaces.Space = rows
        self._encoded: list[dict[str, np.ndarray]] = []
        if obs_mode == "graph":
            # every graph encoded now: a graph larger than max_ops fails here (encode says so)
            self._encoded = [
                encode(g, self.cluster, self.max_ops, self.max_edges).observation
                for g in self.graphs
            ]
            self.observation_space = spaces.Dict(
                {
                    **observation_space(self.max_ops, self.max_edges).spaces,
                    "op_state": spaces.Box(-CLIP, CLIP, (self.max_ops, len(OP_STATE)), np.float32),
                    "rows": rows,
                    "row_op": spaces.Box(0, self.max_ops - 1, (self.candidates,), np.int64),
                }
            )
        self._fusible: dict[int, IntArray] = {}
        self._groups: dict[int, IntArray] = {}
        self._cand: list[Move] = []
        if seed is not None:
            self.reset(seed=seed)

    def settings(self) -> dict[str, Any]:
        """Keyword arguments of :func:`envs.make_env` that recreate this environment."""
        return {
            **super().settings(),
            "obs_mode": self.obs_mode,
        }

    # ------------------------------------------------------------------ state
    def _prepared(self) -> PreparedGraph:
        return self.sim.prepare(self.graphs[self._current], self.cluster)

    def _start(self, index: int, horizon: int | None = None) -> None:
        self._current = index
        graph = self.graphs[index]
        n = graph.num_ops
        if index not in self._fusible:
            self._fusible[index] = np.flatnonzero(fusion_mask(graph))
            self._groups[index] = placement_groups(graph, by_layer=True)
        ref = self.reference(index)
        d = ref.decision
        self.placement: IntArray = np.asarray(
            d.placement if d.placement is not None else np.zeros(n), dtype=np.int64
        ).copy()
        self.priority: IntArray = ranks(
            np.asarray(d.priority if d.priority is not None else np.zeros(n), dtype=np.int64)
        )
        self.fusion: IntArray = np.asarray(
            d.fusion if d.fusion is not None else np.zeros(n), dtype=np.int64
        ).copy()
        self._episode_horizon = self.horizon if horizon is None else int(horizon)
        self._steps = 0
        self.calls = 1
        """Simulator calls in this episode, the start's included."""
        self.moves = 0
        """Moves kept in this episode."""
        self._set(*self._prepared().evaluate_timeline(self._decision()))
        self._start_time = self._m.step_time
        self._ref_time = ref.measurement.step_time
        self._reward = reward(self.reward_mode, self._m.step_time, self._m.valid, self._ref_time)
        self._return = 0.0

    def _decision(
        self,
        placement: IntArray | None = None,
        priority: IntArray | None = None,
        fusion: IntArray | None = None,
    ) -> Decision:
        return Decision(
            placement=self.placement if placement is None else placement,
            priority=self.priority if priority is None else priority,
            fusion=self.fusion if fusion is None else fusion,
        )

    def _set(self, m: Measurement, timeline: Timeline | None) -> None:
        """Make ``m`` and ``timeline`` (of the current arrays) the current ones; forget the
        tried moves."""
        self._m = m
        self._times: ScheduleTimes | None = None
        if timeline is not None:
            self._times = timeline_times(self.graphs[self._current], self.placement, timeline)
        self._tried: set[Move] = set()

    def decision(self) -> Decision:
        """The current (best) decision, copied."""
        return Decision(
            placement=self.placement.copy(),
            priority=self.priority.copy(),
            fusion=self.fusion.copy(),
        )

    @property
    def measurement(self) -> Measurement:
        """The simulator's measurement of the current decision."""
        return self._m

    # ------------------------------------------------------------------ moves
    def _moves_of(self, family: str, count: int) -> list[Move]:
        """Up to ``count`` distinct moves of ``family`` drawn for the current decision."""
        rng = self.np_random
        graph = self.graphs[self._current]
        times = self._times
        f = FAMILIES.index(family)
        out: list[Move] = []
        if count < 1:
            return out
        if family == "priority":
            if times is None:
                return out
            roots = np.flatnonzero((times.root == np.arange(graph.num_ops)) & (times.wait > 0))
            for op in rng.permutation(roots)[: 4 * count].tolist():
                ahead = self._overtaker(op)
                if ahead >= 0:
                    out.append(Move(f, op, ahead))
                    if len(out) == count:
                        break
            return out
        if family == "fusion":
            rules = self._prepared().rules
            fusible = self._fusible[self._current]
            for op in rng.permutation(fusible)[: 2 * count].tolist():
                fusion = self.fusion.copy()
                fusion[op] ^= 1
                if rules.violation(self.placement, fusion)[0] == 0:
                    out.append(Move(f, op, int(fusion[op])))
                    if len(out) == count:
                        break
            return out
        d = self.cluster.num_devices
        if d < 2 or times is None:
            return out
        if family == "group":
            n = graph.num_ops
            groups = self._groups[self._current]
            sizes = np.bincount(groups)
            firsts = np.flatnonzero(sizes[groups] > 1)
            firsts = rng.permutation(firsts[np.unique(groups[firsts], return_index=True)[1]])
            longest = max(2, n // d)
            rules = self._prepared().rules
            for k in range(2 * count):
                shift = int(rng.integers(d - 1) + 1)
                if k % 2 == 0 and k // 2 < len(firsts):
                    op = int(firsts[k // 2])
                    move = Move(f, op, int((self.placement[op] + shift) % d))
                else:
                    length = int(rng.integers(2, longest + 1))
                    op = int(rng.integers(max(n - length + 1, 1)))
                    move = Move(f, op, int((self.placement[op] + shift) % d), min(length, n - op))
                placement = self._moved(move)[0]
                if self.fusion.any() and rules.violation(placement, self.fusion)[0] != 0:
                    continue
                if self._breaks(placement):
                    continue
                out.append(move)
                if len(out) == count:
                    break
            return out
        # only ops alone in their kernel move: fusion never crosses devices (rule 2c)
        alone = np.flatnonzero(np.bincount(times.kernel)[times.kernel] == 1)
        for op in rng.choice(alone, min(count, len(alone)), replace=False).tolist():
            new = (self.placement[op] + 1 + rng.integers(d - 1)) % d
            move = Move(f, op, int(new))
            if not self._breaks(self._moved(move)[0]):
                out.append(move)
        return out

    def _breaks(self, placement: IntArray) -> bool:
        """Whether ``placement`` breaks a placement constraint (never when there are none)."""
        rules = self._prepared().constraints
        return rules is not None and bool(rules.violations(placement[None])[0])

    def _overtaker(self, op: int) -> int:
        """The root of the first kernel that started on ``op``'s device while ``op``'s kernel
        was ready and waiting, or -1."""
        t = self._times
        assert t is not None
        dev = self.placement[op]
        same = (self.placement == dev) & (t.root == np.arange(len(t.root)))
        ran = np.flatnonzero(same & (t.start >= t.ready[op]) & (t.start < t.start[op]))
        if len(ran) == 0:
            return -1
        return int(ran[np.argmin(t.start[ran])])

    def _draw(self) -> np.ndarray:
        """Draw the next candidates and return the observation: each of the ``C`` slots goes to
        a family drawn uniformly, each family draws its moves, and slots a family cannot fill
        go to the others."""
        rng = self.np_random
        c = self.candidates
        slots = rng.integers(0, len(self.families), c)
        cand: list[Move] = []
        seen: set[Move] = set()
        for j, name in enumerate(self.families):
            for move in self._moves_of(name, int((slots == j).sum())):
                if move not in seen:
                    seen.add(move)
                    cand.append(move)
        for name in self.families:
            if len(cand) >= c:
                break
            for move in self._moves_of(name, c - len(cand)):
                if move not in seen and len(cand) < c:
                    seen.add(move)
                    cand.append(move)
        self._cand = cand
        return self._observe(self._features(cand))

    def _observe(self, rows: np.ndarray) -> Any:
        """The observation: ``rows``, or with ``obs_mode="graph"`` the encoded graph, each op's
        state in the current schedule (:data:`OP_STATE`), the rows and each row's op."""
        if self.obs_mode == "rows":
            return rows
        row_op = np.zeros(self.candidates, dtype=np.int64)
        row_op[: len(self._cand)] = [m.op for m in self._cand]
        return {
            **self._encoded[self._current],
            "op_state": self._op_state(),
            "rows": rows,
            "row_op": row_op,
        }

    def _op_state(self) -> np.ndarray:
        """``(max_ops, len(OP_STATE))`` float32 (module docstring of :data:`OP_STATE`)."""
        out = np.zeros((self.max_ops, len(OP_STATE)), dtype=np.float32)
        t = self._times
        n = self.graphs[self._current].num_ops
        if t is None or t.step <= 0:
            return out
        scale = 100.0 / t.step

        def clip(x: np.ndarray) -> np.ndarray:
            return np.clip(np.nan_to_num(x, nan=0.0, posinf=CLIP, neginf=-CLIP), -CLIP, CLIP)

        load = np.asarray(self._m.busy_time, dtype=float)[self.placement] * scale
        columns = (
            t.critical(1e-6).astype(float),
            symlog(clip(t.slack * scale)),
            symlog(clip(t.wait * scale)),
            symlog(clip((t.end - t.start) * scale)),
            symlog(clip(t.transfer * scale)),
            self.fusion.astype(float),
            clip(load / 100.0),
        )
        out[:n] = np.stack(columns, axis=1)
        return out

    def _features(self, cand: list[Move]) -> np.ndarray:
        col = {name: j for j, name in enumerate(FEATURES)}
        out = np.zeros((self.candidates, len(FEATURES)), dtype=np.float32)
        out[:, col["prior"]] = -CLIP  # empty rows
        gained = float(percent_gain(self._start_time, self._m.step_time))
        out[:, col["gained"]] = symlog(np.clip(np.nan_to_num(gained), -CLIP, CLIP))
        out[:, col["progress"]] = self._steps / max(self._episode_horizon, 1)
        t = self._times
        if not cand or t is None or t.step <= 0:
            for i, move in enumerate(cand):
                out[i, col["prior"]] = 0.0
                out[i, col["is_priority"] + move.family] = 1.0
            return out
        scale = 100.0 / t.step
        ops = np.array([m.op for m in cand])
        fam = np.array([m.family for m in cand])
        crit_op = t.critical(1e-6)
        crit = crit_op[ops].astype(float)
        slack = t.slack[ops] * scale
        wait = t.wait[ops] * scale
        duration = (t.end - t.start)[ops] * scale
        for i in np.flatnonzero(fam == FAMILIES.index("group")).tolist():
            members = self._members(cand[i])
            crit[i] = float(crit_op[members].any())
            slack[i] = t.slack[members].min() * scale
            duration[i] = (t.end - t.start)[members].sum() * scale
        rows = np.arange(len(cand))
        fuse = (fam == FAMILIES.index("fusion")) & (np.array([m.value for m in cand]) == 1)
        promise = np.where(fam == FAMILIES.index("priority"), wait, 0.0) + np.where(
            fuse, duration, 0.0
        )

        def clip(x: np.ndarray) -> np.ndarray:
            return np.clip(np.nan_to_num(x, nan=0.0, posinf=CLIP, neginf=-CLIP), -CLIP, CLIP)

        out[rows, col["prior"]] = symlog(clip(crit * promise))
        out[rows, col["is_priority"] + fam] = 1.0
        out[rows, col["critical"]] = crit
        out[rows, col["slack"]] = symlog(clip(slack))
        out[rows, col["duration"]] = symlog(clip(duration))
        out[rows, col["wait"]] = symlog(clip(wait))
        out[rows, col["transfer"]] = symlog(clip(t.transfer[ops] * scale))
        out[rows, col["fused"]] = self.fusion[ops]
        out[rows, col["tried"]] = [float(m in self._tried) for m in cand]
        return out

    def _moved(self, move: Move) -> tuple[IntArray, IntArray, IntArray]:
        placement, priority, fusion = self.placement, self.priority, self.fusion
        family = FAMILIES[move.family]
        if family == "priority":
            priority = promote(priority, move.op, move.value)
        elif family == "fusion":
            fusion = fusion.copy()
            fusion[move.op] = move.value
        elif family == "placement":
            placement = placement.copy()
            placement[move.op] = move.value
        else:
            placement = placement.copy()
            placement[self._members(move)] = move.value
        return placement, priority, fusion

    def _members(self, move: Move) -> np.ndarray:
        """``(N,)`` bool: the ops a group move moves."""
        if move.run:
            members = np.zeros(self.graphs[self._current].num_ops, dtype=bool)
            members[move.op : move.op + move.run] = True
            return members
        groups = self._groups[self._current]
        return groups == groups[move.op]

    def _try(self, action: Any) -> bool:
        """Try candidate ``action``: simulate it and keep it when faster; True if kept.

        Raises:
            ValueError: ``action`` is not one integer in ``0..candidates-1``
                (:func:`envs.base.check_action`).
        """
        action = check_action(action, self.candidates, "a candidate row")
        self._steps += 1
        if action >= len(self._cand):
            return False  # an empty row: nothing to try
        move = self._cand[action]
        placement, priority, fusion = self._moved(move)
        m, timeline = self._prepared().evaluate_timeline(
            self._decision(placement, priority, fusion), describe=False
        )
        self.calls += 1
        better = m.valid and (not self._m.valid or m.step_time < self._m.step_time)
        if not better:
            self._tried.add(move)
            return False
        self.placement, self.priority, self.fusion = placement, priority, fusion
        self._set(m, timeline)
        self.moves += 1
        return True

    # ------------------------------------------------------------------ gymnasium API
    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Try the chosen move, keep it if faster, draw the next candidates."""
        self._check_reset()
        graph = self.graphs[self._current]
        r = 0.0
        if self._try(action):
            new = reward(self.reward_mode, self._m.step_time, self._m.valid, self._ref_time)
            r = self.reward_scale * (new - self._reward)
            self._reward = new
        self._return += r
        done = self._steps >= self._episode_horizon
        info: dict[str, Any] = {"graph": graph.name, "moves": self.moves, "calls": self.calls}
        if done:
            m = self._m
            info.update(episode_end(m.step_time, m.valid, self._ref_time, self._return))
        return self._draw(), r, done, False, info

    # ------------------------------------------------------------------ acting
    def rollout(
        self, act: Any, index: int, seed: int = 0, calls: int | None = None
    ) -> tuple[Decision, Measurement, int]:
        """The best decision a policy reaches on graph ``index`` in one episode of ``calls``
        simulator calls (default: ``horizon + 1``; the progress column counts against it), with
        its measurement and the calls spent: ``act(obs) -> action``. Deterministic for a
        deterministic ``act`` and ``seed``.

        Raises:
            ValueError: ``calls`` below 1.
        """
        if calls is not None and calls < 1:
            raise ValueError(f"calls must be >= 1, got {calls}")
        steps = self.horizon if calls is None else calls - 1
        # Seed only: EditEnv.reset would also start an episode on a drawn graph, drawing from
        # the generator the rollout's own candidates come from.
        GraphEnv.reset(self, seed=seed)
        self._pick({"graph": index})
        self._start(index, horizon=steps)
        obs = self._draw()
        for _ in range(steps):
            self._try(act(obs))
            obs = self._draw()
        return self.decision(), self._m, self.calls


class SchedulingEditEnv(DecisionEditEnv):
    """``graphopt/SchedulingEdit-v0``: priority moves only (:class:`DecisionEditEnv`)."""

    task = "scheduling-edit"
    families = ("priority",)


class FusionEditEnv(DecisionEditEnv):
    """``graphopt/FusionEdit-v0``: fusion flips only (:class:`DecisionEditEnv`)."""

    task = "fusion-edit"
    families = ("fusion",)


class JointEditEnv(DecisionEditEnv):
    """``graphopt/JointEdit-v0``: priority, fusion, placement and group moves
    (:class:`DecisionEditEnv`)."""

    task = "joint-edit"
    families = FAMILIES
