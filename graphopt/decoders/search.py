"""Search over a decoder's inputs, seeded by a network (REGAL-style): simulated annealing whose
state is the per-op outputs ``(C, N)`` that steer :func:`graphopt.decoders.decision.decode`, not
the decision itself, so every state decodes to a coherent decision.

The search starts from ``start`` (the network's greedy outputs; zeros: the reference). A move
draws ``k ~ 1 + Geometric`` ops (mean :data:`MOVE_OPS` of the graph, at least 1) and, for each,
flips its gate (released <-> anchored: ``gate = -gate``, or ``+-1`` near 0) with probability 1/2
and adds ``N(0, sigma^2)`` noise to its other channels. A move is accepted if the decoded decision
is faster, or with the Metropolis probability ``exp(-(log t' - log t) / T)`` under a temperature
falling geometrically from ``t_start`` to ``t_end`` over the budget; the best decision seen is
returned. Each step is one decode and one cost-model call; the network is not called again.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from graphopt.typing import Decision, FloatArray, Measurement

MOVE_OPS = 0.01
"""Mean share of the ops a move changes."""


@dataclass(frozen=True)
class DecoderSearchResult:
    """The best decision found, its outputs and measurement, and the calls spent."""

    outputs: FloatArray
    decision: Decision
    measurement: Measurement
    calls: int
    trace: list[float]
    """Best step time after each call (``inf`` while nothing valid was found)."""


def _key(m: Measurement) -> float:
    return math.log(m.step_time) if m.valid and m.step_time > 0 else math.inf


def decoder_search(
    evaluate: Callable[[FloatArray], tuple[Decision, Measurement]],
    start: FloatArray,
    budget: int,
    *,
    seed: int = 0,
    sigma: float = 1.0,
    gate_channel: int | None = 1,
    t_start: float = 0.003,
    t_end: float = 1e-5,
) -> DecoderSearchResult:
    """Anneal the outputs ``start`` ``(C, N)`` for ``budget`` calls of ``evaluate`` (module
    docstring).

    Args:
        evaluate: outputs -> (decoded decision, its measurement); one cost-model call.
        start: the starting outputs (the network's; counted as the first call).
        budget: cost-model calls, the start's included (>= 1).
        seed: seeds the moves.
        sigma: standard deviation of the noise on non-gate channels.
        gate_channel: the channel whose sign releases an op (placement's ``gate``), or None.
        t_start, t_end: temperatures on ``log`` step time.

    Raises:
        ValueError: ``budget < 1``, a non-2-D start or bad temperatures.
    """
    if budget < 1:
        raise ValueError(f"budget must be >= 1, got {budget}")
    current = np.array(start, dtype=np.float64)
    if current.ndim != 2 or current.shape[1] < 1:
        raise ValueError(f"start must be (channels, ops) with ops >= 1, got {current.shape}")
    if not 0 < t_end <= t_start:
        raise ValueError(f"temperatures must satisfy 0 < t_end <= t_start, got {t_start}, {t_end}")
    rng = np.random.default_rng(seed)
    channels, n = current.shape
    decision, m = evaluate(current)
    cur_key = _key(m)
    best = (current.copy(), decision, m, cur_key)
    trace = [m.step_time if m.valid else math.inf]
    others = [c for c in range(channels) if c != gate_channel]
    p_more = 1.0 - 1.0 / max(1.0, MOVE_OPS * n)  # geometric: mean MOVE_OPS * n ops
    for step in range(1, budget):
        temp = t_start * (t_end / t_start) ** (step / max(1, budget - 1))
        cand = current.copy()
        k = 1 + (int(rng.geometric(1.0 - p_more)) - 1 if p_more > 0 else 0)
        ops = rng.choice(n, size=min(n, k), replace=False)
        if gate_channel is not None:
            flip = ops[rng.random(len(ops)) < 0.5]
            g = cand[gate_channel, flip]
            cand[gate_channel, flip] = np.where(
                np.abs(g) < 0.1, np.sign(rng.normal(size=len(g))), -g
            )
        if others:
            cand[np.ix_(others, ops)] += rng.normal(0.0, sigma, (len(others), len(ops)))
        decision, m = evaluate(cand)
        key = _key(m)
        if key <= cur_key or (
            math.isfinite(key) and rng.random() < math.exp(-(key - cur_key) / temp)
        ):
            current, cur_key = cand, key
            if key < best[3]:
                best = (cand.copy(), decision, m, key)
        trace.append(best[2].step_time if math.isfinite(best[3]) else math.inf)
    return DecoderSearchResult(best[0], best[1], best[2], budget, trace)
