"""Evaluating a step-wise placement policy on graphs it has not seen, beside the baselines.

Modes (each a number of simulator calls per graph):

==================  ===========================================================================
``greedy``          one decode, the head's argmax at every step (1 call): zero-shot
``sample:K``        the greedy decode and ``K - 1`` sampled from the head's softmax, the fastest
                    kept (``K`` calls; never worse than greedy)
``annealing:K``     simulated annealing from the best heuristic (the baseline at equal calls)
==================  ===========================================================================

Every row is a speed-up ``t_ref / t`` over the best heuristic of its (graph, cluster) pair, and
every mode's decision can be saved (:func:`graphopt.decisions.io`-readable JSON through
``graphopt.cli``'s ``--save-decisions``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from graphopt.baselines.search import simulated_annealing
from graphopt.decoders.stepwise import decode
from graphopt.train.stepwise import Item, geomean
from graphopt.typing import Decision
from policies.step_policy import StepPolicy

MODE_KINDS = ("greedy", "sample", "annealing")


def parse_modes(spec: str) -> list[tuple[str, int]]:
    """``"greedy,sample:64,annealing:64"`` as ``[("greedy", 1), ("sample", 64), ...]``.

    Raises:
        ValueError: an unknown mode or a budget that is not an integer in ``[1, 100000]``.
    """
    out = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        kind, _, budget = part.partition(":")
        if kind not in MODE_KINDS:
            raise ValueError(
                f"unknown mode {part!r}; choose greedy, sample:K or annealing:K (K calls)"
            )
        if kind == "greedy":
            if budget:
                raise ValueError("mode greedy takes no budget (it is one decode)")
            out.append((kind, 1))
            continue
        if not budget.isdigit() or not 1 <= int(budget) <= 100_000:
            raise ValueError(f"mode {part!r}: K must be an integer in [1, 100000], e.g. {kind}:64")
        out.append((kind, int(budget)))
    if not out:
        raise ValueError("no method given; e.g. greedy,sample:64")
    return out


@dataclass
class Row:
    """One (graph, cluster) pair's results: speed-up and placement per mode."""

    graph: str
    cluster: str
    ops: int
    reference: str
    reference_time: float
    speedup: dict[str, float] = field(default_factory=dict)
    placement: dict[str, np.ndarray] = field(default_factory=dict)


def evaluate(
    policy: StepPolicy | None,
    items: Sequence[Item],
    modes: Sequence[tuple[str, int]],
    seed: int = 0,
) -> list[Row]:
    """Every mode on every item (module docstring); ``policy`` may be None for baselines only."""
    rows = []
    for item in items:
        g, c = item.sg.graph, item.sg.cluster
        row = Row(g.name, c.name, g.num_ops, item.reference_name, item.reference_time)
        head = None
        if policy is not None:
            with torch.no_grad():
                head = policy.head_params(policy.embed(item.observation))
        for kind, budget in modes:
            label = kind if kind == "greedy" else f"{kind}:{budget}"
            if kind == "annealing":
                start = Decision(placement=item.sg.anchor.copy())
                result = simulated_annealing(g, c, "placement", budget, seed, start=start)
                m = result.measurement
                placement = result.decision.placement
                assert placement is not None
                time_ = m.step_time if m.valid else math.inf
            else:
                if head is None:
                    raise ValueError(f"mode {label} needs a trained policy")
                rng = np.random.default_rng(seed)
                greedy = decode(item.sg, "greedy", head).placement
                samples = [
                    decode(item.sg, "sample", head, rng=rng).placement for _ in range(budget - 1)
                ]
                placements = np.stack([greedy, *samples])
                r = item.prepared.evaluate_batch(placements)
                times = np.where(r.valid, r.step_time, np.inf)
                best = int(np.argmin(times))
                placement, time_ = placements[best], float(times[best])
            row.speedup[label] = item.reference_time / time_ if math.isfinite(time_) else 0.0
            row.placement[label] = np.asarray(placement, dtype=np.int64)
        rows.append(row)
    return rows


def table(rows: Sequence[Row]) -> list[str]:
    """The rows as a Markdown table with a geometric-mean line."""
    labels = list(rows[0].speedup) if rows else []
    lines = [
        "| graph | cluster | ops | best heuristic | " + " | ".join(labels) + " |",
        "| --- | --- | ---: | --- | " + " | ".join("---:" for _ in labels) + " |",
    ]
    for r in rows:
        cells = " | ".join(f"{r.speedup[k]:.3f}x" for k in labels)
        lines.append(f"| {r.graph} | {r.cluster} | {r.ops:,} | {r.reference} | {cells} |")
    means = " | ".join(f"{geomean(np.array([r.speedup[k] for r in rows])):.3f}x" for k in labels)
    lines.append(f"| geometric mean | | | | {means} |")
    return lines
