"""What every graphopt environment shares: its graphs, cluster, cost model, reward and reference.

:class:`GraphEnv` is the small base of every environment: it takes the shared settings
(:class:`envs.settings.EnvSettings`, checked there), resolves the graphs and the cluster, caches
each graph's reference decision and placement constraints, and picks the graph of an episode. A subclass sets :attr:`GraphEnv.task` (a
name of :data:`graphopt.tasks.TASKS`) and adds its spaces, ``reset`` and ``step``.
:class:`EditEnv` adds what the two edit environments share (candidates, horizon, reward scale,
``reset``); :func:`check_action`, :func:`check_action_values`, :func:`padding_sizes` and
:func:`episode_end` are the action checks, padding and last ``info`` of every environment.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium.error import ResetNeeded

from envs.reference import Reference, reference_decision
from envs.rewards import speedup
from envs.settings import EnvSettings, GraphSpec
from graphopt.constraints import Constraints, constraints
from graphopt.graph import CompGraph
from graphopt.hardware import get_cluster
from graphopt.sim import Simulator
from graphopt.tasks import get_task
from graphopt.typing import CostModel
from graphopt.workloads import resolve_graphs


def resolve_graph_list(graphs: GraphSpec) -> list[CompGraph]:
    """Graphs from a suite or graph name, a file, a ``CompGraph`` or a list of those."""
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


def check_action(action: Any, n: int, meaning: str) -> int:
    """``action`` as the index of one of ``n`` choices (a ``Discrete(n)`` action): a Python or
    numpy integer, a 0-d integer array, or an integral float (``2.0``; as the one-shot
    environments accept whole numbers of a float array). ``meaning`` says what the index picks,
    for the messages (``"a candidate row"``).

    Raises:
        ValueError: not one value (an array of another shape, named with the expected ``()``), not
            an integer (``1.5``, NaN, a string, a bool), or outside ``0..n-1``.
    """
    expected = f"{meaning} in 0..{n - 1}"
    try:
        a = np.asarray(action)
    except ValueError:  # a ragged list
        raise ValueError(f"action {action!r} is not one integer; expected {expected}") from None
    if a.shape != ():
        raise ValueError(f"action has shape {a.shape}; expected () (one integer: {expected})")
    integral = a.dtype.kind in "iu" or (
        a.dtype.kind == "f" and bool(np.isfinite(a)) and float(a) == round(float(a))
    )
    if not integral:
        shown = repr(a.item()) if a.dtype.kind in "bf" else repr(action)  # 1.5, not float64(1.5)
        raise ValueError(f"action must be an integer, got {shown}; expected {expected}")
    index = int(a)
    if not 0 <= index < n:
        raise ValueError(f"action {index} is outside 0..{n - 1} ({meaning})")
    return index


def check_action_values(action: Any, nvec: np.ndarray, layout: str) -> np.ndarray:
    """``action`` as the values of a ``MultiDiscrete(nvec)`` action (an integer array; whole
    numbers of a float array are accepted and made int64). ``layout`` says what the slots hold,
    for the message of a wrong shape (``"a group per op slot, ..."``).

    Raises:
        ValueError: an action of another shape than ``nvec``, not integers, or a value outside
            ``0..nvec[i]-1``.
    """
    a = np.asarray(action)
    if a.shape != nvec.shape:
        raise ValueError(f"action has shape {a.shape}; expected {nvec.shape} ({layout})")
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
    return a


def padding_sizes(
    graphs: Sequence[CompGraph], max_ops: int | None, max_edges: int | None
) -> tuple[int, int]:
    """The op and edge slots of an encoded observation (:func:`graphopt.encoding.encode`):
    ``max_ops`` (default: the most ops of ``graphs``) and ``max_edges`` (default: ``4 * max_ops``,
    or the most edges of ``graphs`` where that is more)."""
    ops = int(max_ops) if max_ops is not None else max(g.num_ops for g in graphs)
    most_edges = max(g.num_edges for g in graphs)
    edges = int(max_edges) if max_edges is not None else max(4 * ops, most_edges)
    return ops, edges


def episode_end(
    step_time: float, valid: bool, reference_time: float, episode_return: float
) -> dict[str, Any]:
    """The ``info`` entries of the last step of a multi-step episode: the final decision's
    ``step_time`` and ``valid``, ``reference_time``, ``speedup`` over the reference (0 for an
    invalid decision) and ``episode_return``."""
    return {
        "step_time": step_time,
        "valid": valid,
        "reference_time": reference_time,
        "speedup": speedup(reference_time, step_time, valid),
        "episode_return": episode_return,
    }


def pick_graph(options: dict[str, Any] | None, num_graphs: int, rng: np.random.Generator) -> int:
    """The graph of the next episode: ``options["graph"]`` when given (checked to be an integer
    in ``[0, num_graphs)``), else one drawn uniformly with ``rng``."""
    if options and "graph" in options:
        given = options["graph"]
        if isinstance(given, bool) or not isinstance(given, (int, np.integer)):
            raise ValueError(f"options['graph'] must be an integer graph index, got {given!r}")
        index = int(given)
        if not 0 <= index < num_graphs:
            raise ValueError(f"options['graph'] = {index} is outside [0, {num_graphs})")
        return index
    return int(rng.integers(num_graphs))


class GraphEnv(gym.Env[Any, Any]):
    """The shared base (module docstring).

    Args:
        *args: an :class:`~envs.settings.EnvSettings`, or its first fields by position:
            ``graphs``, ``cluster``, ``cost_model``.
        **shared: fields of :class:`~envs.settings.EnvSettings` (documented there), those the
            class names in :attr:`takes` besides graphs, cluster and cost model.

    Raises:
        TypeError: a setting the environment does not take.
        ValueError: a bad value (:meth:`EnvSettings.validate`), graph or cluster.
    """

    task: ClassVar[str] = ""
    takes: ClassVar[tuple[str, ...]] = ("reward_mode", "reference")
    """The :class:`~envs.settings.EnvSettings` fields the environment reads beyond graphs,
    cluster and cost model: the shared part of :meth:`settings`."""
    metadata = {"render_modes": []}  # noqa: RUF012 (Gymnasium's convention)

    def __init__(self, *args: Any, **shared: Any) -> None:
        self.config = EnvSettings.of(type(self).__name__, self.takes, args, shared)
        """The environment's settings (padding resolved where the environment pads)."""
        self.graphs: list[CompGraph] = resolve_graph_list(self.config.graphs)
        self.cluster = get_cluster(self.config.cluster)
        given = self.config.cost_model
        self.cost_model: CostModel = given if given is not None else Simulator()
        self._references: dict[int, Reference] = {}
        self._rules: dict[int, Constraints] = {}
        self._current = 0
        self._was_reset = False

    @classmethod
    def setting_names(cls) -> set[str]:
        """The keywords of :func:`envs.make_env` the environment takes: :attr:`takes` and its
        constructor's own (``seed`` aside)."""
        own = inspect.signature(cls).parameters.values()
        named = {p.name for p in own if p.kind is inspect.Parameter.KEYWORD_ONLY}
        return (set(cls.takes) | named) - {"seed"}

    @property
    def reward_mode(self) -> str:
        """The reward mode (:mod:`envs.rewards`)."""
        return self.config.reward_mode

    @property
    def reference_name(self) -> str:
        """``"best"`` or the placer of the reference (:mod:`envs.reference`)."""
        return self.config.reference

    def _pad(self, zero_is_default: bool = False) -> None:
        """Resolve the padding of the settings (:func:`padding_sizes`; None, and 0 where
        ``zero_is_default``: the default) into :attr:`max_ops`, :attr:`max_edges` and
        :attr:`config`."""
        max_ops, max_edges = self.config.max_ops, self.config.max_edges
        if zero_is_default:
            max_ops, max_edges = max_ops or None, max_edges or None
        self.max_ops, self.max_edges = padding_sizes(self.graphs, max_ops, max_edges)
        self.config = replace(self.config, max_ops=self.max_ops, max_edges=self.max_edges)

    def _pick(self, options: dict[str, Any] | None) -> int:
        """The graph of the episode ``reset`` starts (:func:`pick_graph`); ``step`` may run after."""
        self._current = pick_graph(options, len(self.graphs), self.np_random)
        self._was_reset = True
        return self._current

    def _check_reset(self) -> None:
        """Gymnasium's ``ResetNeeded`` when ``step`` comes before any ``reset``."""
        if not self._was_reset:
            raise ResetNeeded(
                f"{type(self).__name__}.step() was called before reset(): call env.reset() first"
            )

    @property
    def decides(self) -> str:
        """The one-shot task whose decision this environment produces (its baselines and
        reference are that task's)."""
        return get_task(self.task).decides_as

    def settings(self) -> dict[str, Any]:
        """The keyword arguments of :func:`envs.make_env` beyond graphs, cluster, cost model and
        seed that recreate this environment: the :attr:`takes` fields of :attr:`config` (the
        subclass adds its own)."""
        return {name: getattr(self.config, name) for name in self.takes}

    def reference(self, index: int) -> Reference:
        """The reference decision of graph ``index`` (computed once, then cached)."""
        ref = self._references.get(index)
        if ref is None:
            ref = reference_decision(
                self.graphs[index], self.cluster, self.decides, self.cost_model, self.reference_name
            )
            self._references[index] = ref
        return ref

    def constraints(self, index: int) -> Constraints:
        """The placement constraints of graph ``index`` on the cluster (computed once, then
        cached; :mod:`graphopt.constraints`)."""
        rules = self._rules.get(index)
        if rules is None:
            rules = self._rules[index] = constraints(self.graphs[index], self.cluster)
        return rules


class EditEnv(GraphEnv):
    """The base of the edit environments (:mod:`envs.placement_edit`, :mod:`envs.decision_edit`):
    an episode improves a start decision in ``horizon`` steps, each choosing one of the
    ``candidates`` moves drawn for it, rewarded ``reward_scale`` times the change of the task
    reward (all three settings of :class:`~envs.settings.EnvSettings`).

    A subclass defines ``_start(index)`` (the start of graph ``index``'s episode) and
    ``_draw()`` (the next candidates' observation).
    """

    takes: ClassVar[tuple[str, ...]] = (
        "reward_mode",
        "reference",
        "candidates",
        "horizon",
        "reward_scale",
    )

    @property
    def candidates(self) -> int:
        """Moves offered per step."""
        return int(self.config.candidates)

    @property
    def horizon(self) -> int:
        """Steps per episode."""
        return int(self.config.horizon)

    @property
    def reward_scale(self) -> float:
        """What the reward is multiplied by."""
        return float(self.config.reward_scale)

    def _start(self, index: int) -> None:
        raise NotImplementedError

    def _draw(self) -> Any:
        raise NotImplementedError

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Start from the reference decision of a drawn graph (or ``options["graph"]``)."""
        super().reset(seed=seed)
        index = self._pick(options)
        self._start(index)
        graph = self.graphs[index]
        return self._draw(), {"graph": graph.name, "num_ops": graph.num_ops}
