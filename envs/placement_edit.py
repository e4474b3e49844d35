"""``graphopt/PlacementEdit-v0``: placement improved one move at a time, each move seen in the
analytic estimate before it is made."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from envs.base import EditEnv, check_action, episode_end
from envs.rewards import reward
from graphopt.encoding import symlog
from graphopt.sim.estimate import PlacementEstimate
from graphopt.typing import Decision, FloatArray, IntArray

FEATURES = (
    "gain",  # symlog of the move's vetted estimated gain, % (see vetted_gain; pass: 0)
    "gain_rank",  # rank of that gain among the C + 1 rows: 0 best, 1 worst
    "gain_gap",  # symlog of (gain minus the best gain of the rows), <= 0
    "is_pass",  # 1 for the pass row
    "op_old",  # symlog of the op's time on its current device, % of the current estimate
    "op_new",  # symlog of its time on the candidate device, %
    "load_old",  # busy time of the current device / current estimate
    "load_new",  # busy time of the candidate device / current estimate
    "gained",  # symlog of the estimated gain since the start of the episode, %
    "progress",  # moves made so far / horizon
    "gain_insert",  # symlog of the gain in the insertion schedule, %
    "gain_append",  # symlog of the gain in the append-only schedule, %
)
"""Per-row features of the observation, in column order. Percentages go through
:func:`symlog`: gains that matter are 0.01-1%, losses reach 100%, and a tanh network needs both
in range."""
CLIP = 100.0
"""Percentages are clipped to +-CLIP before the symlog (an unplaceable candidate: -CLIP)."""


def percent_gain(before: float | FloatArray, after: float | FloatArray) -> FloatArray:
    """The estimated gain in %, ``(before - after) * 100 / before``, of going from an estimated
    step time ``before`` to ``after``, where ``inf`` is an estimate whose parameters do not fit:

    - from a placement that fits to one that does not: ``-inf`` (:func:`move_features` makes it
      ``-CLIP``);
    - from one that does not fit to one that does: ``+inf`` (``+CLIP``);
    - between two that do not fit, or from a zero estimate: ``0``, no gain either way.

    Never NaN (``inf - inf`` would be)."""
    before, after = np.asarray(before, float), np.asarray(after, float)
    fits_before, fits_after = np.isfinite(before), np.isfinite(after)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        finite = (before - after) * (100.0 / before)
    gain = np.where(
        fits_before, np.where(fits_after, finite, -np.inf), np.where(fits_after, np.inf, 0.0)
    )
    return np.where(fits_before & (before <= 0), 0.0, gain)


def vetted_gain(insert: FloatArray, append: FloatArray) -> FloatArray:
    """A move's estimated gain from its gains in two schedules: the insertion schedule's gain,
    unless the append-only schedule gets worse, then the smaller of the two (so never > 0).

    The insertion schedule slips ops into idle gaps that the simulator's dispatch (ready ops in
    priority order, no look-ahead) does not leave; the append-only schedule has no gaps at all
    and delays ready ops behind earlier ones instead. A move only one of them likes is one the
    simulator often dislikes: on the 15 graphs of the default suite and the torch/PipeDream
    imports outside the evaluation graphs, taking the best vetted move instead of the best
    insertion-schedule move lifts the geometric-mean speed-up over the best heuristic from 0.991
    to 1.016 (3 seeds; ``bench/bench_edit.py``, columns ``insert`` and ``rule``)."""
    insert, append = np.asarray(insert, float), np.asarray(append, float)
    return np.where(append >= 0, insert, np.minimum(insert, append))


def move_features(
    gains: FloatArray,
    op_old: FloatArray,
    op_new: FloatArray,
    load_old: FloatArray,
    load_new: FloatArray,
    gained: float,
    progress: float,
    insert: FloatArray,
    append: FloatArray,
) -> np.ndarray:
    """The ``(C + 1, len(FEATURES))`` float32 observation from per-candidate figures (each
    ``(C,)``, percentages or shares as in :data:`FEATURES`; ``gains`` the vetted ones, ``insert``
    and ``append`` the two schedules' own); row 0 is the pass row.

    Pure and vectorised, and every entry is finite: gains of ``-inf`` or NaN (a placement whose
    parameters do not fit) become ``-CLIP``, ``+inf`` (one that fits now, where the current one
    does not) ``+CLIP``; so does ``gained``; shares are capped at ``CLIP``.
    """

    def rows(x: FloatArray) -> np.ndarray:
        x = np.nan_to_num(np.asarray(x, float), nan=-CLIP, neginf=-CLIP, posinf=CLIP)
        return np.clip(np.concatenate([[0.0], x]), -CLIP, CLIP)

    c = len(gains)
    g = rows(gains)
    out = np.zeros((c + 1, len(FEATURES)), dtype=np.float32)
    out[:, 0] = symlog(g)
    order = np.argsort(-g, kind="stable")
    rank = np.empty(c + 1)
    rank[order] = np.arange(c + 1)
    out[:, 1] = rank / max(c, 1)
    out[:, 2] = symlog(g - g.max())
    out[0, 3] = 1.0

    def shares(x: FloatArray) -> np.ndarray:
        x = np.nan_to_num(np.asarray(x, float), nan=CLIP, posinf=CLIP, neginf=-CLIP)
        return np.clip(x, -CLIP, CLIP)

    out[1:, 4] = symlog(shares(op_old))
    out[1:, 5] = symlog(shares(op_new))
    out[1:, 6] = shares(load_old)
    out[1:, 7] = shares(load_new)
    out[:, 8] = symlog(rows(np.array([gained]))[1])
    out[:, 9] = progress
    out[:, 10] = symlog(rows(insert))
    out[:, 11] = symlog(rows(append))
    return out


class PlacementEditEnv(EditEnv):
    """Placement improved one move at a time, each candidate move seen in the analytic estimate.

    ## Description

    An episode starts from the reference placement (the best heuristic of the graph) and makes
    ``horizon`` steps. At each step the environment draws ``candidates`` single-op moves (an op,
    uniformly, to another device, uniformly) from ``self.np_random`` and prices every moved
    placement with two analytic schedules, the insertion schedule and the append-only one
    (:class:`graphopt.sim.estimate.PlacementEstimate`, no simulation; their
    gains are combined by :func:`vetted_gain`); the agent picks one move or passes. The observation describes each candidate by what is true of any
    graph (estimated gain, its rank, the op's share of the step, device loads), so a policy can
    transfer to graph families it never saw. The policy needs no simulator call at all to act:
    :meth:`rollout` runs a policy on a graph without one.

    ## Action Space

    ``Discrete(C + 1)``: 0 passes (the placement stays), ``i`` in ``1..C`` makes candidate ``i``.

    Placement constraints (:mod:`graphopt.constraints`): every candidate keeps them, so every
    action is allowed. A drawn op moves with the rest of its enforced colocation group (its
    block, under ``contiguous: true``), to a device (drawn uniformly) that all of them may use;
    an op with no such other device, or a move that puts the stages on a cycle, makes a
    candidate that changes nothing. A start placement given to :meth:`restart` is projected onto
    the allowed devices. Without constraints the candidates are drawn as before.

    ## Observation Space

    ``Box(-100, 100, (C + 1, 12), float32)``: a row per choice, row 0 the pass; columns
    :data:`FEATURES` (percentages of the current estimated step time, shares, progress). Always
    finite, also on graphs where no placement fits: a candidate whose parameters do not fit
    gains ``-CLIP``, one that makes a placement that does not fit fit ``+CLIP``, one between two
    that do not fit 0 (:func:`percent_gain`); op times and loads are then shares of the current
    placement's schedule with memory ignored. The episode still runs, from the reference, which
    is then invalid (``info["valid"]`` says so).

    ## Rewards

    The difference, times ``reward_scale``, between the task reward (:mod:`envs.rewards`,
    ``reward_mode``) of the placement after the step and before it, both priced by the cost
    model (the simulator by default; a pass costs no call): the return of an episode telescopes
    to ``reward_scale * (reward(final) - reward(start))``, with the start the reference, so in
    ``speedup`` mode ``100 * (1 - sqrt(t_final / t_ref))``. ``info`` carries ``step_time``,
    ``valid``, ``reference_time``, ``speedup`` (of the final placement) and ``episode_return``
    at the last step, ``graph`` and ``moves`` (made so far) at every step.

    ## Starting State

    ``reset`` draws a graph uniformly with ``self.np_random`` (``options={"graph": i}`` picks
    graph ``i``), starts from its reference placement and draws the first candidates.

    ## Episode End

    ``terminated`` after ``horizon`` steps (the progress column makes the state Markov);
    ``truncated`` is always False.

    ## Arguments

    - ``graphs``, ``cluster``, ``cost_model``, ``reward_mode``, ``reference``, ``seed``: as for
      ``graphopt/Placement-v0``. The cluster needs at least 2 devices.
    - ``candidates``: moves offered per step ``C`` (default 16).
    - ``horizon``: steps per episode (default 64).
    - ``reward_scale``: multiplies the reward (default 100: percent).

    ## Version History

    - v0: initial version; candidates kept to the placement constraints later (a graph and
      cluster without them: unchanged).
    """

    task = "placement-edit"

    def __init__(self, *args: Any, seed: int | None = None, **shared: Any) -> None:
        super().__init__(*args, **shared)
        if self.cluster.num_devices < 2:
            raise ValueError(
                f"cluster {self.cluster.name} has one device: nothing to move; use a cluster "
                "with at least 2 devices"
            )
        self.action_space = spaces.Discrete(self.candidates + 1)
        self.observation_space = spaces.Box(
            -CLIP, CLIP, (self.candidates + 1, len(FEATURES)), np.float32
        )
        self._estimates: dict[int, tuple[PlacementEstimate, PlacementEstimate]] = {}
        if seed is not None:
            self.reset(seed=seed)

    # ------------------------------------------------------------------ per graph

    def _estimate(self, index: int) -> tuple[PlacementEstimate, PlacementEstimate]:
        """The insertion and the append-only estimate of graph ``index`` (cached)."""
        est = self._estimates.get(index)
        if est is None:
            graph = self.graphs[index]
            est = (
                PlacementEstimate(graph, self.cluster),
                PlacementEstimate(graph, self.cluster, 0),
            )
            self._estimates[index] = est
        return est

    # ------------------------------------------------------------------ moves
    def _start(self, index: int, placement: IntArray | None = None) -> None:
        self._current = index
        graph = self.graphs[index]
        ref = self.reference(index)
        assert ref.decision.placement is not None
        start = ref.decision.placement if placement is None else placement
        self.placement: IntArray = np.array(start, dtype=np.int64)
        rules = self.constraints(index)
        if rules.active:
            self.placement = rules.project(self.placement)
        est, append = self._estimate(index)
        self._op_time = est.op_time  # (N, D) seconds
        self._load = np.zeros(self.cluster.num_devices)
        np.add.at(
            self._load, self.placement, self._op_time[np.arange(graph.num_ops), self.placement]
        )
        self._est = self._start_est = float(est(self.placement[None])[0])
        self._est_append = float(append(self.placement[None])[0])
        self._span = self._schedule_length()
        self._steps = 0
        self._ref_time = ref.measurement.step_time
        valid = bool(ref.measurement.valid)  # False where no heuristic fits the graph
        self._reward = reward(self.reward_mode, self._ref_time, valid, self._ref_time)
        self.moves = 0
        """Moves made in this episode (passes not counted)."""
        self._last = (self._ref_time, valid)  # step time and validity of the current placement
        self._return = 0.0

    def _schedule_length(self) -> float:
        """The current placement's estimate, or where its parameters do not fit (``inf``) its
        schedule with memory ignored: the finite time that op times and loads are shares of."""
        if np.isfinite(self._est):
            return self._est
        return float(self._estimate(self._current)[0].schedule(self.placement[None])[0])

    def _draw(self) -> np.ndarray:
        """Draw the next candidates, estimate them, and return the observation."""
        n, d, c = self.graphs[self._current].num_ops, self.cluster.num_devices, self.candidates
        ops = self.np_random.integers(0, n, c)
        old = self.placement[ops]
        shift = self.np_random.integers(1, d, c)
        new = (old + shift) % d
        moved = np.repeat(self.placement[None], c, axis=0)
        moved[np.arange(c), ops] = new
        rules = self.constraints(self._current)
        if rules.active:  # allowed moves only (Action Space)
            for k, op in enumerate(ops.tolist()):
                members = rules.members(op)
                targets = np.flatnonzero(rules.choices(members))
                targets = targets[targets != old[k]]
                moved[k] = self.placement
                new[k] = targets[(shift[k] - 1) % len(targets)] if len(targets) else old[k]
                moved[k, members] = new[k]
                if rules.contiguous and rules.violations(moved[k][None])[0]:
                    moved[k], new[k] = self.placement, old[k]  # stages on a cycle: no move
        est, append = self._estimate(self._current)
        times, times_append = est(moved), append(moved)
        self._cand = (ops, new, times, times_append, moved)
        # Gains are finite, or +-inf where a placement's parameters do not fit; never NaN.
        insert = percent_gain(self._est, times)
        after = percent_gain(self._est_append, times_append)
        scale = 100.0 / self._span if self._span > 0 else 0.0
        return move_features(
            vetted_gain(insert, after),
            self._op_time[ops, old] * scale,
            self._op_time[ops, new] * scale,
            self._load[old] * scale / 100.0,
            self._load[new] * scale / 100.0,
            float(percent_gain(self._start_est, self._est)),
            self._steps / self.horizon,
            insert,
            after,
        )

    def _apply(self, action: Any) -> bool:
        """Make candidate ``action`` (0: pass); True if the placement changed.

        Raises:
            ValueError: ``action`` is not one integer in ``0..candidates``
                (:func:`envs.base.check_action`).
        """
        action = check_action(action, self.candidates + 1, "0 passes, i makes candidate move i")
        self._steps += 1
        if action == 0:
            return False
        _, _, times, times_append, moved = self._cand
        row = moved[action - 1]
        for op in np.flatnonzero(row != self.placement).tolist():  # one op, or an enforced group
            old, dev = int(self.placement[op]), int(row[op])
            self._load[old] -= self._op_time[op, old]
            self._load[dev] += self._op_time[op, dev]
            self.placement[op] = dev
        self._est = float(times[action - 1])
        self._est_append = float(times_append[action - 1])
        self._span = self._schedule_length()
        self.moves += 1
        return True

    # ------------------------------------------------------------------ gymnasium API
    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Make the chosen move (or pass), price the placement, draw the next candidates."""
        self._check_reset()
        graph = self.graphs[self._current]
        if self._apply(action):
            m = self.cost_model.evaluate(graph, self.cluster, Decision(placement=self.placement))
            self._last = (m.step_time, m.valid)
            new_reward = reward(self.reward_mode, m.step_time, m.valid, self._ref_time)
            r = self.reward_scale * (new_reward - self._reward)
            self._reward = new_reward
        else:
            r = 0.0
        self._return += r
        done = self._steps >= self.horizon
        info: dict[str, Any] = {"graph": graph.name, "moves": self.moves}
        if done:
            step_time, valid = self._last
            info.update(episode_end(step_time, valid, self._ref_time, self._return))
        return self._draw(), r, done, False, info

    # ------------------------------------------------------------------ acting without rewards
    def candidate_placements(self) -> IntArray:
        """``(C, N)``: the placement each current candidate move makes (row ``i`` is action
        ``i + 1``), for a caller that prices them itself (e.g. a batch of simulator calls)."""
        self._check_reset()
        return self._cand[4].copy()

    def restart(self, placement: IntArray) -> np.ndarray:
        """Continue the current graph's episode from ``placement`` (estimates, loads and the
        progress column reset as at the start of an episode; the reference and the episode's
        rewards still count from the graph's reference); returns the observation. No cost-model
        call."""
        self._check_reset()
        placement = np.asarray(placement, dtype=np.int64)
        if placement.shape != (self.graphs[self._current].num_ops,):
            raise ValueError(
                f"placement has shape {placement.shape}; graph {self._current} has "
                f"{self.graphs[self._current].num_ops} ops"
            )
        self._start(self._current, placement)
        return self._draw()

    def advance(self, action: Any) -> np.ndarray:
        """Make candidate ``action`` (0: pass) and draw the next candidates, with no cost-model
        call; returns the next observation. (:meth:`step` does the same and prices the result.)"""
        self._check_reset()
        self._apply(action)
        return self._draw()

    def rollout(self, act: Any, index: int, seed: int = 0) -> Decision:
        """The placement a policy reaches on graph ``index`` in one episode, with no cost-model
        call: ``act(obs) -> action``. Deterministic for a deterministic ``act`` and ``seed``."""
        obs, _ = self.reset(seed=seed, options={"graph": index})
        for _ in range(self.horizon):
            obs = self.advance(act(obs))
        return Decision(placement=self.placement.copy())
