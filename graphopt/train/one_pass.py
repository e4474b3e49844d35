"""Training the one-pass decoder policy with many samples per graph (Jeon et al., ICLR 2023).

The policy is :class:`policies.decoder_policy.GODecoderPolicy`: the GO network gives, once per
graph, ``C`` real outputs per op (``shift``, ``gate`` and one ``affinity`` per device) that steer
the placement decoder (:func:`graphopt.decoders.decision.decode`, anchored at the best
heuristic's placement: an op leaves it only where its gate is positive); the action is drawn from
a diagonal Gaussian around them (:class:`policies.gaussian.BatchedGaussian`). Jeon et al. train
one-pass priorities for list scheduling this way: many sampled decisions per graph, the step time
standardised within each graph, a policy gradient on the samples' log-probabilities, greedy = the
mean action. The loop, top to bottom (:func:`train`):

1. **Set-up.** Every (training graph, cluster) pair becomes a :class:`OnePassItem`: the graph's
   encoding with the best heuristic's placement as the hint and that placement's schedule as
   ``op_context`` (what the one-shot environment with a decoder observes, unpadded), the
   reference step time and a prepared simulator.
2. **Samples.** Each update draws ``graphs_per_update`` items; per item the network runs once
   (no gradient), ``samples_per_graph`` actions are drawn from the Gaussian, each decoded and all
   of them priced in one batched simulator call (``evaluate_batch``).
3. **Update.** A sample's return is ``log(t_ref / t)`` and its advantage that return
   standardised among the samples of the same graph (:mod:`graphopt.train.shared_baseline`).
   The loss is PPO's clipped surrogate (Schulman et al., 2017) on the samples' summed
   log-probabilities, averaged over samples and graphs; with ``epochs: 1`` and
   ``minibatches: 1`` (the default) the ratio is exactly 1 at the single gradient step, so the
   update is REINFORCE with the shared baseline (Williams, 1992), as Jeon et al. train.
4. **Validation.** Every ``eval_every`` updates, one greedy decode (the mean action) per
   validation graph: the geometric mean of ``t_ref / t`` (``val/speedup``); the best checkpoint
   is kept.

Checkpoints are data (tensors and plain values), read with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from graphopt import encoding
from graphopt.decoders.decision import LIMIT, DecoderSettings, channels, decode
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.rundir import write_atomic
from graphopt.sim import PreparedGraph
from graphopt.strict_json import dumps
from graphopt.train.shared_baseline import advantages, geomean, log_returns
from graphopt.train.stepwise import ReferenceFn, default_reference
from graphopt.typing import Decision
from policies.decoder_policy import GODecoderPolicy
from policies.gaussian import BatchedGaussian

CHECKPOINT_KIND = "graphopt-one-pass-decoder-policy"
CHECKPOINT_VERSION = 1
MAX_COUNT = 1_000_000
"""The largest value of every count of :class:`OnePassConfig`."""
NETWORK_DEFAULTS: dict[str, Any] = dict(device_agnostic=True)
"""The network's keyword arguments unless ``policy`` says otherwise: device rows, so the policy
runs on any device count (the others: :class:`policies.go_network.GOSettings`)."""


@dataclass
class OnePassConfig:
    """Hyper-parameters of a one-pass training run (each documented under its field)."""

    updates: int = 300
    """Policy-gradient updates."""
    graphs_per_update: int = 8
    """Graphs drawn per update."""
    samples_per_graph: int = 16
    """Sampled decisions per graph and update (the shared baseline's group)."""
    epochs: int = 1
    """Passes over an update's samples (1 with ``minibatches: 1``: REINFORCE)."""
    minibatches: int = 1
    """Optimizer steps per pass: the update's graphs split into this many groups."""
    learning_rate: float = 3e-4
    """Adam's step size."""
    clip_range: float = 0.2
    """PPO's ratio clip (no effect at the first gradient step of an update)."""
    log_std_init: float = -0.5
    """Initial log standard deviation of every channel kind (learned afterwards)."""
    adv_floor: float = 1e-3
    """Smallest standard deviation the returns of one graph are divided by."""
    max_grad_norm: float = 1.0
    """Gradient clipping."""
    decoder: str = "heft-lc"
    """The placement decoder's model: ``heft`` or ``heft-lc``."""
    anchor: bool = True
    """Ops stay on the best heuristic's device unless their gate is positive (today's decoder
    policy); false: every op is placed by the list scheduler from the outputs (HEFT's order and
    devices with zero outputs), as Jeon et al.'s priorities steer a list scheduler alone."""
    eval_every: int = 10
    """Updates between validations."""
    max_seconds: float = 0.0
    """Stop after the update that passes this many seconds of training (0: no limit)."""
    seed: int = 0
    """Seeds torch and the samples."""
    threads: int = 1
    """torch.set_num_threads (the decoder and simulator run on one core)."""
    policy: dict[str, Any] = field(default_factory=dict)
    """The network's keyword arguments (the fields of :class:`policies.go_network.GOSettings`)."""

    def validate(self) -> OnePassConfig:
        """Check every field's range; ValueError naming the field otherwise."""
        for name in ("graphs_per_update", "samples_per_graph", "epochs", "minibatches"):
            _count(name, getattr(self, name), 1)
        for name in ("eval_every", "threads"):
            _count(name, getattr(self, name), 1)
        _count("updates", self.updates, 0)
        for name in ("learning_rate", "clip_range", "adv_floor", "max_grad_norm"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
            if not 0 < value < math.inf:
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
        value = self.max_seconds
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not 0 <= value < math.inf
        ):
            raise ValueError(f"max_seconds must be a finite number >= 0, got {value!r}")
        value = self.log_std_init
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"log_std_init must be a number, got {value!r}")
        if not -10 <= value <= 2:
            raise ValueError(f"log_std_init must be in [-10, 2], got {value!r}")
        if not isinstance(self.anchor, bool):
            raise ValueError(f"anchor must be true or false, got {self.anchor!r}")
        self.settings()  # names the allowed decoders
        if not isinstance(self.policy, dict):
            raise ValueError(f"policy must be a mapping of network arguments, got {self.policy!r}")
        return self

    def settings(self) -> DecoderSettings:
        """The decoder settings of ``decoder`` and ``anchor``."""
        return DecoderSettings(model=self.decoder, anchor=self.anchor)


def _count(name: str, value: object, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= MAX_COUNT:
        raise ValueError(f"{name} must be an integer in {low}..{MAX_COUNT}, got {value!r}")


@dataclass
class OnePassItem:
    """One (graph, cluster) pair as the trainer uses it."""

    graph: CompGraph
    cluster: Cluster
    observation: dict[str, np.ndarray]
    """The graph's encoding (no padding), ``hint`` (the reference placement) and ``op_context``
    (its schedule), as the one-shot environment with a decoder observes it."""
    reference: np.ndarray
    """The best heuristic's placement, the decoder's anchor."""
    reference_time: float
    reference_name: str
    prepared: PreparedGraph
    tensors: dict[str, torch.Tensor] = field(init=False, repr=False)
    """The observation as tensors with a batch dimension of 1 (made once)."""

    def __post_init__(self) -> None:
        self.tensors = {k: torch.from_numpy(np.array(v))[None] for k, v in self.observation.items()}

    @property
    def name(self) -> str:
        return f"{self.graph.name}@{self.cluster.name}"


def make_item(
    graph: CompGraph, cluster: Cluster, reference: ReferenceFn = default_reference
) -> OnePassItem:
    """The :class:`OnePassItem` of ``graph`` on ``cluster`` (module docstring, step 1).

    Raises:
        ValueError: the best heuristic has no valid placement of the graph on the cluster.
    """
    placement, ref_time, ref_name = reference(graph, cluster)
    if not (ref_time > 0 and math.isfinite(ref_time)):
        raise ValueError(
            f"{graph.name} on {cluster.name}: the best heuristic has no valid placement "
            f"(step time {ref_time}); choose a cluster with room for the graph"
        )
    placement = np.asarray(placement, dtype=np.int64).copy()
    n = graph.num_ops
    observation = dict(encoding.encode(graph, cluster, n, max(graph.num_edges, 1)).observation)
    observation["hint"] = placement.copy()
    observation["op_context"] = encoding.schedule_context(
        graph, cluster, Decision(placement=placement)
    )
    return OnePassItem(
        graph=graph,
        cluster=cluster,
        observation=observation,
        reference=placement,
        reference_time=float(ref_time),
        reference_name=ref_name,
        prepared=PreparedGraph(graph, cluster),
    )


# ---------------------------------------------------------------------------- the policy
def make_policy(
    num_devices: int, max_ops: int, log_std_init: float = -0.5, **network: Any
) -> GODecoderPolicy:
    """A fresh :class:`GODecoderPolicy` for the placement decoder on ``num_devices`` devices.

    ``max_ops`` only sizes the nominal spaces SB3's constructor asks for: the network runs on a
    graph's real ops whatever their number (:func:`outputs`)."""
    names = channels("placement", num_devices)
    width = len(encoding.CONTEXT_FEATURES)
    observation_space = spaces.Dict(
        {
            **encoding.observation_space(max_ops, 4 * max_ops).spaces,
            "hint": spaces.Box(-1, num_devices - 1, (max_ops,), np.int64),
            "op_context": spaces.Box(-np.inf, np.inf, (max_ops, width), np.float32),
        }
    )
    action_space = spaces.Box(-LIMIT, LIMIT, (len(names) * max_ops,), np.float32)
    kwargs = {**NETWORK_DEFAULTS, **network}
    return GODecoderPolicy(
        observation_space,
        action_space,
        lambda _: 0.0,  # the trainer makes its own optimizer
        task="placement",
        log_std_init=log_std_init,
        **kwargs,
    )


def outputs(policy: GODecoderPolicy, item: OnePassItem) -> torch.Tensor:
    """``(C, N)`` mean action of ``item``: the network's outputs in the decoder's channel order
    (one forward pass; with gradients unless called under ``torch.no_grad``)."""
    logits, _, _ = policy.network(item.tensors)
    return policy.means(logits)[0, :, : item.graph.num_ops]


def distribution(policy: GODecoderPolicy, mean: torch.Tensor, samples: int) -> BatchedGaussian:
    """The Gaussian of ``samples`` actions of one graph around ``mean`` ``(C, N)``."""
    mask = torch.ones((1, mean.shape[1]), dtype=torch.bool)
    index = torch.zeros(samples, dtype=torch.int64)
    return BatchedGaussian(mean[None], policy.channel_log_std(), mask, index)


def decode_action(
    item: OnePassItem, action: np.ndarray, settings: DecoderSettings | None = None
) -> np.ndarray:
    """The placement the decoder builds from one action ``(C, N)`` (default settings: heft-lc,
    anchored at the reference)."""
    decision = decode(
        "placement",
        item.graph,
        item.cluster,
        action,
        Decision(placement=item.reference),
        item.reference_name,
        settings,
    )
    assert decision.placement is not None
    return decision.placement


# ---------------------------------------------------------------------------- samples
@dataclass
class Samples:
    """``K`` sampled actions of one item, their log-probabilities when drawn and what they
    simulate to."""

    item: OnePassItem
    actions: torch.Tensor
    """``(K, C, N)`` float32."""
    old_logp: torch.Tensor
    """``(K,)``: the log-probability of each action under the policy that drew it."""
    step_times: np.ndarray
    valid: np.ndarray
    placements: np.ndarray
    """``(K, N)``: the decoded placements."""

    def returns(self) -> np.ndarray:
        """``log(t_ref / t)`` per sample (:func:`graphopt.train.shared_baseline.log_returns`)."""
        return log_returns(self.step_times, self.valid, self.item.reference_time)


def price(item: OnePassItem, placements: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Step times and validity of ``(K, N)`` placements, in one batched simulator call."""
    result = item.prepared.evaluate_batch(placements)
    return np.asarray(result.step_time, np.float64), np.asarray(result.valid, bool)


def draw(
    policy: GODecoderPolicy,
    item: OnePassItem,
    samples: int,
    generator: torch.Generator,
    settings: DecoderSettings | None = None,
) -> Samples:
    """``samples`` actions of ``item`` drawn from the policy, decoded and priced (step 2)."""
    with torch.no_grad():
        mean = outputs(policy, item)
        dist = distribution(policy, mean, samples)
        std = policy.channel_log_std().exp()[:, None]
        noise = torch.randn((samples, *mean.shape), generator=generator)
        actions = mean[None] + noise * std
        old_logp = dist.log_prob(actions.reshape(samples, -1))
    arrays = actions.double().numpy()
    placements = np.stack([decode_action(item, a, settings) for a in arrays])
    step_times, valid = price(item, placements)
    return Samples(item, actions.float(), old_logp, step_times, valid, placements)


def group_advantages(batches: Sequence[Samples], floor: float) -> list[np.ndarray]:
    """Each item's returns standardised among its own samples (the shared baseline)."""
    return [advantages(b.returns(), floor) for b in batches]


def update(
    policy: GODecoderPolicy,
    optimizer: torch.optim.Optimizer,
    batches: Sequence[Samples],
    config: OnePassConfig,
) -> dict[str, float]:
    """PPO's clipped surrogate on the samples' log-probabilities with the within-graph
    advantages, ``config.epochs`` passes of ``config.minibatches`` optimizer steps (step 3)."""
    advs = [torch.from_numpy(a).float() for a in group_advantages(batches, config.adv_floor)]
    low, high = 1 - config.clip_range, 1 + config.clip_range
    groups = np.array_split(np.arange(len(batches)), min(config.minibatches, len(batches)))
    figures: dict[str, float] = {}
    for _ in range(config.epochs):
        clipped = 0.0
        for group in groups:
            optimizer.zero_grad()
            loss = torch.zeros(())
            for i in group:
                b = batches[i]
                k = len(b.actions)
                logp = distribution(policy, outputs(policy, b.item), k).log_prob(
                    b.actions.reshape(k, -1)
                )
                ratio = torch.exp(logp - b.old_logp)
                surrogate = torch.min(ratio * advs[i], ratio.clamp(low, high) * advs[i])
                loss = loss - surrogate.mean() / len(group)
                clipped += float(((ratio - 1).abs() > config.clip_range).float().mean())
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), config.max_grad_norm)
            optimizer.step()
        figures["pg/clip_fraction"] = clipped / len(batches)
    return figures


# ---------------------------------------------------------------------------- evaluation
def best_of(
    policy: GODecoderPolicy,
    item: OnePassItem,
    budget: int,
    seed: int = 0,
    settings: DecoderSettings | None = None,
) -> tuple[np.ndarray, float]:
    """The fastest of the greedy decode (the mean action) and ``budget - 1`` sampled ones, and
    its speed-up ``t_ref / t`` (0 if none is valid); ``budget`` 1 is the greedy decode alone."""
    with torch.no_grad():
        mean = outputs(policy, item)
        std = policy.channel_log_std().exp()[:, None]
    generator = torch.Generator().manual_seed(seed)
    noise = torch.randn((budget - 1, *mean.shape), generator=generator)
    actions = torch.cat([mean[None], mean[None] + noise * std]).double().numpy()
    placements = np.stack([decode_action(item, a, settings) for a in actions])
    step_times, valid = price(item, placements)
    times = np.where(valid, step_times, np.inf)
    best = int(np.argmin(times))
    speedup = item.reference_time / times[best] if math.isfinite(times[best]) else 0.0
    return placements[best], float(speedup)


def greedy_speedups(
    policy: GODecoderPolicy, items: Sequence[OnePassItem], settings: DecoderSettings | None = None
) -> np.ndarray:
    """``t_ref / t`` of each item's greedy decode (0 for an invalid placement)."""
    return np.array([best_of(policy, item, 1, settings=settings)[1] for item in items])


# ---------------------------------------------------------------------------- checkpoints
def save_checkpoint(
    path: Path,
    policy: GODecoderPolicy,
    config: dict[str, Any],
    extra: dict[str, Any],
    settings: DecoderSettings | None = None,
) -> None:
    """Write the policy's weights, ``config`` (:func:`make_policy`'s arguments) and the decoder
    ``settings`` it was trained with (data only) to ``path`` atomically
    (:func:`graphopt.rundir.write_atomic`)."""
    settings = settings or DecoderSettings()
    data = {
        "kind": CHECKPOINT_KIND,
        "version": CHECKPOINT_VERSION,
        "policy_config": dumps(config),
        "decoder": dumps({"model": settings.model, "anchor": settings.anchor}),
        "state_dict": policy.state_dict(),
        "extra": dumps(extra),
    }
    write_atomic(path, lambda tmp: torch.save(data, tmp))


def load_checkpoint(path: str | Path) -> tuple[GODecoderPolicy, DecoderSettings]:
    """The policy saved at ``path`` (a file, or a run directory: its ``best.pt``, else
    ``policy.pt``), read with ``torch.load(weights_only=True)``, and the decoder settings it
    was trained with (a checkpoint without them: the default, ``heft-lc`` anchored).

    Raises:
        ValueError: no such file, or not a one-pass decoder policy's checkpoint.
    """
    import json

    p = Path(path)
    if p.is_dir():
        p = p / "best.pt" if (p / "best.pt").exists() else p / "policy.pt"
    try:
        data = torch.load(p, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise ValueError(f"{path}: no such checkpoint; give a one-pass run's policy.pt") from None
    except Exception as e:  # a zip of SB3, a pickle, a truncated file
        raise ValueError(
            f"{path}: not a one-pass decoder policy checkpoint ({type(e).__name__}); give the "
            "policy.pt or best.pt of a one-pass run"
        ) from None
    if not isinstance(data, dict) or data.get("kind") != CHECKPOINT_KIND:
        raise ValueError(
            f"{path}: not a one-pass decoder policy checkpoint (no kind {CHECKPOINT_KIND!r})"
        )
    if data.get("version") != CHECKPOINT_VERSION:
        raise ValueError(
            f"{path}: checkpoint version {data.get('version')!r}; this graphopt reads "
            f"{CHECKPOINT_VERSION}"
        )
    policy = make_policy(**json.loads(data["policy_config"]))
    policy.load_state_dict(data["state_dict"])
    decoder = json.loads(data["decoder"]) if "decoder" in data else {}
    return policy, DecoderSettings(**decoder)


# ---------------------------------------------------------------------------- the loop
def train(
    items: Sequence[OnePassItem],
    val_items: Sequence[OnePassItem],
    config: OnePassConfig,
    *,
    out_dir: Path | None = None,
    log: Callable[[dict[str, float]], None] | None = None,
) -> tuple[GODecoderPolicy, list[dict[str, float]]]:
    """Train a :class:`GODecoderPolicy` on ``items`` (module docstring); returns it and its log.

    With ``out_dir``, writes ``policy.pt`` (last), ``best.pt`` (best validation) and
    ``progress.jsonl`` there; an interrupt (Ctrl-C) saves ``policy.pt`` before it propagates.

    Raises:
        ValueError: no training item, items on clusters of different device counts, or a bad
            configuration (naming the field).
    """
    config.validate()
    if not items:
        raise ValueError("no training graph: give at least one (graph, cluster) pair")
    devices = {item.cluster.num_devices for item in [*items, *val_items]}
    if len(devices) > 1:
        raise ValueError(
            f"the decoder policy's action has one affinity per device; the clusters have "
            f"{sorted(devices)} devices: train on clusters of one device count"
        )
    torch.manual_seed(config.seed)
    torch.set_num_threads(config.threads)
    rng = np.random.default_rng(config.seed)
    generator = torch.Generator().manual_seed(config.seed)
    policy_config = {
        "num_devices": devices.pop(),
        "max_ops": max(item.graph.num_ops for item in [*items, *val_items]),
        "log_std_init": float(config.log_std_init),
        **config.policy,
    }
    policy = make_policy(**policy_config)
    settings = config.settings()
    optimizer = torch.optim.Adam(policy.parameters(), lr=config.learning_rate)
    rows: list[dict[str, float]] = []
    calls = 0
    best = -math.inf
    start = time.perf_counter()
    progress = (out_dir / "progress.jsonl").open("a") if out_dir is not None else None

    def record(row: dict[str, float]) -> None:
        row.update(calls=calls, seconds=time.perf_counter() - start)
        rows.append(row)
        if progress is not None:
            progress.write(dumps(row) + "\n")
            progress.flush()
        if log is not None:
            log(row)

    def validate(step: int) -> None:
        nonlocal best
        if not val_items:
            return
        speedups = greedy_speedups(policy, val_items, settings)
        score = geomean(speedups)
        record({"update": step, "val/speedup": score, "val/min": float(speedups.min())})
        if out_dir is not None and score >= best:  # a tie: the later, more trained weights
            extra = {"update": step, "val/speedup": score}
            save_checkpoint(out_dir / "best.pt", policy, policy_config, extra, settings)
        best = max(best, score)

    try:
        validate(0)
        for step in range(1, config.updates + 1):
            # samples: the network once per graph, K decodes, one batched simulator call
            picks = rng.choice(
                len(items), size=min(config.graphs_per_update, len(items)), replace=False
            )
            batches = [
                draw(policy, items[i], config.samples_per_graph, generator, settings) for i in picks
            ]
            calls += sum(len(b.step_times) for b in batches)
            # update: the within-graph standardised returns weight the log-probabilities
            stats = update(policy, optimizer, batches, config)
            r = np.concatenate([b.returns() for b in batches])
            gate = channels("placement", items[0].cluster.num_devices).index("gate")
            released = float(np.mean([(b.actions[:, gate] > 0).float().mean() for b in batches]))
            with torch.no_grad():
                log_std = policy.log_std.detach().numpy()
            stats.update(
                {
                    "update": step,
                    "train/speedup": float(np.exp(r.mean())),
                    "train/best_sample": float(
                        np.exp(np.mean([b.returns().max() for b in batches]))
                    ),
                    "train/released": released,
                    **{
                        f"policy/log_std_{k}": float(v)
                        for k, v in zip(policy.kinds, log_std, strict=True)
                    },
                }
            )
            record(stats)
            out_of_time = 0 < config.max_seconds <= time.perf_counter() - start
            if step % config.eval_every == 0 or step == config.updates or out_of_time:
                validate(step)
            if out_of_time:
                break
    finally:
        if out_dir is not None:
            extra = {"calls": calls, "config": asdict(config)}
            save_checkpoint(out_dir / "policy.pt", policy, policy_config, extra, settings)
        if progress is not None:
            progress.close()
    return policy, rows
