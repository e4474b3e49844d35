"""A graph model of what moving one op costs or gains: which single-op moves of a placement a
search should try first.

A *move* ``(v, d)`` puts op ``v`` on device ``d``, every other op where it is. Its *gain* is
``100 log(t / t')`` (percent; positive: faster), ``t`` the placement's simulated step time and
``t'`` the moved placement's. :class:`MoveGainNet` predicts the gain of every move of a
placement at once, from :func:`move_inputs`:

- the event-driven decoder's twelve features of each op on each device
  (:mod:`graphopt.decoders.event_step`, the placement itself as the anchor, so the state is the
  simulator's own partial execution at the instant the op is decided, and the anchor's schedule
  figures are the placement's: slack, wait for the device, idle devices);
- per op (:data:`OP_INPUTS`): those features on its own device, their mean over its allowed
  devices, and four figures of the graph (log compute time and log time to send its output
  over a link of mean bandwidth, both in percent of the graph's critical path; log in- and
  out-degree).

The network: a linear map of the op inputs (standardised by the training set's mean and spread,
kept with the weights; a spread below :data:`MIN_SPREAD` counts as that, and standardised
values are clipped to ``+-``:data:`MAX_Z`, so that an input constant in training cannot blow
up on a graph unlike them), ``layers`` GraphSAGE layers (``torch_geometric.nn.SAGEConv``) along the
edges and against them, ``h <- relu(h + SAGE_fwd(h) + SAGE_bwd(h))``; each device summarised by
the mean embedding of the ops placed on it, and for each op by the mean embedding of its
neighbours placed on it; the move ``(v, d)`` scored by an MLP of ``[h_v, s_d - s_own(v),
n_{v,d} - n_{v,own(v)}, feat[v, d] - feat[v, own(v)]]``. Device-agnostic: the same weights
serve any device count and heterogeneous clusters.

Trained by :mod:`graphopt.train.move_gain` (squared error on the simulator's gains of sampled
moves); used by :mod:`graphopt.nn.move_search`. Checkpoints (:func:`save_move_net`,
:func:`load_move_net`) are tensors and plain values, read with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn
from torch_geometric.nn import SAGEConv

from graphopt.decoders.event_step import FEATURES, EventGraph, decode_events, event_graph
from graphopt.errors import InvalidArgument
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim.simulator import PreparedGraph
from graphopt.typing import IntArray

OP_INPUTS = (
    *(f"{f} (own device)" for f in FEATURES),
    *(f"{f} (mean over allowed devices)" for f in FEATURES),
    "log compute time",
    "log output transfer time",
    "log in-degree",
    "log out-degree",
)
NUM_OP_INPUTS = len(OP_INPUTS)
MIN_SPREAD = 0.05
"""The least spread an op input is standardised by (the inputs are of order 1)."""
MAX_Z = 6.0
"""Standardised op inputs are clipped to ``[-MAX_Z, MAX_Z]``."""
BUILTIN = "builtin"
"""The name of the model shipped with graphopt (:data:`graphopt.data.MOVE_GAIN_MODEL`)."""
CHECKPOINT_FORMAT = "graphopt-move-gain"
CHECKPOINT_VERSION = 2


@dataclass(frozen=True)
class MoveInputs:
    """A placement as :class:`MoveGainNet` reads it: ``feats`` ``(N, D, F)`` (the event-driven
    decoder's features of each op on each device), ``masks`` ``(N, D)`` (allowed devices),
    ``own`` ``(N,)`` (the placement), ``x`` ``(N, NUM_OP_INPUTS)`` and ``edges`` ``(2, E)``
    (producer, consumer)."""

    feats: np.ndarray
    masks: np.ndarray
    own: IntArray
    x: np.ndarray
    edges: IntArray

    def moves(self) -> IntArray:
        """``(M, 2)`` every move ``(op, device)`` to an allowed device other than the op's."""
        allowed = self.masks.copy()
        allowed[np.arange(len(self.own)), self.own] = False
        return np.argwhere(allowed)


def move_inputs(
    graph: CompGraph,
    cluster: Cluster,
    placement: IntArray,
    *,
    base: EventGraph | None = None,
    prepared: PreparedGraph | None = None,
) -> MoveInputs:
    """The inputs of ``placement`` (module docstring): one event-driven decode of it. A caller
    that ranks many placements of one graph passes ``base`` (:func:`event_graph` of ``graph``
    and ``cluster``, any anchor) and ``prepared`` (a :class:`PreparedGraph` of them, which
    simulates the placement's own schedule) so that only what depends on the placement is
    computed again."""
    placement = np.asarray(placement, dtype=np.int64)
    eg = (base if base is not None else event_graph(graph, cluster)).anchored(placement, prepared)
    episode = decode_events(eg, given=placement, record=True)
    n = graph.num_ops
    feats = np.empty_like(episode.feats)
    masks = np.empty_like(episode.masks)
    feats[episode.ops], masks[episode.ops] = episode.feats, episode.masks
    comp, succ_ptr, succ_dst, succ_bytes = (eg.arrays[i] for i in (0, 1, 2, 3))
    bandwidth, scale = eg.arrays[8], eg.arrays[11]
    links = bandwidth[~np.eye(len(bandwidth), dtype=bool) & np.isfinite(bandwidth)]
    mean_bw = float(links.mean()) if links.size else 1.0
    out_deg = np.diff(succ_ptr)
    src = np.repeat(np.arange(n), out_deg)
    out_bytes = np.zeros(n)
    np.maximum.at(out_bytes, src, succ_bytes)
    allowed = masks[..., None]
    x = np.concatenate(
        [
            feats[np.arange(n), placement],
            (feats * allowed).sum(axis=1) / np.maximum(allowed.sum(axis=1), 1),
            np.log1p(100 * comp.mean(axis=1, keepdims=True) / scale),
            np.log1p(100 * out_bytes[:, None] / mean_bw / scale),
            np.log1p(np.bincount(succ_dst, minlength=n)[:, None]),
            np.log1p(out_deg[:, None]),
        ],
        axis=1,
    )
    edges = np.stack([src, np.asarray(succ_dst, dtype=np.int64)])
    return MoveInputs(feats, masks, placement, x, edges)


class MoveGainNet(nn.Module):
    """Predicted gain of every move of a placement (module docstring)."""

    def __init__(self, width: int = 64, layers: int = 3) -> None:
        super().__init__()
        self.width, self.layers = width, layers
        num_f = len(FEATURES)
        self.mean: Tensor
        self.std: Tensor
        self.register_buffer("mean", torch.zeros(NUM_OP_INPUTS))
        self.register_buffer("std", torch.ones(NUM_OP_INPUTS))
        self.inp = nn.Linear(NUM_OP_INPUTS, width)
        self.fwd = nn.ModuleList(SAGEConv(width, width) for _ in range(layers))
        self.bwd = nn.ModuleList(SAGEConv(width, width) for _ in range(layers))
        self.out = nn.Sequential(
            nn.Linear(3 * width + num_f, width), nn.ReLU(), nn.Linear(width, 1)
        )

    def set_scaling(self, x: np.ndarray) -> None:
        """Standardise the op inputs by the mean and spread of ``x`` ``(M, NUM_OP_INPUTS)``."""
        self.mean.copy_(torch.as_tensor(x.mean(axis=0)))
        self.std.copy_(torch.as_tensor(np.maximum(x.std(axis=0), MIN_SPREAD)))

    def forward(self, inputs: MoveInputs) -> Tensor:
        """``(N, D)`` predicted gains (percent) of moving each op to each device (the op's own
        device and disallowed ones included: meaningless there)."""
        x = (torch.as_tensor(inputs.x, dtype=torch.float32) - self.mean) / self.std
        x = x.clamp(-MAX_Z, MAX_Z)
        e = torch.as_tensor(inputs.edges)
        h = torch.relu(self.inp(x))
        for fwd, bwd in zip(self.fwd, self.bwd, strict=True):
            h = torch.relu(h + fwd(h, e) + bwd(h, e.flip(0)))
        n, num_dev = inputs.masks.shape
        own = torch.as_tensor(inputs.own)
        on = torch.zeros(num_dev, self.width).index_add_(0, own, h)
        on = on / torch.bincount(own, minlength=num_dev).clamp(min=1)[:, None]
        both = torch.cat([e, e.flip(0)], dim=1)
        where = (both[1], own[both[0]])  # each op's neighbours, by the device they are on
        near = torch.zeros(n, num_dev, self.width).index_put_(where, h[both[0]], accumulate=True)
        count = torch.zeros(n, num_dev).index_put_(
            where, torch.ones(both.shape[1]), accumulate=True
        )
        near = near / count.clamp(min=1)[..., None]
        rows = torch.arange(n)
        feats = torch.as_tensor(inputs.feats, dtype=torch.float32)
        parts = [
            h[:, None].expand(n, num_dev, -1),
            on[None] - on[own][:, None],
            near - near[rows, own][:, None],
            feats - feats[rows, own][:, None],
        ]
        return self.out(torch.cat(parts, dim=-1))[..., 0]


def ranked_moves(net: MoveGainNet, inputs: MoveInputs) -> tuple[IntArray, np.ndarray]:
    """Every move of :meth:`MoveInputs.moves`, highest predicted gain first (ties: the order of
    the ops, then the devices), and those predictions."""
    with torch.no_grad():
        gains = net(inputs).numpy()
    moves = inputs.moves()
    predicted = gains[moves[:, 0], moves[:, 1]]
    order = np.argsort(-predicted, kind="stable")
    return moves[order], predicted[order]


def save_move_net(net: MoveGainNet, path: str | Path, trained_on: str) -> None:
    """Write ``net`` to ``path`` (tensors and plain values; ``trained_on`` says on what)."""
    torch.save(
        {
            "format": CHECKPOINT_FORMAT,
            "version": CHECKPOINT_VERSION,
            "width": net.width,
            "layers": net.layers,
            "inputs": list(OP_INPUTS),
            "trained_on": trained_on,
            "state": net.state_dict(),
        },
        path,
    )


def load_move_net(path: str | Path) -> tuple[MoveGainNet, str]:
    """The network :func:`save_move_net` wrote to ``path`` (:data:`BUILTIN`: the one shipped
    with graphopt), and what it was trained on.

    Raises:
        InvalidArgument: no such file, or not a move-gain model of these inputs (another
            checkpoint, a corrupt file).
    """
    from graphopt.data import MOVE_GAIN_MODEL

    p = MOVE_GAIN_MODEL if str(path) == BUILTIN else Path(path)
    if not p.is_file():
        raise InvalidArgument(
            f"{path}: no such move-gain model; train one with graphopt moves train"
        )
    try:
        data = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises many kinds for a file that is not its own
        raise InvalidArgument(f"{path}: not a readable checkpoint ({type(e).__name__})") from e
    if not isinstance(data, dict) or data.get("format") != CHECKPOINT_FORMAT:
        raise InvalidArgument(
            f"{path}: not a move-gain model (graphopt moves train writes one); a policy's "
            "checkpoint cannot rank moves"
        )
    if data.get("version") != CHECKPOINT_VERSION or data.get("inputs") != list(OP_INPUTS):
        raise InvalidArgument(
            f"{path}: a move-gain model of another version or other inputs; train it again with "
            "graphopt moves train"
        )
    try:
        net = MoveGainNet(int(data["width"]), int(data["layers"]))
        net.load_state_dict(data["state"])
    except (KeyError, TypeError, ValueError, RuntimeError) as e:
        raise InvalidArgument(f"{path}: a damaged move-gain model ({e})") from e
    net.eval()
    return net, str(data.get("trained_on", ""))
