"""A placer made to keep the placement constraints (:mod:`graphopt.constraints`).

:func:`constrained` wraps a placer so that its placement is projected onto the devices each op
may use (:meth:`graphopt.constraints.Constraints.project`: an op on a device of a kind it may
not run on moves to its producer's device or to its fastest allowed device; under
``colocation: enforce`` each colocation group moves as one). Without constraints the wrapper
returns the placer's placement unchanged, so every figure of an unconstrained graph stays as it
was. Every placer of :data:`graphopt.baselines.placement.PLACERS` is wrapped (inside
:func:`~graphopt.baselines.monotone.monotone`, so that the sub-cluster candidates are ranked
after projection; a sub-cluster without a device some op may use gives no candidate).

Under ``contiguous: true`` the projection makes any placement a contiguous split of the block
DAG, but a placer that scatters ops by design (round-robin, METIS, HEFT, m-ETF) would then be
reported under its name for a placement it never chose. :func:`stage_blind` marks those
placers: they refuse such a cluster in one line (``ValueError``; the best-heuristic chain and
``graphopt baselines`` skip a placer that refuses) and name the methods that keep it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from graphopt.constraints import constraints
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.typing import IntArray

Placer = Callable[[CompGraph, Cluster], IntArray]


def constrained(placer: Placer) -> Placer:
    """``placer`` with its placement projected onto the allowed devices (module docstring).

    Raises (the wrapped placer):
        ValueError: constraints that no placement of ``graph`` on ``cluster`` can meet
            (:func:`graphopt.constraints.constraints`), or the placer's own errors.
    """

    @functools.wraps(placer)
    def wrapped(graph: CompGraph, cluster: Cluster) -> IntArray:
        rules = constraints(graph, cluster)
        placement = placer(graph, cluster)
        return rules.project(placement) if rules.active else placement

    return wrapped


STAGE_AWARE = "single, split, m-topo, tarnawski-greedy, tarnawski-dp, pipedream"
"""The placers of :data:`~graphopt.baselines.placement.PLACERS` that keep ``contiguous: true``
(single and the contiguous-split placers by construction, m-topo by projection: it already walks
the ops in topological order)."""


def stage_blind(name: str, placer: Placer) -> Placer:
    """``placer`` refusing a cluster with ``contiguous: true`` (module docstring); ``name``: the
    name users know it by."""

    @functools.wraps(placer)
    def wrapped(graph: CompGraph, cluster: Cluster) -> IntArray:
        if cluster.contiguous:
            raise ValueError(
                f"{name} places ops without regard to pipeline stages, and cluster "
                f"{cluster.name!r} demands contiguous ones (contiguous: true); use {STAGE_AWARE}, "
                "or a search (random search and annealing keep to contiguous splits)"
            )
        return placer(graph, cluster)

    return wrapped
