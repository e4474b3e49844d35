"""Training the step-wise placement policy: imitation of the best heuristic, then PPO with a
shared per-graph baseline.

The loop, top to bottom (:func:`train`):

1. **Set-up.** Every (training graph, cluster) pair becomes a :class:`Item`: the step-wise
   decoder's arrays (:func:`graphopt.decoders.stepwise.step_graph`, anchored at the best
   heuristic's placement), the encoded graph, the reference step time and a prepared simulator.
2. **Imitation (DAgger).** The policy decodes sampled episodes; every visited state is labelled
   with the best heuristic's device for its op and the head learns it by cross-entropy. After it,
   greedy decoding reproduces the heuristic's placement (the ``anchor`` feature makes the label
   learnable on any graph).
3. **PPO.** Each update draws ``graphs_per_update`` items and decodes ``samples_per_graph``
   sampled episodes of each, the head evaluated inside the compiled decoder. The simulator prices
   every sampled placement at once (``evaluate_batch``); an episode's return is ``log(t_ref /
   t)`` (an invalid placement: ``log(1/16)``), and its advantage is that return standardised
   among the samples of the same graph (the shared baseline of Decima, POMO and Jeon et al.,
   ICLR 2023; no critic, so no value of one graph's scale leaks into another's). Every step of
   an episode carries its episode's advantage; PPO's clipped surrogate (Schulman et al., 2017)
   runs ``epochs`` passes over the recorded steps, the encoder run once per graph per pass.
   With ``algorithm: search`` (expert iteration) each update instead runs the decoder search
   of ``graphopt optimize`` from the policy's greedy placement (or the item's target, where
   faster) and imitates the fastest placement found (:func:`search_batch`): with the ops'
   position features (``policy: {positions: K}``) the policy trained on one graph decodes it
   exactly, so its greedy decision keeps what the search found.
4. **Validation.** Every ``eval_every`` updates, one greedy decode per validation graph: the
   geometric mean of ``t_ref / t`` (``val/speedup``). The best checkpoint is kept.

Steps with a single allowed device are decoded but not trained on (no choice to learn).
Checkpoints are data: ``torch.save`` of tensors and plain values, read with
``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from graphopt.accelerator import check_device_name, resolve_device
from graphopt.decoders.stepwise import (
    Episode,
    HeadParams,
    StepGraph,
    decode,
    lookahead,
    step_graph,
)
from graphopt.encoding import encode
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.rundir import write_atomic
from graphopt.sim import PreparedGraph
from graphopt.strict_json import dumps
from graphopt.train.shared_baseline import INVALID_LOG_REWARD as INVALID_LOG_REWARD
from graphopt.train.shared_baseline import advantages as advantages
from graphopt.train.shared_baseline import geomean as geomean
from graphopt.train.shared_baseline import log_returns
from policies.step_policy import StepPolicy

CHECKPOINT_KIND = "graphopt-step-policy"
CHECKPOINT_VERSION = 1
ALGORITHMS = ("ppo", "lookahead", "search")
MAX_COUNT = 1_000_000
"""The largest value of every count of :class:`StepTrainConfig` (updates, samples, steps...)."""


@dataclass
class StepTrainConfig:
    """Hyper-parameters of a step-wise training run (each documented under its field)."""

    updates: int = 200
    """PPO updates after imitation."""
    imitation_updates: int = 20
    """DAgger updates before PPO (0: none)."""
    graphs_per_update: int = 8
    """Graphs drawn per update."""
    samples_per_graph: int = 16
    """Sampled episodes per graph and update (the shared baseline's group)."""
    epochs: int = 2
    """Passes over an update's steps (PPO's epochs; imitation's too; with ``"search"``, the most
    passes spent imitating the targets, stopped once greedy decodes them)."""
    minibatches: int = 4
    """Optimizer steps per pass: the update's graphs split into this many groups."""
    learning_rate: float = 3e-4
    """Adam's step size."""
    clip_range: float = 0.2
    """PPO's ratio clip."""
    ent_coef: float = 0.0
    """Entropy bonus."""
    imitation_coef: float = 0.0
    """Weight of the imitation loss (the target's devices) beside PPO's (0: PPO alone)."""
    self_imitation: bool = False
    """Replace an item's imitation target by a faster sampled placement (self-imitation)."""
    algorithm: str = "ppo"
    """What follows imitation: ``"ppo"``, ``"lookahead"`` (approximate policy iteration with
    the rollout algorithm's labels, :func:`lookahead_batch`) or ``"search"`` (expert iteration:
    the decoder search of :func:`graphopt.optimizer.optimize_graph` started from the policy's
    greedy placement improves the imitation target, :func:`search_batch`)."""
    search_calls: int = 256
    """Simulator calls of ``"search"``'s decoder search per graph and update."""
    lookahead_steps: int = 32
    """States labelled per graph and update by ``"lookahead"``."""
    lookahead_margin: float = 1e-3
    """Smallest relative gain of a device over the policy's own choice that makes it the label."""
    lookahead_weight: float = 5.0
    """Weight of a label that differs from the policy's own choice (1: the others)."""
    lookahead_buffer: int = 8
    """Updates whose labelled states each ``"lookahead"`` update trains on (DAgger's aggregate)."""
    max_grad_norm: float = 1.0
    """Gradient clipping."""
    adv_floor: float = 1e-3
    """Smallest standard deviation the returns of one graph are divided by."""
    eval_every: int = 10
    """Updates between validations."""
    seed: int = 0
    """Seeds torch and the decoders' samples."""
    threads: int = 2
    """torch.set_num_threads (the decoder and simulator run on one core)."""
    device: str = "auto"
    """Where the encoder and the updates compute: ``auto|cpu|cuda[:N]``
    (:func:`graphopt.accelerator.resolve_device`; the decoder and its head run on the CPU)."""
    policy: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of :class:`policies.step_policy.StepPolicy`."""

    def validate(self) -> StepTrainConfig:
        """Check every field's range; ValueError naming the field otherwise."""
        for name in (
            "graphs_per_update",
            "samples_per_graph",
            "epochs",
            "minibatches",
            "eval_every",
            "threads",
            "lookahead_steps",
            "lookahead_buffer",
            "search_calls",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COUNT:
                raise ValueError(f"{name} must be an integer in 1..{MAX_COUNT}, got {value!r}")
        for name in ("updates", "imitation_updates"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
                raise ValueError(f"{name} must be an integer in 0..{MAX_COUNT}, got {value!r}")
        for name in (
            "learning_rate",
            "clip_range",
            "max_grad_norm",
            "adv_floor",
            "lookahead_weight",
        ):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not (0 < value < math.inf):
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
        if self.algorithm not in ALGORITHMS:
            raise ValueError(
                f"algorithm must be one of {', '.join(ALGORITHMS)}, got {self.algorithm!r}"
            )
        check_device_name(self.device)
        for name in ("ent_coef", "imitation_coef", "lookahead_margin"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0 <= value < math.inf:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        return self


@dataclass
class Item:
    """One (graph, cluster) pair as the trainer uses it."""

    sg: StepGraph
    observation: dict[str, np.ndarray]
    reference_time: float
    reference_name: str
    prepared: PreparedGraph
    target: np.ndarray
    """The placement imitation teaches: the best heuristic's, replaced by any sampled placement
    that simulates faster (:func:`improve_target`)."""
    target_return: float = 0.0
    """``log(t_ref / t)`` of the target (0 for the best heuristic's own)."""

    @property
    def name(self) -> str:
        return f"{self.sg.graph.name}@{self.sg.cluster.name}"


ReferenceFn = Callable[[CompGraph, Cluster], tuple[np.ndarray, float, str]]


def default_reference(graph: CompGraph, cluster: Cluster) -> tuple[np.ndarray, float, str]:
    """The best heuristic's placement, step time and name (cached on disk by fingerprints)."""
    from graphopt.baselines.reference_cache import cached_best_placement

    return cached_best_placement(graph, cluster)


def make_item(
    graph: CompGraph, cluster: Cluster, reference: ReferenceFn = default_reference
) -> Item:
    """The :class:`Item` of ``graph`` on ``cluster`` (module docstring, step 1)."""
    placement, ref_time, ref_name = reference(graph, cluster)
    if not (ref_time > 0 and math.isfinite(ref_time)):
        raise ValueError(
            f"{graph.name} on {cluster.name}: the best heuristic has no valid placement "
            f"(step time {ref_time}); choose a cluster with room for the graph"
        )
    n = graph.num_ops
    observation = encode(graph, cluster, n, max(graph.num_edges, 1)).observation
    return Item(
        sg=step_graph(graph, cluster, placement),
        observation=observation,
        reference_time=float(ref_time),
        reference_name=ref_name,
        prepared=PreparedGraph(graph, cluster),
        target=np.asarray(placement, dtype=np.int64).copy(),
    )


# ---------------------------------------------------------------------------- rollouts
@dataclass
class Batch:
    """The decided steps of ``K`` episodes of one item, flattened: step ``s`` placed op
    ``ops[s]`` on ``actions[s]`` seeing ``feats[s]`` and ``masks[s]``; ``episode[s]`` is its
    episode. Only steps with a choice (two or more allowed devices) are kept."""

    item: Item
    ops: torch.Tensor
    actions: torch.Tensor
    feats: torch.Tensor
    masks: torch.Tensor
    episode: torch.Tensor
    step_times: np.ndarray
    valid: np.ndarray
    decisions: int
    pre: torch.Tensor
    """The op embeddings' projection the episodes were decoded with ``(N, H)`` (no gradient)."""
    calls: int = 0
    """Placements the simulator priced for this batch."""
    own: torch.Tensor | None = None
    """For labelled states (:func:`lookahead_batch`): the policy's own device at each step."""


def rollout(
    policy: StepPolicy, item: Item, samples: int, rng: np.random.Generator, mode: str = "sample"
) -> Batch:
    """``samples`` episodes of ``item`` decoded by ``policy`` and priced by the simulator."""
    with torch.no_grad():
        pre = policy.embed(item.observation)
    return rollout_with(policy, item, pre, samples, rng, mode)


def rollout_with(
    policy: StepPolicy,
    item: Item,
    pre: torch.Tensor,
    samples: int,
    rng: np.random.Generator,
    mode: str = "sample",
    improve: bool = False,
) -> Batch:
    """:func:`rollout` with the op embeddings' projection ``pre`` already computed; with
    ``improve``, the item's imitation target takes the best sample if it is faster
    (:func:`improve_target`)."""
    head = policy.head_params(pre)
    episodes = [decode(item.sg, mode, head, rng=rng) for _ in range(samples)]
    placements = np.stack([e.placement for e in episodes])
    result = item.prepared.evaluate_batch(placements)
    batch = _batch(item, episodes, result.step_time, result.valid, pre)
    if improve:
        improve_target(batch, placements)
    return batch


def _batch(
    item: Item, episodes: Sequence[Episode], step_times: Any, valid: Any, pre: torch.Tensor
) -> Batch:
    ops = np.concatenate([e.ops for e in episodes])
    actions = np.concatenate([e.actions for e in episodes])
    feats = np.concatenate([e.feats for e in episodes])
    masks = np.concatenate([e.masks for e in episodes])
    episode = np.repeat(np.arange(len(episodes)), [len(e.ops) for e in episodes])
    keep = masks.sum(axis=1) >= 2
    device = pre.device
    return Batch(
        item=item,
        ops=torch.from_numpy(ops[keep]).to(device),
        actions=torch.from_numpy(actions[keep]).to(device),
        feats=torch.from_numpy(feats[keep]).to(device),
        masks=torch.from_numpy(masks[keep]).to(device),
        episode=torch.from_numpy(episode[keep]).to(device),
        step_times=np.asarray(step_times, dtype=np.float64),
        valid=np.asarray(valid, dtype=bool),
        decisions=int(len(ops)),
        pre=pre.detach(),
        calls=len(step_times),
    )


def returns(batch: Batch) -> np.ndarray:
    """``log(t_ref / t)`` of each episode; an invalid one scores ``INVALID_LOG_REWARD``
    (:func:`graphopt.train.shared_baseline.log_returns`)."""
    return log_returns(batch.step_times, batch.valid, batch.item.reference_time)


def improve_target(batch: Batch, placements: np.ndarray) -> bool:
    """Make the best sampled placement of ``batch`` its item's imitation target if it simulates
    faster than the target; returns whether it did (self-imitation: Oh et al., ICML 2018)."""
    r = returns(batch)
    best = int(np.argmax(r))
    if r[best] > batch.item.target_return + 1e-9:
        batch.item.target = placements[best].copy()
        batch.item.target_return = float(r[best])
        return True
    return False


def step_log_probs(
    policy: StepPolicy, batch: Batch, pre: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probability of each recorded action and each step's entropy, given the op embeddings'
    projection ``pre`` of the batch's graph (with gradients when ``pre`` has them)."""
    return log_probs(policy.logits(pre[batch.ops], batch.feats, batch.masks), batch)


def log_probs(logits: torch.Tensor, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probability of each recorded action and each step's entropy, from the steps' logits."""
    logp_all = torch.log_softmax(logits, dim=-1)
    logp = logp_all.gather(1, batch.actions[:, None]).squeeze(1)
    p = logp_all.exp()
    entropy = -(torch.where(batch.masks, p * logp_all, torch.zeros_like(p))).sum(dim=1)
    return logp, entropy


# ---------------------------------------------------------------------------- updates
LossFn = Callable[[int, Batch, torch.Tensor], tuple[torch.Tensor, dict[str, float]]]
"""The loss of batch ``i`` given its graph's ``pre`` (with gradients), and figures to sum."""


def minibatch_steps(
    policy: StepPolicy,
    optimizer: torch.optim.Optimizer,
    batches: Sequence[Batch],
    loss_fn: LossFn,
    config: StepTrainConfig,
) -> dict[str, float]:
    """``config.epochs`` passes over ``batches`` in ``config.minibatches`` groups of graphs, one
    optimizer step per group (the encoder runs once per graph and step). Returns the figures of
    the last pass, each summed over the batches and divided by the steps (decisions) trained on."""
    steps = max(sum(len(b.ops) for b in batches), 1)
    groups = np.array_split(np.arange(len(batches)), min(config.minibatches, len(batches)))
    figures: dict[str, float] = {}
    for _ in range(config.epochs):
        figures = {}
        for group in groups:
            chosen = [batches[i] for i in group]
            group_steps = max(sum(len(b.ops) for b in chosen), 1)
            optimizer.zero_grad()
            pres = policy.embed_many([b.item.observation for b in chosen])
            loss = torch.zeros((), device=pres[0].device)
            for i, b, pre in zip(group, chosen, pres, strict=True):
                part, found = loss_fn(int(i), b, pre)
                loss = loss + part / group_steps
                for key, value in found.items():
                    figures[key] = figures.get(key, 0.0) + value / steps
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), config.max_grad_norm)
            optimizer.step()
    return figures


def imitation_update(
    policy: StepPolicy,
    optimizer: torch.optim.Optimizer,
    batches: Sequence[Batch],
    config: StepTrainConfig,
) -> dict[str, float]:
    """DAgger: the cross-entropy of the target's device (the best heuristic's, or a faster
    sampled placement) on the visited states."""

    def loss_fn(i: int, b: Batch, pre: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
        logits = policy.logits(pre[b.ops], b.feats, b.masks)
        return imitation_loss(logits, b)

    return minibatch_steps(policy, optimizer, batches, loss_fn, config)


def imitation_loss(logits: torch.Tensor, b: Batch) -> tuple[torch.Tensor, dict[str, float]]:
    """Summed cross-entropy of the item's target devices at the batch's steps, and the figures
    ``imitation/loss`` and ``imitation/accuracy`` (sums, per step once divided)."""
    target = torch.from_numpy(b.item.target).to(logits.device)[b.ops]
    loss = F.cross_entropy(logits, target, reduction="sum")
    correct = float((logits.argmax(dim=1) == target).sum())
    return loss, {"imitation/loss": float(loss.detach()), "imitation/accuracy": correct}


def ppo_update(
    policy: StepPolicy,
    optimizer: torch.optim.Optimizer,
    batches: Sequence[Batch],
    config: StepTrainConfig,
) -> dict[str, float]:
    """PPO's clipped surrogate over the steps of ``batches`` (module docstring, step 3)."""
    adv_steps, old_logp = [], []
    for b in batches:
        adv = advantages(returns(b), config.adv_floor)
        adv_steps.append(torch.from_numpy(adv).float().to(b.pre.device)[b.episode])
        with torch.no_grad():
            old_logp.append(step_log_probs(policy, b, b.pre)[0])
    low, high = 1 - config.clip_range, 1 + config.clip_range

    def loss_fn(i: int, b: Batch, pre: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
        logits = policy.logits(pre[b.ops], b.feats, b.masks)
        logp, entropy = log_probs(logits, b)
        ratio = torch.exp(logp - old_logp[i])
        adv = adv_steps[i]
        surrogate = torch.min(ratio * adv, ratio.clamp(low, high) * adv)
        loss = -(surrogate.sum() + config.ent_coef * entropy.sum())
        with torch.no_grad():
            found = {
                "ppo/clip_fraction": float(((ratio - 1).abs() > config.clip_range).sum()),
                "ppo/entropy": float(entropy.sum()),
                "ppo/approx_kl": float((old_logp[i] - logp).sum()),
            }
        if config.imitation_coef > 0:
            imitation, figures = imitation_loss(logits, b)
            loss = loss + config.imitation_coef * imitation
            found.update(figures)
        return loss, found

    return minibatch_steps(policy, optimizer, batches, loss_fn, config)


def lookahead_batch(
    policy: StepPolicy,
    item: Item,
    pre: torch.Tensor,
    steps: int,
    margin: float,
    rng: np.random.Generator,
) -> Batch:
    """States of the policy's greedy episode labelled by the rollout algorithm (Bertsekas):
    at ``steps`` random steps with a choice, each allowed device is tried and the episode
    finished greedily by the policy; the simulator prices every branch at once, and a step's
    label is the fastest branch's device if it beats the policy's own choice by more than
    ``margin`` (relative), else the policy's own device. Imitating these labels is a step of
    approximate policy iteration: the rollout policy is never slower than the policy it
    finishes with. The greedy episode itself is the batch's single priced episode, and a
    branch faster than the item's target becomes its target (as :func:`improve_target`)."""
    head = policy.head_params(pre)
    episode = decode(item.sg, "greedy", head)
    n = item.sg.num_ops
    choice = np.flatnonzero(episode.masks.sum(axis=1) >= 2)
    chosen = np.sort(rng.choice(choice, size=min(steps, len(choice)), replace=False))
    _, branches = lookahead(item.sg, head, episode.actions, chosen)
    flat = branches.reshape(-1, n)
    own = episode.actions[chosen]
    # the branch of the policy's own device is the episode itself: priced once, as the episode
    is_own = np.zeros(branches.shape[:2], dtype=bool)
    is_own[np.arange(len(chosen)), own] = True
    priced_rows = (flat[:, 0] >= 0) & ~is_own.reshape(-1)
    priced = item.prepared.evaluate_batch(
        np.concatenate([episode.placement[None, :], flat[priced_rows]])
    )
    times = np.where(priced.valid, priced.step_time, np.inf)
    flat_times = np.full(len(flat), np.inf)
    flat_times[priced_rows] = times[1:]
    flat_times[is_own.reshape(-1)] = times[0]
    branch_times = flat_times.reshape(branches.shape[:2])
    own_time = branch_times[np.arange(len(chosen)), own]
    best = branch_times.argmin(axis=1)
    gain = (own_time - branch_times[np.arange(len(chosen)), best]) / own_time
    labels = np.where(gain > margin, best, own)
    fastest = float(branch_times.min()) if len(chosen) else np.inf
    if np.isfinite(fastest):
        r = math.log(item.reference_time / fastest)
        if r > item.target_return + 1e-9:
            j, d = np.unravel_index(int(branch_times.argmin()), branch_times.shape)
            item.target = branches[j, d].copy()
            item.target_return = r
    device = pre.device
    return Batch(
        item=item,
        ops=torch.from_numpy(episode.ops[chosen]).to(device),
        actions=torch.from_numpy(labels.astype(np.int64)).to(device),
        feats=torch.from_numpy(episode.feats[chosen]).to(device),
        masks=torch.from_numpy(episode.masks[chosen]).to(device),
        episode=torch.zeros(len(chosen), dtype=torch.int64, device=device),
        step_times=times[:1],
        valid=np.asarray(priced.valid[:1], dtype=bool),
        decisions=int(n + int(priced_rows.sum()) * n // 2),
        pre=pre.detach(),
        calls=len(times),
        own=torch.from_numpy(own.astype(np.int64)).to(device),
    )


def lookahead_update(
    policy: StepPolicy,
    optimizer: torch.optim.Optimizer,
    batches: Sequence[Batch],
    config: StepTrainConfig,
) -> dict[str, float]:
    """Cross-entropy of the rollout algorithm's labels (:func:`lookahead_batch`) on the
    labelled states, a label other than the policy's own choice weighted
    ``config.lookahead_weight``."""

    def loss_fn(i: int, b: Batch, pre: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
        logits = policy.logits(pre[b.ops], b.feats, b.masks)
        ce = F.cross_entropy(logits, b.actions, reduction="none")
        if b.own is not None:
            ce = ce * torch.where(b.actions != b.own, config.lookahead_weight, 1.0)
        loss = ce.sum()
        return loss, {"lookahead/loss": float(loss.detach())}

    figures = minibatch_steps(policy, optimizer, batches, loss_fn, config)
    return figures


def search_batch(
    policy: StepPolicy,
    item: Item,
    pre: torch.Tensor,
    samples: int,
    calls: int,
    rng: np.random.Generator,
) -> Batch:
    """Expert iteration (Anthony et al., 2017; AlphaZero's policy targets): the decoder search
    (:func:`graphopt.optimizer.optimize_graph`) starts from the policy's greedy placement, or from
    the item's target where that is faster, and the fastest placement it finds becomes the
    target if it beats it. ``calls`` simulator calls in all: the greedy placement's price and
    the search's (the batch's ``calls``). The batch is :func:`target_batch`'s (the target's own
    trajectory, the greedy episode and ``samples`` sampled ones, labelled with the target's
    devices by imitation), its one step time the search's result."""
    from graphopt.optimizer import optimize_graph
    from graphopt.typing import Decision

    head = policy.head_params(pre)
    greedy = decode(item.sg, "greedy", head)
    priced = item.prepared.evaluate_batch(greedy.placement[None, :])
    own = math.log(item.reference_time / priced.step_time[0]) if priced.valid[0] else -math.inf
    start = greedy.placement if own >= item.target_return else item.target
    found = optimize_graph(
        item.sg.graph,
        item.sg.cluster,
        calls=max(calls - 1, 1),
        seed=int(rng.integers(2**31)),
        start=Decision(placement=start),
        start_name="policy",
    )
    placement = np.asarray(found.decision.placement, dtype=np.int64)
    step_time = found.measurement.step_time if found.measurement.valid else math.inf
    if math.isfinite(step_time):
        r = math.log(item.reference_time / step_time)
        if r > item.target_return + 1e-9:
            item.target, item.target_return = placement.copy(), r
            if canonical_target(item):  # the anchor's labels moved: the greedy episode too
                greedy = decode(item.sg, "greedy", head)
    batch = target_batch(item, pre, head, greedy, samples, rng)
    batch.step_times = np.array([step_time])
    batch.valid = np.array([math.isfinite(step_time)])
    batch.calls = found.calls + 1
    return batch


def first_use_labels(sg: StepGraph, placement: np.ndarray) -> np.ndarray:
    """``labels[d]``: device ``d``'s new index when devices are numbered in the order the
    step-wise decoder first uses them under ``placement`` (the op order does not depend on the
    placement); devices ``placement`` leaves idle follow, in their order."""
    ops = decode(sg, "anchor").ops
    order = list(dict.fromkeys(np.asarray(placement)[ops].tolist()))
    order += [d for d in range(sg.num_devices) if d not in order]
    labels = np.empty(sg.num_devices, dtype=np.int64)
    labels[order] = np.arange(sg.num_devices)
    return labels


def canonical_target(item: Item) -> bool:
    """Number the devices of the item's target and anchor in the order the target first uses
    them, where the cluster does not tell the devices apart; returns whether it did.

    A device-agnostic head scores two devices with equal features alike, and the decoder takes
    the lower one; a target that took the higher one at such a step (two idle devices, say)
    cannot be imitated, and the states after it carry the other labels. Renumbering by first use
    makes every new device the lowest idle one. Done only when the renumbering is a symmetry of
    the cluster as the simulator sees it: every device keeps its kind, and the target and the
    anchor simulate to the same step times renumbered (two simulator calls)."""
    sg = item.sg
    labels = first_use_labels(sg, item.target)
    if (labels == np.arange(sg.num_devices)).all():
        return False
    kinds = np.array([d.kind for d in sg.cluster.devices], dtype=object)
    if (kinds[labels] != kinds).any():
        return False
    target, anchor = labels[item.target], labels[sg.anchor]
    both = np.stack([item.target, target, sg.anchor, anchor])
    result = item.prepared.evaluate_batch(both)
    times = np.asarray(result.step_time, dtype=np.float64)
    if not np.asarray(result.valid).all() or not (
        np.isclose(times[0], times[1], rtol=1e-9) and np.isclose(times[2], times[3], rtol=1e-9)
    ):
        return False
    item.target = target
    item.sg = step_graph(sg.graph, sg.cluster, anchor)
    return True


def target_batch(
    item: Item,
    pre: torch.Tensor,
    head: HeadParams,
    greedy: Episode,
    samples: int,
    rng: np.random.Generator,
) -> Batch:
    """The states on which imitation teaches the item's target: the target's own trajectory,
    the policy's greedy episode ``greedy`` and ``samples`` episodes sampled from ``head`` (the
    head of ``pre``). No simulator call: the batch's step time is the target's."""
    episodes = [decode(item.sg, "given", given=item.target), greedy]
    episodes += [decode(item.sg, "sample", head, rng=rng) for _ in range(samples)]
    target_time = item.reference_time / math.exp(item.target_return)
    batch = _batch(item, episodes, np.array([target_time]), np.array([True]), pre)
    batch.calls = 0
    return batch


FIT_PASSES = 10
"""Imitation passes between two checks of :func:`imitate_targets`."""


def imitate_targets(
    policy: StepPolicy,
    optimizer: torch.optim.Optimizer,
    batches: Sequence[Batch],
    config: StepTrainConfig,
    rng: np.random.Generator,
) -> dict[str, float]:
    """Expert iteration's imitation: :func:`imitation_update` in rounds of
    :data:`FIT_PASSES` passes, each round on fresh DAgger states (:func:`target_batch` with the
    policy's current greedy episode), until every batch's greedy decode is its item's target or
    ``config.epochs`` passes are spent. Adds ``search/matched`` (share of the items whose greedy
    decode is the target) and ``search/passes`` to the figures."""
    rounds = replace(config, epochs=min(FIT_PASSES, config.epochs))
    passes, stats = 0, {}
    while True:
        stats = imitation_update(policy, optimizer, batches, rounds)
        passes += rounds.epochs
        with torch.no_grad():
            pres = policy.embed_many([b.item.observation for b in batches])
        heads = [policy.head_params(pre) for pre in pres]
        greedy = [decode(b.item.sg, "greedy", h) for b, h in zip(batches, heads, strict=True)]
        matched = [
            np.array_equal(g.placement, b.item.target) for g, b in zip(greedy, batches, strict=True)
        ]
        if all(matched) or passes >= config.epochs:
            break
        samples = config.samples_per_graph
        batches = [
            target_batch(b.item, pre, h, g, samples, rng)
            for b, pre, h, g in zip(batches, pres, heads, greedy, strict=True)
        ]
    stats.update({"search/matched": float(np.mean(matched)), "search/passes": float(passes)})
    return stats


# ---------------------------------------------------------------------------- evaluation
def greedy_speedups(policy: StepPolicy, items: Sequence[Item]) -> np.ndarray:
    """``t_ref / t`` of each item's greedy decode (0 for an invalid placement)."""
    out = np.zeros(len(items))
    for i, item in enumerate(items):
        with torch.no_grad():
            head = policy.head_params(policy.embed(item.observation))
        placement = decode(item.sg, "greedy", head).placement
        m = item.prepared.evaluate_batch(placement[None, :])
        out[i] = item.reference_time / m.step_time[0] if m.valid[0] else 0.0
    return out


# ---------------------------------------------------------------------------- checkpoints
def save_checkpoint(path: Path, policy: StepPolicy, extra: dict[str, Any]) -> None:
    """Write the policy's weights and configuration (data only) to ``path`` atomically
    (:func:`graphopt.rundir.write_atomic`)."""
    data = {
        "kind": CHECKPOINT_KIND,
        "version": CHECKPOINT_VERSION,
        "policy_config": dict(policy.config),
        "state_dict": policy.state_dict(),
        "extra": dumps(extra),
    }
    write_atomic(path, lambda tmp: torch.save(data, tmp))


def load_checkpoint(path: str | Path) -> StepPolicy:
    """The :class:`StepPolicy` saved at ``path`` (``torch.load(weights_only=True)``).

    Raises:
        ValueError: not a readable file, or not a step-wise policy's checkpoint (for example the
            one-shot GO policy's ``model.zip``), naming what was found and what to give instead.
    """
    p = Path(path)
    if p.is_dir():
        p = p / "policy.pt"
    try:
        data = torch.load(p, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise ValueError(f"{path}: no such checkpoint; give a step-wise run's policy.pt") from None
    except Exception as e:  # a zip of SB3, a pickle, a truncated file
        raise ValueError(
            f"{path}: not a step-wise policy checkpoint ({type(e).__name__}); give the policy.pt "
            "of a step-wise run (graphopt train-step), not a one-shot run's model.zip"
        ) from None
    if not isinstance(data, dict) or data.get("kind") != CHECKPOINT_KIND:
        raise ValueError(
            f"{path}: not a step-wise policy checkpoint (no kind {CHECKPOINT_KIND!r}); give the "
            "policy.pt of a step-wise run"
        )
    if data.get("version") != CHECKPOINT_VERSION:
        raise ValueError(
            f"{path}: checkpoint version {data.get('version')!r}; this graphopt reads "
            f"{CHECKPOINT_VERSION}"
        )
    policy = StepPolicy(**data["policy_config"])
    policy.load_state_dict(data["state_dict"])
    return policy


# ---------------------------------------------------------------------------- the loop
def train(
    items: Sequence[Item],
    val_items: Sequence[Item],
    config: StepTrainConfig,
    *,
    out_dir: Path | None = None,
    log: Callable[[dict[str, float]], None] | None = None,
    policy: StepPolicy | None = None,
) -> tuple[StepPolicy, list[dict[str, float]]]:
    """Train a :class:`StepPolicy` on ``items`` (module docstring); returns it and its log rows.

    With ``out_dir``, writes ``policy.pt`` (last), ``best.pt`` (best validation) and
    ``progress.jsonl`` there; an interrupt (Ctrl-C) saves ``policy.pt`` before it propagates.
    """
    config.validate()
    if not items:
        raise ValueError("no training graph: give at least one (graph, cluster) pair")
    torch.manual_seed(config.seed)
    torch.set_num_threads(config.threads)
    rng = np.random.default_rng(config.seed)
    policy = (policy or StepPolicy(**config.policy)).to(resolve_device(config.device))
    optimizer = torch.optim.Adam(policy.parameters(), lr=config.learning_rate)
    rows: list[dict[str, float]] = []
    decisions = calls = 0
    best = -math.inf
    start = time.perf_counter()
    progress = (out_dir / "progress.jsonl").open("a") if out_dir is not None else None

    def record(row: dict[str, float]) -> None:
        row.update(decisions=decisions, calls=calls, seconds=time.perf_counter() - start)
        rows.append(row)
        if progress is not None:
            progress.write(dumps(row) + "\n")
            progress.flush()
        if log is not None:
            log(row)

    def validate(update: int) -> None:
        nonlocal best
        if not val_items:
            return
        speedups = greedy_speedups(policy, val_items)
        score = geomean(speedups)
        record({"update": update, "val/speedup": score, "val/min": float(speedups.min())})
        if out_dir is not None and score >= best:  # a tie: the later, more trained weights
            save_checkpoint(out_dir / "best.pt", policy, {"update": update, "val/speedup": score})
        best = max(best, score)

    buffer: list[list[Batch]] = []
    try:
        total = config.imitation_updates + config.updates
        validate(0)
        for update in range(1, total + 1):
            picks = rng.choice(
                len(items), size=min(config.graphs_per_update, len(items)), replace=False
            )
            with torch.no_grad():
                pres = policy.embed_many([items[i].observation for i in picks])
            if update > config.imitation_updates and config.algorithm == "lookahead":
                batches = [
                    lookahead_batch(
                        policy,
                        items[i],
                        pre,
                        config.lookahead_steps,
                        config.lookahead_margin,
                        rng,
                    )
                    for i, pre in zip(picks, pres, strict=True)
                ]
            elif update > config.imitation_updates and config.algorithm == "search":
                batches = [
                    search_batch(
                        policy, items[i], pre, config.samples_per_graph, config.search_calls, rng
                    )
                    for i, pre in zip(picks, pres, strict=True)
                ]
            else:
                batches = [
                    rollout_with(
                        policy,
                        items[i],
                        pre,
                        config.samples_per_graph,
                        rng,
                        improve=config.self_imitation,
                    )
                    for i, pre in zip(picks, pres, strict=True)
                ]
            decisions += sum(b.decisions for b in batches)
            calls += sum(b.calls for b in batches)
            if update <= config.imitation_updates:
                stats = imitation_update(policy, optimizer, batches, config)
            elif config.algorithm == "search":
                stats = imitate_targets(policy, optimizer, batches, config, rng)
            elif config.algorithm == "lookahead":
                buffer = (buffer + [batches])[-config.lookahead_buffer :]
                stats = lookahead_update(
                    policy, optimizer, [b for bs in buffer for b in bs], config
                )
                stats["lookahead/changed"] = float(
                    np.mean(
                        [
                            float(torch.ne(b.actions, b.own).float().mean())
                            for b in batches
                            if b.own is not None
                        ]
                    )
                )
            else:
                stats = ppo_update(policy, optimizer, batches, config)
            r = np.concatenate([returns(b) for b in batches])
            best_r = np.mean([returns(b).max() for b in batches])
            stats.update(
                {
                    "update": update,
                    "train/speedup": float(np.exp(r.mean())),
                    "train/best_sample": float(np.exp(best_r)),
                }
            )
            record(stats)
            if update % config.eval_every == 0 or update == total:
                validate(update)
    finally:
        if out_dir is not None:
            save_checkpoint(
                out_dir / "policy.pt", policy, {"decisions": decisions, "config": asdict(config)}
            )
        if progress is not None:
            progress.close()
    return policy, rows
