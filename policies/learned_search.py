"""A learned search: the placement-edit policy proposes the moves a hill climb spends its
simulator calls on.

:func:`learned_search` runs on one graph of a :class:`~envs.placement_edit.PlacementEditEnv`,
from the graph's reference placement (its best heuristic), for ``budget`` simulator calls:

1. the environment draws its ``C`` candidate moves and describes each (estimated gain, loads:
   the policy's observation; no simulation);
2. the proposer ranks them: the trained policy by its probability of each move (``ranking =
   "policy"``), or, as the baseline that shows what the policy adds, by the analytic estimate's
   vetted gain alone (``ranking = "estimate"``);
3. the best ``batch`` of them are simulated together (one ``evaluate_batch``, ``batch`` calls);
4. the fastest valid one is made if it beats the current placement, else the round passes; the
   environment then draws new candidates from the (possibly moved) placement.

:func:`rollout_search` spends each call differently: the proposer makes several moves on the
estimate alone, from the best placement so far, and only the placement reached is simulated.

The result is the best placement simulated (the reference when nothing beat it), its measurement
and the calls spent (at most ``budget``; the reference's own measurement is the environment's
and not counted, as for the other searches that start from the best heuristic). The policy
transfers as the edit policy does: it sees only graph-independent features of each move, so it
can propose on graphs and families it never saw; the search learns nothing on the target graph.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from envs.placement_edit import FEATURES
from graphopt.sim import PreparedGraph
from graphopt.typing import Decision, IntArray, Measurement

RANKINGS = ("policy", "estimate")
GAIN = FEATURES.index("gain")


@dataclass(frozen=True)
class LearnedSearchResult:
    decision: Decision
    measurement: Measurement
    calls: int
    moves: int
    history: np.ndarray
    """``(calls,)``: best valid step time after each call."""


def move_probabilities(model: Any, obs: np.ndarray) -> np.ndarray:
    """The policy's probability of each of the ``C + 1`` rows (row 0: pass). The move policy
    reads every row alike (:mod:`policies.move_policy`), so ``C`` may differ from the number of
    candidates it was trained with."""
    tensor = torch.as_tensor(obs[None], dtype=torch.float32, device=model.policy.device)
    with torch.no_grad():
        dist = model.policy.get_distribution(tensor)
    return dist.distribution.probs.cpu().numpy()[0]


def learned_search(
    model: Any,
    env: Any,
    index: int,
    budget: int,
    *,
    batch: int = 1,
    ranking: str = "policy",
    seed: int = 0,
) -> LearnedSearchResult:
    """Hill climbing on graph ``index`` of ``env`` (a placement-edit environment) with the moves
    ranked by ``model`` or by the estimate (module docstring).

    Raises:
        ValueError: ``budget`` or ``batch`` below 1, an unknown ``ranking``, or a model needed
            (``ranking="policy"``) but not given.
    """
    if budget < 1 or batch < 1:
        raise ValueError(f"budget and batch must be >= 1, got {budget} and {batch}")
    _check(model, ranking)
    obs, prepared, best_placement, current = _start(env, index, seed)
    history: list[float] = []
    calls = moves = 0
    while calls < budget:
        score = move_probabilities(model, obs)[1:] if ranking == "policy" else obs[1:, GAIN]
        take = min(batch, budget - calls, len(score))
        order = np.argsort(-score, kind="stable")[:take]
        placements = env.candidate_placements()[order]
        out = prepared.evaluate_batch(placements)
        calls += take
        steps = np.where(out.valid, out.step_time, np.inf)
        for t in steps:
            history.append(min(history[-1] if history else current, float(t)))
        i = int(np.argmin(steps))
        if steps[i] < current:
            current = float(steps[i])
            best_placement = placements[i].copy()
            obs = env.advance(int(order[i]) + 1)
            moves += 1
        else:
            obs = env.advance(0)
    return _result(prepared, best_placement, calls, moves, history)


def rollout_search(
    model: Any,
    env: Any,
    index: int,
    budget: int,
    *,
    moves: int = 16,
    ranking: str = "policy",
    seed: int = 0,
) -> LearnedSearchResult:
    """Iterated rollouts: ``budget`` times, from the best placement so far, the proposer makes
    ``moves`` moves on the analytic estimate alone (each round's best-ranked candidate, or a
    pass when the policy prefers it / no candidate is estimated to gain), and the placement
    reached is simulated once and kept if faster. The candidates are drawn afresh every round
    (``env``'s generator, seeded by ``seed``), so every rollout differs.

    Raises:
        ValueError: as :func:`learned_search`, and ``moves`` below 1.
    """
    if budget < 1 or moves < 1:
        raise ValueError(f"budget and moves must be >= 1, got {budget} and {moves}")
    _check(model, ranking)
    _, prepared, best_placement, current = _start(env, index, seed)
    history: list[float] = []
    made = 0
    for _ in range(budget):
        obs = env.restart(best_placement)
        for _ in range(moves):
            if ranking == "policy":
                action = int(np.argmax(move_probabilities(model, obs)))
            else:
                gains = obs[:, GAIN]
                action = int(np.argmax(gains)) if gains[1:].max() > 0 else 0
            obs = env.advance(action)
        out = prepared.evaluate_batch(env.placement[None])
        t = float(out.step_time[0]) if bool(out.valid[0]) else np.inf
        if t < current:
            current, best_placement = t, env.placement.copy()
            made += 1
        history.append(current)
    return _result(prepared, best_placement, budget, made, history)


def _check(model: Any, ranking: str) -> None:
    """The proposer's checks both searches share (:func:`learned_search`'s ``Raises``)."""
    if ranking not in RANKINGS:
        raise ValueError(f"unknown ranking {ranking!r}; choose one of {', '.join(RANKINGS)}")
    if ranking == "policy" and model is None:
        raise ValueError("ranking='policy' needs a trained placement-edit model")


def _start(env: Any, index: int, seed: int) -> tuple[np.ndarray, PreparedGraph, IntArray, float]:
    """Reset ``env`` on graph ``index``: ``(observation, prepared graph, reference placement, its
    step time or inf when invalid)``."""
    obs, _ = env.reset(seed=seed, options={"graph": index})
    reference = env.reference(index)
    placement = np.array(reference.decision.placement, dtype=np.int64)
    m = reference.measurement
    return (
        obs,
        PreparedGraph(env.graphs[index], env.cluster),
        placement,
        (m.step_time if m.valid else np.inf),
    )


def _result(
    prepared: PreparedGraph, placement: IntArray, calls: int, moves: int, history: list[float]
) -> LearnedSearchResult:
    decision = Decision(placement=placement)
    return LearnedSearchResult(
        decision=decision,
        measurement=prepared.evaluate(decision),
        calls=calls,
        moves=moves,
        history=np.array(history),
    )
