"""The one-shot environment shared by every graphopt task (see :mod:`envs` for the four ids).

An episode is one decision for a whole graph, as in GO: ``reset`` draws a graph (uniformly, from
``self.np_random``) and returns its encoding; ``step`` takes a decision for every op, prices it
with the cost model and ends the episode.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from envs import encoding
from envs.reference import Reference, check_reference, filled, reference_decision
from envs.rewards import check_reward_mode, reward
from graphopt.graph import CompGraph
from graphopt.hardware import DEFAULT_CLUSTER, Cluster, get_cluster
from graphopt.sim import Simulator
from graphopt.typing import CostModel, Decision, Measurement

GraphSpec = str | Path | CompGraph | Sequence[str | Path | CompGraph]

COMMON_SECTIONS = """
    ## Observation Space

    A ``Dict`` of fixed-shape arrays padded to ``max_ops`` op slots and ``max_edges`` edge slots
    (``obs_mode="full"``, the default); every feature, its scaling and its padding value is listed in
    :mod:`envs.encoding`:

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

    The hint lets a policy start from the best heuristic and learn to improve on it; an agent may
    ignore it, and ``hint=False`` removes the information.

    With ``obs_mode="id"`` the observation is ``{"graph_id": (1,) int64}``, the graph's index in
    ``env.encoded_graphs()``: rollout memory then no longer grows with graph size.

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
    - ``seed``: seeds the first ``reset``.

    ## Version History

    - v0: initial version.
"""
"""The Observation Space ... Version History sections shared by the four environments' docstrings
(each task module writes Description and Action Space and appends these)."""
OBS_MODES = ("full", "id")


def resolve_graph_list(graphs: GraphSpec) -> list[CompGraph]:
    """Graphs from a suite or graph name, a file, a ``CompGraph`` or a list of those."""
    from graphopt.workloads import resolve_graphs

    items = [graphs] if isinstance(graphs, (str, Path, CompGraph)) else list(graphs)
    out: list[CompGraph] = []
    for item in items:
        if isinstance(item, CompGraph):
            out.append(item)
        elif isinstance(item, Path):
            out.append(CompGraph.load(item))
        elif isinstance(item, str):
            out.extend(resolve_graphs(item))
        else:
            raise ValueError(
                f"graphs: expected names, suite:NAME, files or CompGraph objects, got {item!r}"
            )
    if not out:
        raise ValueError("graphs: no graph given")
    return out


def pick_graph(options: dict[str, Any] | None, num_graphs: int, rng: np.random.Generator) -> int:
    """The graph of the next episode: ``options["graph"]`` when given (checked to be in
    ``[0, num_graphs)``), else one drawn uniformly with ``rng``."""
    if options and "graph" in options:
        index = int(options["graph"])
        if not 0 <= index < num_graphs:
            raise ValueError(f"options['graph'] = {index} is outside [0, {num_graphs})")
        return index
    return int(rng.integers(num_graphs))


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


class GraphOptEnv(gym.Env[dict[str, np.ndarray], np.ndarray]):
    """Base class; the task subclasses set :attr:`task` and document themselves."""

    task: ClassVar[str] = ""
    metadata = {"render_modes": []}  # noqa: RUF012 (Gymnasium's convention)

    def __init__(
        self,
        graphs: GraphSpec = "suite:tiny",
        cluster: str | Path | Cluster = DEFAULT_CLUSTER,
        cost_model: CostModel | None = None,
        reward_mode: str = "speedup",
        max_ops: int | None = None,
        max_edges: int | None = None,
        num_priorities: int = 8,
        reference: str = "best",
        obs_mode: str = "full",
        hint: bool = True,
        seed: int | None = None,
    ) -> None:
        self.graphs = resolve_graph_list(graphs)
        self.cluster = get_cluster(cluster)
        self.cost_model: CostModel = cost_model if cost_model is not None else Simulator()
        if not isinstance(self.cost_model, CostModel):
            raise ValueError(
                f"cost_model {cost_model!r} does not implement evaluate(graph, cluster, decision)"
            )
        self.reward_mode = check_reward_mode(reward_mode)
        if obs_mode not in OBS_MODES:
            raise ValueError(
                f"unknown obs_mode {obs_mode!r}; choose one of: {', '.join(OBS_MODES)}"
            )
        self.obs_mode = obs_mode
        self.hint = bool(hint)
        if num_priorities < 1:
            raise ValueError(f"num_priorities must be >= 1, got {num_priorities}")
        self.num_priorities = int(num_priorities)
        self.reference_name = check_reference(reference)
        largest = max(g.num_ops for g in self.graphs)
        self.max_ops = int(max_ops) if max_ops is not None else largest
        most_edges = max(g.num_edges for g in self.graphs)
        self.max_edges = (
            int(max_edges) if max_edges is not None else max(4 * self.max_ops, most_edges)
        )
        # encode every graph now: bad sizes fail at construction, not in the middle of training
        self._encoded = [
            encoding.encode(g, self.cluster, self.max_ops, self.max_edges) for g in self.graphs
        ]
        self._references: dict[int, Reference] = {}
        num_dev = self.cluster.num_devices
        nvec = {
            "placement": [num_dev],
            "scheduling": [self.num_priorities],
            "fusion": [2],
            "joint": [num_dev, self.num_priorities, 2],
        }[self.task]
        self.nvec: np.ndarray = np.repeat(np.array(nvec, dtype=np.int64), self.max_ops)
        """Classes per action slot (``action_space.nvec``)."""
        self.action_space = spaces.MultiDiscrete(self.nvec)
        self.observation_space: spaces.Dict  # type: ignore[assignment]
        if obs_mode == "full":
            space = encoding.observation_space(self.max_ops, self.max_edges)
            high = int(self.nvec.max()) - 1
            hint_space = spaces.Box(-1, high, (len(self.nvec),), np.int64)
            self.observation_space = spaces.Dict({**space.spaces, "hint": hint_space})
        else:
            self.observation_space = spaces.Dict(
                {"graph_id": spaces.Box(0, len(self.graphs) - 1, (1,), np.int64)}
            )
        self._current = 0
        self._seed = seed
        self.last_episode: Episode | None = None
        if seed is not None:
            self.reset(seed=seed)

    task_kwargs: ClassVar[dict[str, Any]] = {}
    """Constructor arguments beyond the common ones that recreate this environment (none here)."""

    # ------------------------------------------------------------------ graphs
    def encoded_graphs(self) -> list[dict[str, np.ndarray]]:
        """The full observation of every graph (with its hint), indexed by ``graph_id`` (for
        ``obs_mode="id"``)."""
        return [{**e.observation, "hint": self.hint_action(i)} for i, e in enumerate(self._encoded)]

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
        ref = filled(self.reference(index).decision, n)
        assert ref.placement is not None and ref.priority is not None and ref.fusion is not None
        prio = ref.priority
        levels = prio * self.num_priorities // (int(prio.max()) + 1) if n else prio
        blocks: list[np.ndarray] = {
            "placement": [ref.placement],
            "scheduling": [levels],
            "fusion": [ref.fusion],
            "joint": [ref.placement, levels, ref.fusion],
        }[self.task]
        for b, values in enumerate(blocks):
            out[b * self.max_ops : b * self.max_ops + n] = values
        return out

    def reference(self, index: int) -> Reference:
        """The reference decision of graph ``index`` (computed once, then cached)."""
        ref = self._references.get(index)
        if ref is None:
            ref = reference_decision(
                self.graphs[index], self.cluster, self.task, self.cost_model, self.reference_name
            )
            self._references[index] = ref
        return ref

    def _observation(self) -> dict[str, np.ndarray]:
        """A fresh copy of the current graph's observation (callers may keep or modify it)."""
        if self.obs_mode == "id":
            return {"graph_id": np.array([self._current], dtype=np.int64)}
        obs = {k: v.copy() for k, v in self._encoded[self._current].observation.items()}
        obs["hint"] = self.hint_action(self._current)
        return obs

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
        self._current = pick_graph(options, len(self.graphs), self.np_random)
        graph = self.graphs[self._current]
        return self._observation(), {"graph": graph.name, "num_ops": graph.num_ops}

    def step(
        self, action: np.ndarray
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """Price the decision ``action`` for the current graph; the episode always ends here."""
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
            "speedup": ref_time / m.step_time if m.valid and m.step_time > 0 else 0.0,
        }
        return self._terminal_observation(), r, True, False, info

    def decode(self, action: np.ndarray) -> Decision:
        """The :class:`Decision` an action encodes for the current graph (padding ignored).

        Raises:
            ValueError: an action of the wrong shape or out of range.
        """
        a = np.asarray(action)
        nvec = self.nvec
        if a.shape != nvec.shape:
            raise ValueError(
                f"action has shape {a.shape}; expected {nvec.shape} "
                f"({self.task}: {len(nvec) // self.max_ops} value(s) per op slot, max_ops={self.max_ops})"
            )
        if a.dtype.kind not in "iu":
            if a.dtype.kind == "f" and np.all(a == np.round(a)):
                a = a.astype(np.int64)
            else:
                raise ValueError(f"action must hold integers, got dtype {a.dtype}")
        bad = (a < 0) | (a >= nvec)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"action[{i}] = {int(a[i])} is out of range; allowed values are 0..{int(nvec[i]) - 1}"
            )
        n = self.graphs[self._current].num_ops
        base = filled(self.reference(self._current).decision, n)
        part = a.reshape(-1, self.max_ops)[:, :n].astype(np.int64)
        if self.task == "placement":
            return Decision(placement=part[0])
        if self.task == "scheduling":
            return Decision(placement=base.placement, priority=part[0])
        if self.task == "fusion":
            return Decision(placement=base.placement, priority=base.priority, fusion=part[0])
        return Decision(placement=part[0], priority=part[1], fusion=part[2])

    def save_episode(self, path: str | Path) -> Path:
        """Write the last episode's decision with graph, cluster and seed, for
        ``graphopt simulate GRAPH --cluster CLUSTER --decision FILE``."""
        if self.last_episode is None:
            raise ValueError("no finished episode to save yet: call reset() and step() first")
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.last_episode.to_dict()))
        return path
