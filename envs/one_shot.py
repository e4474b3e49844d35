"""The one-shot environment shared by every graphopt task (see :mod:`envs` for the four ids).

An episode is one decision for a whole graph, as in GO: ``reset`` draws a graph (uniformly, from
``self.np_random``) and returns its encoding; ``step`` takes a decision for every op, prices it
with the cost model and ends the episode.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces

from envs.base import GraphEnv, check_action_values
from envs.reference import Reference
from envs.rewards import reward, speedup
from graphopt import encoding, strict_json
from graphopt.decoders.decision import LIMIT, DecoderSettings, channels
from graphopt.decoders.decision import decode as decode_outputs
from graphopt.file_set import write_file
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim.fusion_rules import fusion_mask
from graphopt.tasks import ARRAYS, get_task
from graphopt.typing import Decision, Measurement

COMMON_SECTIONS = """
    ## Observation Space

    A ``Dict`` of fixed-shape arrays padded to ``max_ops`` op slots and ``max_edges`` edge slots
    (``obs_mode="full"``, the default); every feature, its scaling and its padding value is listed in
    :mod:`graphopt.encoding`:

    | key | shape | content |
    |-----|-------|---------|
    | op_features | (max_ops, 13) float32 | scaled costs, degrees, position; padding -1 |
    | op_type | (max_ops,) int64 | op-type id >= 1; padding 0 |
    | op_mask | (max_ops,) int8 | 1 for real ops |
    | edge_index | (2, max_edges) int64 | producer, consumer; padding -1 |
    | edge_features | (max_edges, 1) float32 | scaled tensor bytes; padding -1 |
    | device_features | (16, 5) float32 | device figures; padding -1 |
    | device_mask | (16,) int8 | 1 for real devices |
    | graph_features | (8,) float32 | cluster and graph totals |
    | counts | (2,) int64 | number of ops, number of edges |
    | hint | (len(action),) int64 | the reference (best heuristic) decision laid out as an action; -1 in padding slots, everywhere with ``hint=False`` |
    | fusion_mask | (max_ops,) int8 | fusion and joint only: 1 where the op's fusion bit may be set (:func:`graphopt.sim.fusion_rules.fusion_mask`), 0 where it alone breaks a fusion rule and in padding |
    | op_context | (max_ops, 6) float32 | with a decoder only: the reference's schedule per op (:data:`graphopt.encoding.CONTEXT_FEATURES`: critical, slack, wait, transfer, start, duration); 0 in padding |

    The hint lets a policy start from the best heuristic and learn to improve on it; an agent may
    ignore it, and ``hint=False`` removes the information.

    With ``obs_mode="id"`` the observation is ``{"graph_id": (1,) int64}``, the graph's index in
    ``env.encoded_graphs()``: rollout memory then no longer grows with graph size.

    ## Placement constraints

    Where the graph restricts ops to device kinds (its ``allowed`` column) or the cluster enforces
    colocation (``colocation: enforce``; :mod:`graphopt.constraints`), the placement an action
    encodes is projected onto the allowed devices before it is priced
    (:meth:`graphopt.constraints.Constraints.project`: a restricted op on a barred device moves
    to its producer's device or its fastest allowed one, an enforced group to the device holding
    most of it); the decoders keep to them on their own. ``decode`` returns the projected
    decision, so no action yields a decision that breaks a constraint. Without constraints the
    action is the decision, as before.

    ## Rewards

    One reward per episode, from the step time ``t`` of the decision and ``t_ref`` of the
    reference decision (the best heuristic by default; see :mod:`envs.rewards`): ``speedup``
    (default) ``1 - sqrt(t / t_ref)``, ``neg_sqrt_time`` ``-sqrt(t)``, ``log_speedup``
    ``log(t_ref / t)``. Valid times are capped at 9 ``t_ref``; an invalid decision (out of memory,
    illegal fusion) is scored as a step of 16 ``t_ref``. ``info`` always carries ``step_time``,
    ``valid``, ``reason``, ``reference_time``, ``reference``, ``speedup`` and ``graph``.

    ## Starting State

    ``reset`` draws one of the graphs uniformly with ``self.np_random`` (``options={"graph": i}``
    picks graph ``i``) and returns its observation.

    ## Episode End

    Every episode is one step: ``terminated`` is always True after ``step``, ``truncated`` False;
    the observation ``step`` returns is an all-zero placeholder (``counts == [0, 0]``).
    ``env.save_episode(path)`` writes the decision with graph, cluster and seed; replay it with
    ``graphopt simulate GRAPH --cluster CLUSTER --decision path``.

    ## Arguments

    - ``graphs``: a graph name, ``suite:NAME``, a graph file, a ``CompGraph``, or a list of those
      (default ``"suite:tiny"``).
    - ``cluster``: a preset name, a cluster file or a ``Cluster`` (default ``v100-nvlink-4``).
    - ``cost_model``: any ``graphopt.typing.CostModel`` (default: the simulator).
    - ``reward_mode``: ``"speedup"``, ``"neg_sqrt_time"`` or ``"log_speedup"``.
    - ``max_ops`` / ``max_edges``: padding sizes (default: the largest graph; ``4 * max_ops``).
    - ``num_priorities``: scheduling levels ``P`` (default 8).
    - ``reference``: ``"best"`` or a placer name (``"single"``, ...), see :mod:`envs.reference`.
    - ``obs_mode``: ``"full"`` or ``"id"``.
    - ``hint``: include the reference decision in the observation (default True).
    - ``decoder``: ``"none"`` (default: the action is the decision, as above) or a placement
      decoder model, ``"heft"`` or ``"heft-lc"``: the action is then ``C`` real numbers per op
      slot (a ``Box`` in ``[-8, 8]`` of shape ``(C * max_ops,)``, channel-major) that steer the
      decoders of :mod:`graphopt.decoders.decision`, which build the decision one op at a time
      from the reference; all-zero outputs give the reference decision.
    - ``decoder_anchor``: with a decoder, keep ops on the reference's device unless their
      ``gate`` output is positive (default True); False places every op by the list scheduler.
    - ``seed``: seeds the first ``reset``.

    ``graphs``, ``cluster``, ``cost_model``, ``reward_mode``, ``reference``, ``max_ops`` and
    ``max_edges`` are the fields of :class:`envs.settings.EnvSettings`, which may also be given
    whole, as the first argument.

    ## Version History

    - v0: initial version; the ``decoder`` setting added later (default ``"none"``: unchanged);
      placement constraints projected later (a graph and cluster without them: unchanged).
"""
"""The Observation Space ... Version History sections shared by the four environments' docstrings
(each task module writes Description and Action Space and appends these)."""
OBS_MODES = ("full", "id")


@dataclass(frozen=True)
class Episode:
    """The last finished episode: enough to replay it with ``graphopt simulate --decision``."""

    graph: CompGraph
    cluster: Cluster
    decision: Decision
    measurement: Measurement
    reference: Reference
    seed: int | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "graph": self.graph.name,
            "graph_fingerprint": self.graph.fingerprint,
            "cluster": self.cluster.name,
            "seed": self.seed,
            "step_time": self.measurement.step_time,
            **self.decision.to_dict(),
        }


class GraphOptEnv(GraphEnv):
    """The one-shot environment of every task; the task subclasses set :attr:`task` and document
    themselves. What a task decides comes from its action blocks (:data:`graphopt.tasks.TASKS`):
    each block is one value per op slot, ``placement`` in ``[0, D)``, ``scheduling`` in
    ``[0, P)``, ``fusion`` in ``{0, 1}``; the arrays of no block come from the reference."""

    takes = ("reward_mode", "reference", "max_ops", "max_edges")

    def __init__(
        self,
        *args: Any,
        num_priorities: int = 8,
        obs_mode: str = "full",
        hint: bool = True,
        decoder: str = "none",
        decoder_anchor: bool = True,
        seed: int | None = None,
        **shared: Any,
    ) -> None:
        super().__init__(*args, **shared)
        self.decoder: DecoderSettings | None = None
        """How actions are decoded (None: the action is the decision)."""
        if decoder != "none":
            self.decoder = DecoderSettings(model=decoder, anchor=decoder_anchor)
        elif not isinstance(decoder_anchor, bool):
            raise ValueError("decoder_anchor must be true or false")
        if obs_mode not in OBS_MODES:
            raise ValueError(
                f"unknown obs_mode {obs_mode!r}; choose one of: {', '.join(OBS_MODES)}"
            )
        self.obs_mode = obs_mode
        self.hint = bool(hint)
        if num_priorities < 1:
            raise ValueError(f"num_priorities must be >= 1, got {num_priorities}")
        self.num_priorities = int(num_priorities)
        self.blocks = get_task(self.task).blocks
        """The action blocks, in layout order (``placement``, ``scheduling``, ``fusion``)."""
        self._pad()
        # encode every graph now: bad sizes fail at construction, not in the middle of training
        self._encoded = [
            encoding.encode(g, self.cluster, self.max_ops, self.max_edges) for g in self.graphs
        ]
        classes = {"placement": self.cluster.num_devices, "scheduling": self.num_priorities}
        nvec = [classes.get(block, 2) for block in self.blocks]
        self.nvec: np.ndarray = np.repeat(np.array(nvec, dtype=np.int64), self.max_ops)
        """Classes per action slot (``action_space.nvec``)."""
        self.channels = channels(self.task, self.cluster.num_devices)
        """The decoder's per-op output channels (:func:`graphopt.decoders.decision.channels`)."""
        self.action_space: spaces.Space = spaces.MultiDiscrete(self.nvec)
        if self.decoder is not None:
            size = len(self.channels) * self.max_ops
            self.action_space = spaces.Box(-LIMIT, LIMIT, (size,), np.float32)
        self.observation_space: spaces.Dict
        if obs_mode == "full":
            space = encoding.observation_space(self.max_ops, self.max_edges)
            high = int(self.nvec.max()) - 1
            hint_space = spaces.Box(-1, high, (len(self.nvec),), np.int64)
            extra: dict[str, spaces.Space] = {"hint": hint_space}
            if "fusion" in self.blocks:
                extra["fusion_mask"] = spaces.Box(0, 1, (self.max_ops,), np.int8)
            if self.decoder is not None:
                width = len(encoding.CONTEXT_FEATURES)
                extra["op_context"] = spaces.Box(-np.inf, np.inf, (self.max_ops, width), np.float32)
            self.observation_space = spaces.Dict({**space.spaces, **extra})
        else:
            self.observation_space = spaces.Dict(
                {"graph_id": spaces.Box(0, len(self.graphs) - 1, (1,), np.int64)}
            )
        self._fusion_masks: dict[int, np.ndarray] = {}
        self._contexts: dict[int, np.ndarray] = {}
        self._seed = seed
        self.last_episode: Episode | None = None
        if seed is not None:
            self.reset(seed=seed)

    def settings(self) -> dict[str, Any]:
        """Keyword arguments of :func:`envs.make_env` that recreate this environment (with its
        graphs, cluster, cost model and seed)."""
        return {
            **super().settings(),
            "num_priorities": self.num_priorities,
            "obs_mode": self.obs_mode,
            "hint": self.hint,
            "decoder": "none" if self.decoder is None else self.decoder.model,
            "decoder_anchor": True if self.decoder is None else self.decoder.anchor,
        }

    # ------------------------------------------------------------------ graphs
    def encoded_graphs(self) -> list[dict[str, np.ndarray]]:
        """The full observation of every graph (with its hint), indexed by ``graph_id`` (for
        ``obs_mode="id"``)."""
        return [self._full_observation(i) for i in range(len(self._encoded))]

    def _full_observation(self, index: int) -> dict[str, np.ndarray]:
        """The encoding of graph ``index`` (copied), its hint and, for tasks that fuse, its
        fusion mask."""
        obs = {k: v.copy() for k, v in self._encoded[index].observation.items()}
        obs["hint"] = self.hint_action(index)
        if "fusion" in self.blocks:
            obs["fusion_mask"] = self.fusion_mask(index)
        if self.decoder is not None:
            obs["op_context"] = self.op_context(index)
        return obs

    def op_context(self, index: int) -> np.ndarray:
        """``(max_ops, K)`` float32: the reference decision's schedule features of graph
        ``index`` (:func:`graphopt.encoding.schedule_context`; zeros in padding slots), computed
        once per graph by one more simulation of the reference, which keeps the timeline the
        reference's measurement does not: the network sees the schedule it departs from."""
        cached = self._contexts.get(index)
        if cached is None:
            graph = self.graphs[index]
            cached = np.zeros((self.max_ops, len(encoding.CONTEXT_FEATURES)), np.float32)
            ref = self.reference(index).decision
            cached[: graph.num_ops] = encoding.schedule_context(graph, self.cluster, ref)
            self._contexts[index] = cached
        return cached.copy()

    def fusion_mask(self, index: int) -> np.ndarray:
        """``(max_ops,)`` int8: 1 where graph ``index``'s fusion bit may be set
        (:func:`graphopt.sim.fusion_rules.fusion_mask`), 0 elsewhere and in padding slots."""
        cached = self._fusion_masks.get(index)
        if cached is None:
            cached = np.zeros(self.max_ops, dtype=np.int8)
            allowed = fusion_mask(self.graphs[index])
            cached[: len(allowed)] = allowed
            self._fusion_masks[index] = cached
        return cached.copy()

    def hint_action(self, index: int) -> np.ndarray:
        """The reference decision of graph ``index`` laid out as an action (``-1`` in padding slots,
        and everywhere when the env was made with ``hint=False``): the observation's ``hint``.

        Priorities of the reference (ranks that may exceed ``P``) are quantised to ``P`` levels
        preserving their order: ``level = floor(P * rank / (max rank + 1))``.
        """
        out = np.full(len(self.nvec), -1, dtype=np.int64)
        if not self.hint:
            return out
        n = self.graphs[index].num_ops
        ref = self.reference(index).decision.filled(n)
        assert ref.priority is not None
        prio = ref.priority
        levels = prio * self.num_priorities // (int(prio.max()) + 1) if n else prio
        for b, block in enumerate(self.blocks):
            values = levels if block == "scheduling" else getattr(ref, ARRAYS[block])
            out[b * self.max_ops : b * self.max_ops + n] = values
        return out

    def _observation(self) -> dict[str, np.ndarray]:
        """A fresh copy of the current graph's observation (callers may keep or modify it)."""
        if self.obs_mode == "id":
            return {"graph_id": np.array([self._current], dtype=np.int64)}
        return self._full_observation(self._current)

    def _terminal_observation(self) -> dict[str, np.ndarray]:
        """What ``step`` returns: all zeros (``counts == [0, 0]``: no ops). The episode is over after
        one step, so nothing acts on it; zeros come from ``calloc`` and cost nothing to allocate,
        which keeps ``step`` as cheap as the cost model itself."""
        space = self.observation_space
        assert isinstance(space, spaces.Dict)
        return {
            k: np.zeros(s.shape or (), dtype=s.dtype or np.float32) for k, s in space.spaces.items()
        }

    # ------------------------------------------------------------------ gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Draw a graph (``options={"graph": index}`` picks one) and return its observation."""
        super().reset(seed=seed)
        if seed is not None:
            self._seed = seed
        graph = self.graphs[self._pick(options)]
        return self._observation(), {"graph": graph.name, "num_ops": graph.num_ops}

    def step(
        self, action: np.ndarray
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """Price the decision ``action`` for the current graph; the episode always ends here."""
        self._check_reset()
        graph = self.graphs[self._current]
        decision = self.decode(action)
        ref = self.reference(self._current)
        m = self.cost_model.evaluate(graph, self.cluster, decision)
        ref_time = ref.measurement.step_time
        r = reward(self.reward_mode, m.step_time, m.valid, ref_time)
        self.last_episode = Episode(graph, self.cluster, decision, m, ref, self._seed)
        info = {
            "graph": graph.name,
            "step_time": m.step_time,
            "valid": m.valid,
            "reason": m.reason,
            "reference_time": ref_time,
            "reference": ref.name,
            "speedup": speedup(ref_time, m.step_time, m.valid),
        }
        return self._terminal_observation(), r, True, False, info

    def decode(self, action: np.ndarray) -> Decision:
        """The :class:`Decision` an action encodes for the current graph (padding ignored).

        Raises:
            ValueError: an action of the wrong shape or out of range.
        """
        if self.decoder is not None:
            return self._decode_outputs(action)
        per_slot = len(self.nvec) // self.max_ops
        layout = f"{self.task}: {per_slot} value(s) per op slot, max_ops={self.max_ops}"
        a = check_action_values(action, self.nvec, layout)
        n = self.graphs[self._current].num_ops
        part = a.reshape(-1, self.max_ops)[:, :n].astype(np.int64)
        if "placement" in self.blocks:  # onto the allowed devices (docstring, constraints)
            rules = self.constraints(self._current)
            if rules.active:
                k = self.blocks.index("placement")
                part[k] = rules.project(part[k])
        if self.blocks == ("placement",):  # no reference needed: the other arrays are defaults
            return Decision(placement=part[0])
        base = self.reference(self._current).decision.filled(n)
        arrays = {"placement": base.placement, "priority": base.priority, "fusion": base.fusion}
        for b, block in enumerate(self.blocks):
            arrays[ARRAYS[block]] = part[b]
        return Decision(**arrays)

    def _decode_outputs(self, action: np.ndarray) -> Decision:
        """The decision the decoder builds from an action of per-op outputs (padding ignored)."""
        a = np.asarray(action, dtype=np.float64)
        size = len(self.channels) * self.max_ops
        if a.shape != (size,):
            raise ValueError(
                f"action has shape {a.shape}; expected ({size},) ({self.task} decoder: "
                f"{len(self.channels)} output(s) per op slot, max_ops={self.max_ops})"
            )
        n = self.graphs[self._current].num_ops
        return self.decode_outputs(
            self._current, a.reshape(len(self.channels), self.max_ops)[:, :n]
        )

    def decode_outputs(self, index: int, outputs: np.ndarray) -> Decision:
        """The decision the decoder builds for graph ``index`` from ``outputs`` ``(C, N)``, one row
        per channel of :attr:`channels` (:func:`graphopt.decoders.decision.decode`, from the
        graph's reference); what an action decodes to, and what a search through the decoder
        prices.

        Raises:
            ValueError: an environment without a decoder, or outputs of the wrong shape or NaN.
        """
        if self.decoder is None:
            raise ValueError(f"this {self.task} environment has no decoder: make it with decoder=")
        ref = self.reference(index)
        return decode_outputs(
            self.task,
            self.graphs[index],
            self.cluster,
            outputs,
            ref.decision,
            ref.name,
            self.decoder,
        )

    def save_episode(self, path: str | Path) -> Path:
        """Write the last episode's decision with graph, cluster and seed, for
        ``graphopt simulate GRAPH --cluster CLUSTER --decision FILE``."""
        if self.last_episode is None:
            raise ValueError("no finished episode to save yet: call reset() and step() first")
        return write_file(path, strict_json.dumps(self.last_episode.to_dict()))
