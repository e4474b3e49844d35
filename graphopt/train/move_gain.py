"""Training a :class:`~graphopt.nn.move_gain.MoveGainNet`: the simulator's gains of sampled
single-op moves of each training graph's best-heuristic placement, and which of them gain.

For each graph (on one of the training clusters in turn; its best heuristic's placement there
from the reference cache,
:func:`graphopt.baselines.reference_cache.cached_best_placement`), ``ops`` ops with at least two
allowed devices are drawn and every move of each to another allowed device is simulated with the
rest of the placement unchanged (:func:`move_gains`; about ``2 ops`` calls a graph on four
devices, batched). The network is then fitted, by Adam, one graph a step, for ``epochs`` passes
over the graphs in a seeded random order, to whether each move gains (``bce``, the binary
cross-entropy of its score as a logit: what the search asks of it) or to the gains themselves
clipped to ``+-CLIP`` percent (``mse``: a move that loses 30% and one that loses 3% are both "do
not try it first"; ranks the moves that gain less well: docs/results/moves.md).

Supervised, not reinforcement learning: each label is the simulator's own verdict on one move,
so the model learns which moves pay without a return to assign credit from.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from graphopt.baselines.reference_cache import cached_best_placement
from graphopt.errors import InvalidArgument
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.nn.move_gain import MoveGainNet, MoveInputs, move_inputs
from graphopt.sim.simulator import PreparedGraph

LOSSES = ("bce", "mse")
"""What :func:`fit_move_net` fits (module docstring); ``graphopt moves train --loss`` names them
again without importing this module (tests/graphopt/cli/test_moves_cli.py keeps the two equal)."""
CLIP = 2.0
"""Gains are clipped to ``+-CLIP`` percent before the squared error."""


@dataclass(frozen=True)
class MoveExample:
    """One training graph: its inputs and ``gains`` ``(N, D)`` (percent; NaN where not
    simulated: the op's own device, disallowed devices, ops not drawn; ``-100`` where the moved
    placement is invalid)."""

    name: str
    inputs: MoveInputs
    gains: np.ndarray


def move_gains(prepared: PreparedGraph, inputs: MoveInputs, ops: np.ndarray) -> np.ndarray:
    """``(N, D)`` gains of moving each op of ``ops`` to each other allowed device of
    ``inputs``, the rest of ``inputs.own`` unchanged (one batched simulation); NaN elsewhere."""
    own = inputs.own
    rows, where = [own], []
    for v in ops:
        for d in np.flatnonzero(inputs.masks[v]):
            if d != own[v]:
                p = own.copy()
                p[v] = d
                rows.append(p)
                where.append((v, d))
    result = prepared.evaluate_batch(np.stack(rows))
    times = np.asarray(result.step_time, dtype=np.float64)
    gains = np.full(inputs.masks.shape, np.nan)
    for (v, d), t, ok in zip(where, times[1:], result.valid[1:], strict=True):
        gains[v, d] = 100 * np.log(times[0] / t) if ok else -100.0
    return gains


def move_examples(
    graphs: Sequence[CompGraph],
    clusters: Cluster | Sequence[Cluster],
    ops: int,
    seed: int,
    on_graph: Callable[[int, str], None] | None = None,
) -> list[MoveExample]:
    """The labelled moves of each graph (module docstring), graph ``i`` on cluster ``i mod
    len(clusters)`` (so one model learns several device counts and kinds); ``on_graph(i,
    name)`` after each."""
    if not graphs:
        raise InvalidArgument("no training graphs: give at least one graph to label moves on")
    clusters = [clusters] if isinstance(clusters, Cluster) else list(clusters)
    if not clusters:
        raise InvalidArgument("no training cluster: give at least one")
    rng = np.random.default_rng(seed)
    out = []
    for i, graph in enumerate(graphs):
        cluster = clusters[i % len(clusters)]
        placement, _, _ = cached_best_placement(graph, cluster)
        inputs = move_inputs(graph, cluster, placement)
        choice = np.flatnonzero(inputs.masks.sum(axis=1) >= 2)
        drawn = np.sort(rng.choice(choice, min(ops, len(choice)), replace=False))
        gains = move_gains(PreparedGraph(graph, cluster), inputs, drawn)
        out.append(MoveExample(f"{graph.name} on {cluster.name}", inputs, gains))
        if on_graph is not None:
            on_graph(i, graph.name)
    return out


def fit_move_net(
    examples: Sequence[MoveExample],
    epochs: int,
    *,
    width: int = 64,
    layers: int = 3,
    lr: float = 1e-3,
    seed: int = 0,
    loss: str = "bce",
    start: MoveGainNet | None = None,
    on_epoch: Callable[[int, float, MoveGainNet], None] | None = None,
) -> MoveGainNet:
    """A network fitted to ``examples`` (module docstring); ``on_epoch(epoch, mean loss,
    net)`` after each pass (the caller may save it: an interrupted training keeps the last).
    ``loss``: ``bce`` (whether a move gains, as a logit) or ``mse`` (the clipped gains).
    ``start``: fine-tune a copy of this network (its size and input scaling kept; ``width`` and
    ``layers`` unused) instead of a new one.

    Raises:
        InvalidArgument: an unknown ``loss``.
    """
    if loss not in LOSSES:
        raise InvalidArgument(f"unknown loss {loss!r}; choose one of: {', '.join(LOSSES)}")
    torch.manual_seed(seed)
    if start is None:
        net = MoveGainNet(width, layers)
        net.set_scaling(np.concatenate([e.inputs.x for e in examples]))
    else:
        net = copy.deepcopy(start)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    targets = [
        torch.as_tensor(np.clip(e.gains, -CLIP, CLIP), dtype=torch.float32) for e in examples
    ]
    rng = np.random.default_rng(seed)
    order = np.arange(len(examples))
    net.train()
    for epoch in range(epochs):
        rng.shuffle(order)
        total = 0.0
        for i in order.tolist():
            y = targets[i]
            known = ~torch.isnan(y)
            if not known.any():
                continue
            guess = net(examples[i].inputs)[known]
            if loss == "bce":
                err = torch.nn.functional.binary_cross_entropy_with_logits(
                    guess, (y[known] > 0).float()
                )
            else:
                err = ((guess - y[known]) ** 2).mean()
            opt.zero_grad()
            err.backward()
            opt.step()
            total += float(err.detach())
        if on_epoch is not None:
            net.eval()
            on_epoch(epoch, total / len(examples), net)
            net.train()
    net.eval()
    return net
