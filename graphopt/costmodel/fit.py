"""Training and scoring of :class:`graphopt.costmodel.model.CostNet` on whole graphs.

The loop (top to bottom): every epoch shuffles each graph's configurations into batches (a batch
holds configurations of one graph only, so ranking losses compare like with like), visits the
batches of all graphs in a random order, takes one Adam step per batch (gradient norm clipped at
1), then scores the validation set and keeps the parameters of the best epoch by mean Kendall's
tau. Graphs too large for a batch of ``batch_size`` configurations within ``max_batch_nodes``
nodes get smaller batches (at least 2); graphs too large even for that need Graph Segment
Training (:mod:`graphopt.costmodel.gst`).

Checkpoints (:func:`save_checkpoint`) hold the network's :class:`NetLayout`, its parameters and
the feature layout of the data it was trained on, which :func:`load_checkpoint` and the learned
cost model check before use.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from graphopt.costmodel.data import DecisionConfigs, GraphSamples
from graphopt.costmodel.features import (
    DECISION_FEATURES,
    PRIOR,
    STATIC_FEATURES,
    SUMMARY_FEATURES,
)
from graphopt.costmodel.losses import get_loss
from graphopt.costmodel.metrics import grouped_report
from graphopt.costmodel.model import CostNet, NetLayout
from graphopt.rundir import write_atomic
from graphopt.weights import load_pt

CHECKPOINT_FORMAT = "graphopt-costmodel v1"


@dataclass(frozen=True)
class GraphTensors:
    """The configuration-independent tensors of one graph, built once."""

    node_feat: torch.Tensor
    opcode: torch.Tensor
    edges: torch.Tensor
    config_node_ids: torch.Tensor

    @classmethod
    def of(cls, s: GraphSamples) -> GraphTensors:
        return cls(
            torch.as_tensor(s.node_feat, dtype=torch.float32),
            torch.as_tensor(s.node_opcode, dtype=torch.long),
            torch.as_tensor(s.edges, dtype=torch.long),
            torch.as_tensor(s.config_node_ids, dtype=torch.long),
        )


def net_layout(features: dict[str, Any], hidden: int = 64, layers: int = 3) -> NetLayout:
    """The :class:`NetLayout` for data of this feature layout (:func:`feature_layout`)."""
    return NetLayout(
        node_features=features["node_features"],
        config_features=features["config_features"],
        summary_features=features.get("summary_features", 0),
        prior_column=features.get("prior_column", -1),
        hidden=hidden,
        layers=layers,
    )


def feature_layout(samples: list[GraphSamples]) -> dict[str, Any]:
    """What a checkpoint records about its data: kind (``graphopt`` decisions or ``tpugraphs``
    layouts) and the feature counts (and names for graphopt).

    Raises:
        ValueError: graphs of different kinds or feature counts in one dataset.
    """
    if not samples:
        raise ValueError("empty dataset: no graphs to train on")
    layouts = set()
    for s in samples:
        kind = "graphopt" if isinstance(s.configs, DecisionConfigs) else "tpugraphs"
        layouts.add((kind, s.node_feat.shape[1], s.configs.num_features, s.configs.num_summary))
    if len(layouts) > 1:
        raise ValueError(
            f"the dataset mixes feature layouts {sorted(layouts)}; train one model per layout"
        )
    kind, nf, cf, sf = layouts.pop()
    out: dict[str, Any] = {
        "kind": kind,
        "node_features": nf,
        "config_features": cf,
        "summary_features": sf,
    }
    if kind == "graphopt":
        out["static_names"] = list(STATIC_FEATURES)
        out["decision_names"] = list(DECISION_FEATURES)
        out["summary_names"] = list(SUMMARY_FEATURES)
        out["prior_column"] = SUMMARY_FEATURES.index(PRIOR)
    return out


def batch_size_for(num_nodes: int, batch_size: int, max_batch_nodes: int) -> int:
    """Configurations per batch for a graph of ``num_nodes`` nodes: ``batch_size``, fewer when
    ``batch_size * num_nodes > max_batch_nodes``, never fewer than 2."""
    return max(2, min(batch_size, max_batch_nodes // max(num_nodes, 1)))


@torch.no_grad()
def predict(
    net: CostNet, samples: GraphSamples, batch_size: int = 256, max_batch_nodes: int = 2_000_000
) -> np.ndarray:
    """``(K,)`` predicted log runtimes of all configurations of one graph."""
    net.eval()
    t = GraphTensors.of(samples)
    static = net.static(t.node_feat, t.opcode)
    step = batch_size_for(samples.num_nodes, batch_size, max_batch_nodes)
    out = []
    for lo in range(0, samples.num_configs, step):
        idx = np.arange(lo, min(lo + step, samples.num_configs))
        feat = torch.as_tensor(samples.configs.features(idx))
        total = net.segment_sum(static, t.edges, t.config_node_ids, feat)
        summary = torch.as_tensor(samples.configs.summary(idx))
        out.append(net.head(total, samples.num_nodes, summary).numpy())
    return np.concatenate(out) if out else np.zeros(0)


def evaluate(
    net: CostNet, samples: list[GraphSamples], ks: tuple[int, ...] = (1, 5, 10)
) -> dict[str, float]:
    """Ranking metrics per graph, averaged over graphs (:func:`metrics.grouped_report`)."""
    preds = [predict(net, s) for s in samples]
    groups = np.concatenate([np.full(s.num_configs, i) for i, s in enumerate(samples)])
    return grouped_report(
        np.concatenate(preds), np.concatenate([s.runtime for s in samples]), groups, ks
    )


def _batches(
    samples: list[GraphSamples], batch_size: int, max_batch_nodes: int, rng: np.random.Generator
) -> Iterator[tuple[int, np.ndarray]]:
    jobs = []
    for g, s in enumerate(samples):
        step = batch_size_for(s.num_nodes, batch_size, max_batch_nodes)
        perm = rng.permutation(s.num_configs)
        jobs += [(g, perm[lo : lo + step]) for lo in range(0, s.num_configs, step)]
    for j in rng.permutation(len(jobs)):
        g, idx = jobs[j]
        if len(idx) >= 2:
            yield g, np.sort(idx)


def fit(
    net: CostNet,
    train: list[GraphSamples],
    val: list[GraphSamples] | None = None,
    *,
    loss: str = "listmle",
    epochs: int = 10,
    batch_size: int = 32,
    lr: float = 1e-3,
    weight_decay: float = 0.0,
    max_batch_nodes: int = 400_000,
    seed: int = 0,
    time_budget: float | None = None,
    on_epoch: Callable[[dict[str, float]], None] | None = None,
) -> list[dict[str, float]]:
    """Train ``net`` in place (see the module docstring); returns one metrics row per epoch.

    Args:
        loss: a name of :data:`graphopt.costmodel.losses.LOSSES`.
        time_budget: stop after the epoch during which this many seconds have passed.
        on_epoch: called with each epoch's row (``epoch``, ``train/loss``, ``val/...``, ``time``).

    At the end ``net`` holds the best epoch's parameters by validation tau (the last epoch's
    without a validation set).
    """
    loss_fn = get_loss(loss)
    tensors = [GraphTensors.of(s) for s in train]

    def forward(g: int, idx: np.ndarray, rng: np.random.Generator) -> torch.Tensor:
        s, t = train[g], tensors[g]
        feat = torch.as_tensor(s.configs.features(idx))
        summary = torch.as_tensor(s.configs.summary(idx))
        return net(t.node_feat, t.opcode, t.edges, t.config_node_ids, feat, summary)

    return train_loop(
        net,
        train,
        forward,
        (lambda: evaluate(net, val)) if val else None,
        loss_fn=loss_fn,
        epochs=epochs,
        batch_size=batch_size,
        lr=lr,
        weight_decay=weight_decay,
        max_batch_nodes=max_batch_nodes,
        seed=seed,
        time_budget=time_budget,
        on_epoch=on_epoch,
    )


Forward = Callable[[int, np.ndarray, np.random.Generator], torch.Tensor]
"""``(graph index, configuration indices, generator) -> (B,)`` predicted log runtimes."""


def train_loop(
    net: CostNet,
    train: list[GraphSamples],
    forward: Forward,
    validate: Callable[[], dict[str, float]] | None,
    *,
    loss_fn: Callable[..., torch.Tensor],
    epochs: int,
    batch_size: int,
    lr: float,
    weight_decay: float,
    max_batch_nodes: int,
    seed: int,
    time_budget: float | None,
    on_epoch: Callable[[dict[str, float]], None] | None,
    parameters: Iterable[torch.nn.Parameter] | None = None,
) -> list[dict[str, float]]:
    """The loop of :func:`fit`, :func:`graphopt.costmodel.gst.fit_gst` and
    :func:`graphopt.costmodel.gst.finetune_head` (module docstring): ``forward`` predicts a batch
    (whole-graph, segmented, or the head on stored sums), ``validate`` scores the validation set;
    one generator seeded with ``seed`` drives the batches and whatever ``forward`` samples.
    ``parameters``: what Adam updates (default: all of ``net``'s)."""
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    runtimes = [torch.as_tensor(s.runtime, dtype=torch.float32) for s in train]
    params = list(net.parameters() if parameters is None else parameters)
    opt = torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    history: list[dict[str, float]] = []
    best_tau, best_state = -math.inf, None
    start = time.perf_counter()
    for epoch in range(1, epochs + 1):
        # ---- one pass over every graph's configurations
        net.train()
        total, count = 0.0, 0
        for g, idx in _batches(train, batch_size, max_batch_nodes, rng):
            value = loss_fn(forward(g, idx, rng), runtimes[g][idx])
            opt.zero_grad()
            value.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            total, count = total + float(value.detach()), count + 1
        row = {"epoch": float(epoch), "train/loss": total / max(count, 1)}
        # ---- validation and best parameters
        if validate is not None:
            row.update({f"val/{k}": v for k, v in validate().items()})
            if row["val/kendall_tau"] > best_tau:
                best_tau, best_state = row["val/kendall_tau"], copy.deepcopy(net.state_dict())
        row["time"] = time.perf_counter() - start
        history.append(row)
        if on_epoch is not None:
            on_epoch(row)
        if time_budget is not None and row["time"] > time_budget:
            break
    if best_state is not None:
        net.load_state_dict(best_state)
    return history


def save_checkpoint(path: str | Path, net: CostNet, features: dict[str, Any], **extra: Any) -> Path:
    """Write ``net`` with its layout and the data's feature layout; atomic (temp file + rename),
    Ctrl-C held back until the file is complete (:func:`graphopt.rundir.write_atomic`)."""
    path = Path(path)
    data = {
        "format": CHECKPOINT_FORMAT,
        "layout": net.layout.to_dict(),
        "features": features,
        "state_dict": net.state_dict(),
        **extra,
    }
    write_atomic(path, lambda tmp: torch.save(data, tmp))
    return path


def load_checkpoint(
    path: str | Path, expect: dict[str, Any] | None = None
) -> tuple[CostNet, dict[str, Any]]:
    """Read a checkpoint written by :func:`save_checkpoint`.

    Args:
        expect: the feature layout the caller will feed (:func:`feature_layout`); a mismatch
            raises instead of predicting nonsense.

    Raises:
        ValueError: not a cost-model checkpoint, or one for another feature layout.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such checkpoint file")
    data = load_pt(path, "give a model.pt of graphopt costmodel train")
    if not isinstance(data, dict) or data.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(
            f"{path}: not a cost-model checkpoint (expected format {CHECKPOINT_FORMAT!r})"
        )
    features = data["features"]
    if expect is not None:
        for key in sorted(set(features) | set(expect), key=lambda k: (k != "kind", k)):
            if features.get(key) != expect.get(key):
                raise ValueError(
                    f"{path}: the model was trained on {key} = {features.get(key)!r} but the data "
                    f"has {expect.get(key)!r}; retrain the model on data of this layout"
                )
    net = CostNet(NetLayout(**data["layout"]))
    net.load_state_dict(data["state_dict"])
    net.eval()
    return net, data
