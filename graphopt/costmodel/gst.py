"""Graph Segment Training: train the cost model on graphs too large for one backward pass.

Cao et al., "Learning Large Graph Property Prediction via Graph Segment Training" (NeurIPS 2023).
:class:`~graphopt.costmodel.model.CostNet` pools node embeddings by sum, so the pooled vector of
a graph split into disjoint node sets ``V_1, ..., V_S`` (*segments*) is the sum of the segments'
pooled vectors, each computed by the GNN on the segment's induced subgraph
(:meth:`CostNet.segment_sum`):

.. math::
    \\mathbf{z}_b = \\sum_{j=1}^{S} \\mathbf{e}_{b,j}, \\qquad
    \\mathbf{e}_{b,j} = \\sum_{i \\in V_j} \\mathbf{h}_{b,i}^{(L)}[G[V_j]], \\qquad
    \\hat{y}_b = \\mathrm{head}(\\mathbf{z}_b, N, \\mathbf{s}_b).

A training step (:func:`fit_gst`) takes a batch of ``B`` configurations of one graph and

1. samples ``k`` segments ``J`` uniformly without replacement (``sampled_segments``) and
   computes their embeddings ``e_{b,j}, j in J`` with gradient;
2. takes the other segments' embeddings from the :class:`HistoryTable` (the value computed the
   last time the configuration and segment were seen, *stale* by the updates since), computing
   and storing, under ``torch.no_grad()``, the ones the table does not hold yet;
3. applies stale-embedding dropout (SED): each of the ``m = S - k`` stale embeddings is kept
   with probability ``1 - p``, the same choice for every configuration of the batch, and the
   kept ones are rescaled (:func:`combine_stale`)

   .. math::
       \\mathbf{z}_b = \\sum_{j \\in J} \\mathbf{e}_{b,j}
           + \\frac{m}{|K|} \\sum_{j \\in K} \\tilde{\\mathbf{e}}_{b,j}
       \\quad (\\text{no stale term when } K = \\emptyset),

   where ``K`` is the set of kept stale segments and ``tilde e`` the table's values;
4. writes the fresh ``e_{b,j}, j in J`` (detached) back to the table, and takes an Adam step
   on the ranking loss of ``head(z_b, N, s_b)``.

Memory per step is that of ``k`` segments' activations for ``B`` configurations (plus the
``(B, C, Fc)`` configuration features of the batch, which whole-graph training needs as well);
it no longer grows with the graph. The price: the first epoch computes every segment once
without gradient to fill the table, and stale embeddings lag behind the parameters (SED
reduces the resulting bias). The paper's last step (the "F" of GST+EFD), :func:`finetune_head`,
removes the rest of that mismatch: with the GNN frozen, every segment's embedding is computed
fresh once per configuration (no gradient, one segment at a time), and only the head
(:attr:`CostNet.mlp`) is trained on the exact pooled sums, which is what prediction sees.

Segments here are contiguous ranges of the topological order (:func:`partition`), and each
segment's GNN sees only its induced subgraph: **edges between segments are dropped**. A model
trained this way has learned that input, so it must be scored the same way
(:func:`predict_segmented`, :func:`evaluate_segmented` with the training ``segment_size``), not
with :func:`graphopt.costmodel.fit.predict`. With ``segment_size >= N`` there is one segment
and both agree.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from graphopt.costmodel.data import GraphSamples
from graphopt.costmodel.fit import GraphTensors, train_loop
from graphopt.costmodel.losses import get_loss
from graphopt.costmodel.metrics import grouped_report
from graphopt.costmodel.model import CostNet

__all__ = [
    "HistoryTable",
    "Segments",
    "combine_stale",
    "evaluate_segmented",
    "finetune_head",
    "fit_gst",
    "partition",
    "pooled_segmented",
    "predict_segmented",
    "stale_keep_mask",
]


# ---------------------------------------------------------------------------- segments
def partition(num_nodes: int, edges: npt.ArrayLike, segment_size: int) -> list[np.ndarray]:
    """Split nodes ``0..N-1`` into ``ceil(N / segment_size)`` contiguous index ranges.

    graphopt graphs (and TpuGraphs) number their nodes in topological order, where producers and
    consumers tend to sit close together, so contiguous ranges cut few edges; the split is
    deterministic and cheap (``O(N)``). ``np.array_split`` balances the sizes: every segment has
    ``floor(N / S)`` or ``ceil(N / S) <= segment_size`` nodes.

    Args:
        num_nodes: ``N``.
        edges: ``(2, E)`` node pairs; only checked here (every index in ``[0, N)``), the split
            itself does not depend on them.
        segment_size: the largest segment, ``>= 1``.

    Returns:
        ``S`` sorted int64 arrays of node ids, disjoint, covering ``0..N-1`` (none for ``N = 0``).

    Raises:
        ValueError: ``segment_size < 1``, ``num_nodes < 0``, or edges that are not ``(2, E)``
            indices in ``[0, N)``.
    """
    if segment_size < 1:
        raise ValueError(f"segment_size must be at least 1 node, got {segment_size}")
    if num_nodes < 0:
        raise ValueError(f"num_nodes must be non-negative, got {num_nodes}")
    e = np.asarray(edges)
    if e.ndim != 2 or e.shape[0] != 2:
        raise ValueError(f"edges must have shape (2, E), got {e.shape}")
    if e.size and (int(e.min()) < 0 or int(e.max()) >= num_nodes):
        raise ValueError(
            f"edges reference nodes in [{int(e.min())}, {int(e.max())}]; the graph has "
            f"{num_nodes} nodes (indices 0..{num_nodes - 1})"
        )
    if num_nodes == 0:
        return []
    count = math.ceil(num_nodes / segment_size)
    return np.array_split(np.arange(num_nodes, dtype=np.int64), count)


@dataclass(frozen=True)
class Segments:
    """The segments of one graph and what :meth:`CostNet.segment_sum` needs for each, built once.

    Attributes:
        num_nodes: ``N`` of the whole graph.
        nodes: per segment, ``(n_j,)`` global node ids (its rows of the static tensors).
        edges: per segment, ``(2, e_j)`` the edges with both ends in it, in local indices.
        config_pos: per segment, ``(c_j,)`` local indices of its configurable nodes.
        config_cols: per segment, ``(c_j,)`` their columns of ``config_feat`` (positions in the
            graph's ``config_node_ids``), so ``config_feat[:, config_cols[j]]`` pairs with
            ``config_pos[j]``.
        cut_edges: edges between segments, which segmented training and scoring drop.
    """

    num_nodes: int
    nodes: list[Tensor]
    edges: list[Tensor]
    config_pos: list[Tensor]
    config_cols: list[Tensor]
    cut_edges: int

    @property
    def count(self) -> int:
        """``S``, the number of segments."""
        return len(self.nodes)

    @classmethod
    def build(
        cls,
        num_nodes: int,
        edges: npt.ArrayLike,
        config_node_ids: npt.ArrayLike,
        segment_size: int,
    ) -> Segments:
        """Partition the graph (:func:`partition`) and localise edges and configurable nodes.

        Edges keep their original relative order within a segment, so with a single segment the
        result is exactly the whole graph.

        Raises:
            ValueError: as :func:`partition`, or configurable node ids outside ``[0, N)``.
        """
        e = np.asarray(edges, dtype=np.int64)
        parts = partition(num_nodes, e, segment_size)
        seg_of = np.empty(num_nodes, dtype=np.int64)
        local = np.empty(num_nodes, dtype=np.int64)
        for j, ids in enumerate(parts):
            seg_of[ids] = j
            local[ids] = np.arange(ids.size)
        # Edges inside a segment, grouped by segment (stable, so each keeps its order).
        inside = seg_of[e[0]] == seg_of[e[1]]
        kept = e[:, inside]
        owner = seg_of[kept[0]]
        order = np.argsort(owner, kind="stable")
        kept, owner = kept[:, order], owner[order]
        edge_split = np.searchsorted(owner, np.arange(1, len(parts)))
        # Configurable nodes by segment, with their columns of config_feat.
        cids = np.asarray(config_node_ids, dtype=np.int64)
        if cids.size and (int(cids.min()) < 0 or int(cids.max()) >= num_nodes):
            raise ValueError(
                f"configurable node ids lie in [{int(cids.min())}, {int(cids.max())}]; the graph "
                f"has {num_nodes} nodes (indices 0..{num_nodes - 1})"
            )
        cols = np.argsort(seg_of[cids], kind="stable")
        col_blocks = np.split(cols, np.searchsorted(seg_of[cids][cols], np.arange(1, len(parts))))

        def tensor(a: np.ndarray) -> Tensor:
            return torch.as_tensor(np.ascontiguousarray(a), dtype=torch.long)

        return cls(
            num_nodes=num_nodes,
            nodes=[tensor(ids) for ids in parts],
            edges=[tensor(local[block]) for block in np.split(kept, edge_split, axis=1)],
            config_pos=[tensor(local[cids[c]]) for c in col_blocks],
            config_cols=[tensor(c) for c in col_blocks],
            cut_edges=int(e.shape[1] - kept.shape[1]),
        )

    @classmethod
    def of(cls, samples: GraphSamples, segment_size: int) -> Segments:
        """The segments of ``samples``' graph."""
        return cls.build(samples.num_nodes, samples.edges, samples.config_node_ids, segment_size)


def _segment_embedding(
    net: CostNet, t: GraphTensors, segs: Segments, j: int, feat: Tensor
) -> Tensor:
    """``(B, H)`` embedding of segment ``j`` for the ``(B, C, Fc)`` configuration features."""
    ids = segs.nodes[j]
    static = net.static(t.node_feat[ids], t.opcode[ids])
    return net.segment_sum(static, segs.edges[j], segs.config_pos[j], feat[:, segs.config_cols[j]])


# ---------------------------------------------------------------------------- history table
class HistoryTable:
    """Historical segment embeddings per (graph, configuration, segment).

    Graph ``g`` with ``K_g`` configurations and ``S_g`` segments has an ``(K_g, S_g, H)``
    float32 tensor ``emb[g]`` and a ``(K_g, S_g)`` bool mask ``filled[g]``. Memory:
    ``sum_g K_g * S_g * (4 H + 1)`` bytes (:attr:`nbytes`), e.g. 1,000 configurations of a
    200,000-node graph in segments of 1,000 nodes at ``H = 64``: ``1000 * 200 * 257`` bytes =
    51 MB, against ``1000 * 200,000 * 64 * 4`` = 51 GB for the final node embeddings themselves.

    Args:
        shapes: ``(K_g, S_g)`` per graph.
        hidden: ``H``.
    """

    def __init__(self, shapes: Sequence[tuple[int, int]], hidden: int) -> None:
        self.emb = [torch.zeros(k, s, hidden) for k, s in shapes]
        self.filled = [torch.zeros(k, s, dtype=torch.bool) for k, s in shapes]

    @classmethod
    def for_graphs(
        cls, samples: Sequence[GraphSamples], segments: Sequence[Segments], hidden: int
    ) -> HistoryTable:
        """An empty table for ``samples`` split into ``segments``."""
        return cls(
            [(s.num_configs, g.count) for s, g in zip(samples, segments, strict=True)], hidden
        )

    @property
    def nbytes(self) -> int:
        """Bytes held by the embeddings and masks."""
        return sum(e.nbytes + f.nbytes for e, f in zip(self.emb, self.filled, strict=True))

    def missing(self, g: int, idx: Tensor, j: int) -> Tensor:
        """``(B,)`` bool: which configurations ``idx`` of graph ``g`` lack segment ``j``."""
        return ~self.filled[g][idx, j]

    def read(self, g: int, idx: Tensor, j: int) -> Tensor:
        """``(B, H)`` stored embeddings of segment ``j`` for configurations ``idx`` of graph
        ``g`` (zeros where not filled)."""
        return self.emb[g][idx, j]

    def write(self, g: int, idx: Tensor, j: int, value: Tensor) -> None:
        """Store ``(B, H)`` embeddings (detached) and mark them filled."""
        self.emb[g][idx, j] = value.detach()
        self.filled[g][idx, j] = True


# ---------------------------------------------------------------------------- stale dropout
def stale_keep_mask(m: int, p: float, rng: np.random.Generator) -> np.ndarray:
    """``(m,)`` bool: keep each of ``m`` stale embeddings independently with probability ``1 - p``."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"the stale-embedding dropout probability must lie in [0, 1), got {p}")
    return rng.random(m) >= p


def combine_stale(stale: Tensor, keep: Tensor | np.ndarray) -> Tensor:
    """Rescaled sum of the kept stale embeddings: ``(m / |K|) sum_{j in K} stale_j``.

    With each embedding kept independently with probability ``q = 1 - p`` and ``m`` embeddings,
    ``E[1{j in K} m / |K|] = 1 - p^m`` for every ``j`` (``|K| - 1`` given ``j in K`` is
    Binomial(m - 1, q), and ``E[1 / (1 + Bin(n, q))] = (1 - (1 - q)^(n+1)) / ((n + 1) q)``), so
    the expectation is ``(1 - p^m) sum_j stale_j``: exactly the full sum given at least one is
    kept; when none is (probability ``p^m``) the result is zero.

    Shapes:
        ``stale`` ``(m, B, H)``, ``keep`` ``(m,)`` bool; output ``(B, H)``.
    """
    keep = torch.as_tensor(keep, dtype=torch.bool)
    kept = int(keep.sum())
    if kept == 0:
        return stale.new_zeros(stale.shape[1:])
    return stale[keep].sum(dim=0) * (stale.shape[0] / kept)


# ---------------------------------------------------------------------------- training
def _gst_total(
    net: CostNet,
    t: GraphTensors,
    segs: Segments,
    table: HistoryTable,
    g: int,
    idx: Tensor,
    feat: Tensor,
    sampled: np.ndarray,
    keep: np.ndarray,
) -> Tensor:
    """``(B, H)`` pooled sum of one GST step: fresh ``sampled`` segments plus the rescaled kept
    stale ones (``keep`` indexes the non-sampled segments in increasing order)."""
    is_sampled = np.zeros(segs.count, dtype=bool)
    is_sampled[sampled] = True
    stale = []
    for j in np.flatnonzero(~is_sampled):
        missing = table.missing(g, idx, int(j))
        if bool(missing.any()):
            with torch.no_grad():
                filler = _segment_embedding(net, t, segs, int(j), feat[missing])
            table.write(g, idx[missing], int(j), filler)
        stale.append(table.read(g, idx, int(j)))
    total = feat.new_zeros(len(idx), net.layout.hidden)
    if stale:
        total = total + combine_stale(torch.stack(stale), keep)
    for j in sampled:
        fresh = _segment_embedding(net, t, segs, int(j), feat)
        table.write(g, idx, int(j), fresh)
        total = total + fresh
    return total


def fit_gst(
    net: CostNet,
    train: list[GraphSamples],
    val: list[GraphSamples] | None = None,
    *,
    segment_size: int = 4096,
    sampled_segments: int = 1,
    dropout_stale: float = 0.5,
    loss: str = "listmle",
    epochs: int = 10,
    batch_size: int = 32,
    lr: float = 1e-3,
    weight_decay: float = 0.0,
    seed: int = 0,
    time_budget: float | None = None,
    on_epoch: Callable[[dict[str, float]], None] | None = None,
    table: HistoryTable | None = None,
) -> list[dict[str, float]]:
    """Train ``net`` in place with Graph Segment Training (see the module docstring).

    The loop is that of :func:`graphopt.costmodel.fit.fit` (batches of ``batch_size``
    configurations of one graph, graphs visited in random order, Adam, gradient norm clipped at
    1, best parameters by validation tau) with the whole-graph forward replaced by the segmented
    one. Validation is scored segmented (:func:`evaluate_segmented`), as the model is trained.

    Args:
        segment_size: the largest segment (nodes); graphs up to this size are a single segment,
            which is whole-graph training.
        sampled_segments: ``k``, segments computed with gradient per step (at most ``S``).
        dropout_stale: ``p``, the probability of dropping each stale embedding, in ``[0, 1)``.
        loss: a name of :data:`graphopt.costmodel.losses.LOSSES`.
        time_budget: stop after the epoch during which this many seconds have passed.
        on_epoch: called with each epoch's row (``epoch``, ``train/loss``, ``val/...``, ``time``).
        table: the :class:`HistoryTable` to use (and leave filled), e.g. to inspect it or to
            continue training; by default a fresh one.

    Returns:
        One metrics row per epoch. At the end ``net`` holds the best epoch's parameters by
        validation tau (the last epoch's without a validation set).

    Raises:
        ValueError: ``sampled_segments < 1``, ``dropout_stale`` outside ``[0, 1)``, a bad
            ``segment_size``, or a ``table`` of another shape.
    """
    if sampled_segments < 1:
        raise ValueError(f"sampled_segments must be at least 1, got {sampled_segments}")
    if not 0.0 <= dropout_stale < 1.0:
        raise ValueError(f"dropout_stale must lie in [0, 1), got {dropout_stale}")
    loss_fn = get_loss(loss)
    tensors = [GraphTensors.of(s) for s in train]
    segments = [Segments.of(s, segment_size) for s in train]
    if table is None:
        table = HistoryTable.for_graphs(train, segments, net.layout.hidden)
    expected = [
        (s.num_configs, g.count, net.layout.hidden) for s, g in zip(train, segments, strict=True)
    ]
    if [tuple(e.shape) for e in table.emb] != expected:
        raise ValueError(
            f"the history table has shapes {[tuple(e.shape) for e in table.emb]}; this data and "
            f"segment_size need {expected} (build it with HistoryTable.for_graphs)"
        )
    history_table = table

    def forward(g: int, idx_np: np.ndarray, rng: np.random.Generator) -> Tensor:
        # k fresh segments with gradient, the rest from the table (stale-embedding dropout)
        s, t, segs = train[g], tensors[g], segments[g]
        idx = torch.as_tensor(idx_np, dtype=torch.long)
        feat = torch.as_tensor(s.configs.features(idx_np))
        summary = torch.as_tensor(s.configs.summary(idx_np))
        k = min(sampled_segments, segs.count)
        sampled = np.sort(rng.choice(segs.count, size=k, replace=False))
        keep = stale_keep_mask(segs.count - k, dropout_stale, rng)
        pooled = _gst_total(net, t, segs, history_table, g, idx, feat, sampled, keep)
        return net.head(pooled, s.num_nodes, summary)

    def validate() -> dict[str, float]:
        return evaluate_segmented(net, val or [], segment_size)  # scored segmented, as trained

    return train_loop(
        net,
        train,
        forward,
        validate if val else None,
        loss_fn=loss_fn,
        epochs=epochs,
        batch_size=batch_size,
        lr=lr,
        weight_decay=weight_decay,
        max_batch_nodes=2**62,
        seed=seed,
        time_budget=time_budget,
        on_epoch=on_epoch,
    )


# ---------------------------------------------------------------------------- head fine-tuning
@torch.no_grad()
def pooled_segmented(
    net: CostNet, samples: GraphSamples, segment_size: int, batch_size: int = 256
) -> Tensor:
    """``(K, H)`` exact pooled sums of every configuration, computed fresh segment by segment
    (no gradient; memory of one segment for ``batch_size`` configurations)."""
    net.eval()
    t = GraphTensors.of(samples)
    segs = Segments.of(samples, segment_size)
    out = []
    for lo in range(0, samples.num_configs, batch_size):
        idx = np.arange(lo, min(lo + batch_size, samples.num_configs))
        feat = torch.as_tensor(samples.configs.features(idx))
        total = feat.new_zeros(len(idx), net.layout.hidden)
        for j in range(segs.count):
            total += _segment_embedding(net, t, segs, j, feat)
        out.append(total)
    return torch.cat(out) if out else torch.zeros(0, net.layout.hidden)


def finetune_head(
    net: CostNet,
    train: list[GraphSamples],
    val: list[GraphSamples] | None = None,
    *,
    segment_size: int = 4096,
    loss: str = "listmle",
    epochs: int = 5,
    batch_size: int = 32,
    lr: float = 1e-3,
    seed: int = 0,
) -> list[dict[str, float]]:
    """Fine-tune only the head on fresh embeddings (GST+EFD's "F"; module docstring).

    The GNN's parameters are left untouched: the pooled sums of all configurations are computed
    once (:func:`pooled_segmented`), then :func:`graphopt.costmodel.fit.train_loop` trains only
    :attr:`CostNet.mlp` for ``epochs`` passes (batches of ``batch_size`` configurations of one
    graph, Adam on the ranking ``loss``), keeping the best epoch's head by validation tau when
    ``val`` is given.

    Returns:
        One metrics row per epoch (``epoch``, ``train/loss``, ``val/...``, ``time``).
    """
    pooled = [pooled_segmented(net, s, segment_size) for s in train]
    summaries = [_summary(s) for s in train]
    val_inputs = [(pooled_segmented(net, s, segment_size), _summary(s), s) for s in val or []]

    def forward(g: int, idx: np.ndarray, rng: np.random.Generator) -> Tensor:
        return net.head(pooled[g][idx], train[g].num_nodes, summaries[g][idx])

    def validate() -> dict[str, float]:
        preds = [_head(net, z, summary, s.num_nodes) for z, summary, s in val_inputs]
        groups = np.concatenate([np.full(s.num_configs, i) for i, s in enumerate(val or [])])
        return grouped_report(
            np.concatenate(preds), np.concatenate([s.runtime for s in val or []]), groups
        )

    return train_loop(
        net,
        train,
        forward,
        validate if val else None,
        loss_fn=get_loss(loss),
        epochs=epochs,
        batch_size=batch_size,
        lr=lr,
        weight_decay=0.0,
        max_batch_nodes=2**62,
        seed=seed,
        time_budget=None,
        on_epoch=None,
        parameters=net.mlp.parameters(),
    )


# ---------------------------------------------------------------------------- scoring
@torch.no_grad()
def predict_segmented(
    net: CostNet, samples: GraphSamples, segment_size: int, batch_size: int = 256
) -> np.ndarray:
    """``(K,)`` predicted log runtimes, the pooled sum accumulated segment by segment.

    The model sees each segment's induced subgraph (edges between segments dropped), as in
    :func:`fit_gst` with the same ``segment_size``; with ``segment_size >= N`` this is
    :func:`graphopt.costmodel.fit.predict`. Memory: the activations of one segment for
    ``batch_size`` configurations, plus the batch's ``(B, C, Fc)`` configuration features.
    """
    if samples.num_configs == 0:
        return np.zeros(0)
    pooled = pooled_segmented(net, samples, segment_size, batch_size)
    return _head(net, pooled, _summary(samples), samples.num_nodes)


def _summary(samples: GraphSamples) -> Tensor:
    """``(K, S)`` summary features of all of ``samples``' configurations."""
    return torch.as_tensor(samples.configs.summary(np.arange(samples.num_configs)))


@torch.no_grad()
def _head(net: CostNet, pooled: Tensor, summary: Tensor, num_nodes: int) -> np.ndarray:
    """``(K,)`` head outputs for ``(K, H)`` pooled sums and ``(K, S)`` summaries."""
    return net.head(pooled, num_nodes, summary).numpy()


def evaluate_segmented(
    net: CostNet,
    samples: list[GraphSamples],
    segment_size: int,
    ks: tuple[int, ...] = (1, 5, 10),
) -> dict[str, float]:
    """Ranking metrics per graph, averaged over graphs (:func:`metrics.grouped_report`), of
    :func:`predict_segmented`: the keys of :func:`graphopt.costmodel.fit.evaluate`."""
    preds = [predict_segmented(net, s, segment_size) for s in samples]
    groups = np.concatenate([np.full(s.num_configs, i) for i, s in enumerate(samples)])
    return grouped_report(
        np.concatenate(preds), np.concatenate([s.runtime for s in samples]), groups, ks
    )
