"""Training environments as plain data: :class:`EnvSpec` rebuilds them in any process.

Both the ``subproc`` backend (:mod:`graphopt.train.vec_env`) and the ``ray`` backend
(:mod:`graphopt.train.ray_vec_env`) send an :class:`EnvSpec` (graph and cluster dicts, the
settings of :func:`envs.make_env`, one seed per environment) to the processes that host the
environments, which build them with :func:`build_envs`: nothing is unpickled from disk.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from envs import make_env
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim import Simulator
from graphopt.typing import CostModel


@dataclass(frozen=True)
class EnvSpec:
    """Plain data that rebuilds the training environments in another process."""

    task: str
    graphs: tuple[dict[str, Any], ...]
    """The training graphs as :meth:`CompGraph.to_json_dict` dicts."""
    cluster: dict[str, Any]
    """:meth:`Cluster.to_dict`."""
    settings: dict[str, Any]
    """The keyword arguments of :func:`envs.make_env` (:meth:`TrainConfig.env_settings`)."""
    seeds: tuple[int, ...]
    """The seed of every environment (``config.seed + i``)."""
    cost_model: str = "simulator"
    """``simulator`` or the path of a learned cost model (loaded where the environments run)."""

    @property
    def n_envs(self) -> int:
        return len(self.seeds)


def build_envs(spec: EnvSpec, indices: list[int] | range | None = None) -> list[Any]:
    """Environments ``indices`` (default: all) of ``spec``, sharing one simulator."""
    graphs = [CompGraph.from_json_dict(g) for g in spec.graphs]
    cluster = Cluster.from_dict(spec.cluster)
    cost: CostModel = Simulator()
    if spec.cost_model != "simulator":
        from graphopt.costmodel.learned import LearnedCostModel  # torch_geometric: lazily

        cost = LearnedCostModel.load(spec.cost_model)
    indices = range(spec.n_envs) if indices is None else indices
    return [
        make_env(spec.task, graphs, cluster, cost_model=cost, seed=spec.seeds[i], **spec.settings)
        for i in indices
    ]


def build_one(spec: EnvSpec, index: int) -> Any:
    """Environment ``index`` of ``spec`` (the factory ``SubprocVecEnv`` runs in its process)."""
    return build_envs(spec, [index])[0]


def existing(env: Any) -> Callable[[], Any]:
    """An environment factory for ``DummyVecEnv`` that returns ``env``, already built."""
    return lambda: env
