"""Where the training environments run: the one place that builds them and vectorises them.

Three backends step the ``n_envs`` training environments for stable-baselines3's PPO
(:func:`make_vec_env`; :func:`choose_backend` picks one):

==========  ===================================================================================
backend     where the environments (and their simulators) run
==========  ===================================================================================
dummy       in the learner's process, one after another (SB3 ``DummyVecEnv``)
subproc     one process per environment on this machine (SB3 ``SubprocVecEnv``)
ray         ``workers`` Ray actors, each hosting a contiguous share of the environments
            (:class:`graphopt.train.ray_vec_env.RayVecEnv`), on this machine or a Ray cluster
==========  ===================================================================================

Every backend builds environment ``i`` with the same graphs, cluster, settings and seed
``config.seed + i``, so they step through the same episodes: with the same seed a run's
metrics and weights do not depend on the backend (tests/graphopt/train/test_ray_vec_env.py
checks Ray against in-process). Environments in other processes are rebuilt there from an
:class:`~graphopt.train.env_spec.EnvSpec`, plain data (graph and cluster dicts, settings):
nothing is unpickled from disk. The cluster is the config's, resolved once
(:attr:`~graphopt.train.config.TrainConfig.resolved_cluster`) and shared by every environment.

The validation environment always runs in the learner's process.
"""

from __future__ import annotations

import os
from typing import Any

from envs import make_env
from envs.base import resolve_graph_list
from graphopt.distributed import check_workers, uses_ray
from graphopt.errors import InvalidArgument
from graphopt.graph import CompGraph
from graphopt.sim import Simulator
from graphopt.train.config import TrainConfig
from graphopt.train.env_spec import EnvSpec, build_one, existing
from graphopt.typing import CostModel

BACKENDS = ("auto", "dummy", "subproc", "ray")
"""The choices of :func:`choose_backend`."""


def choose_backend(
    n_envs: int,
    *,
    backend: str = "auto",
    workers: int = 1,
    ray_address: str | None = None,
    cpus: int | None = None,
) -> str:
    """The backend that runs ``n_envs`` training environments.

    ``auto``: ``ray`` with more than one worker or a Ray address; else ``subproc`` when there are
    several environments and this machine has more than 2 cores (``cpus``, default
    ``os.cpu_count()``; on 2 cores the learner and the environments share them, and a process per
    environment only adds transfers); else ``dummy``.

    Raises:
        ValueError: an unknown backend, workers below 1, or workers / an address given with
            ``dummy`` or ``subproc``.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown environment backend {backend!r}; choose one of: {BACKENDS}")
    check_workers(workers)
    ray = uses_ray(workers, ray_address)
    if backend == "auto":
        if ray:
            return "ray"
        cpus = (os.cpu_count() or 1) if cpus is None else cpus
        return "subproc" if n_envs > 1 and cpus > 2 else "dummy"
    if ray and backend != "ray":
        raise InvalidArgument(
            "{workers} {got} / {ray_address} run the environments on Ray, not {chosen}; drop "
            "them or choose the ray backend ({backend} ray)",
            got=workers,
            chosen=backend,
        )
    return backend


def _inputs(config: TrainConfig) -> tuple[list[CompGraph], list[CompGraph], dict[str, Any]]:
    """The training graphs, the validation graphs and the environment settings of ``config``
    (one ``max_ops`` and ``max_edges`` for both sets of graphs)."""
    train_graphs = resolve_graph_list(config.graphs)
    val_graphs = resolve_graph_list(config.val_graphs) if config.val_graphs else []
    max_ops = config.max_ops or max(g.num_ops for g in train_graphs + val_graphs)
    max_edges = max(4 * max_ops, *(g.num_edges for g in train_graphs + val_graphs))
    return train_graphs, val_graphs, config.env_settings(max_ops, max_edges)


def check_inputs(config: TrainConfig) -> None:
    """Refuse what :func:`make_vec_env` would refuse about ``config``'s environments, building
    only one training and one validation environment (priced by the simulator; nothing is
    stepped): graphs that cannot be resolved, an unknown cluster, a graph larger than
    ``max_ops``, a cluster the task cannot use.

    Raises:
        ValueError: the message of the first refusal (the same as training would give).
    """
    train_graphs, val_graphs, settings = _inputs(config)
    cluster = config.resolved_cluster
    for graphs in (train_graphs, val_graphs):
        if graphs:
            make_env(config.task, graphs, cluster, seed=config.seed, **settings)


def _val_env(
    config: TrainConfig, graphs: list[CompGraph], settings: dict[str, Any], sim: Simulator
) -> Any | None:
    if not graphs:
        return None
    return make_env(
        config.task, graphs, config.resolved_cluster, cost_model=sim, seed=config.seed, **settings
    )


def make_envs(config: TrainConfig, sim: Simulator | None = None) -> tuple[list[Any], Any | None]:
    """``n_envs`` training environments and one validation environment, in this process, sharing
    one simulator (and so its cache of prepared graphs and reference decisions) and one
    ``max_ops``.

    With ``config.cost_model`` other than ``"simulator"`` the training environments price
    decisions (and their references) with that
    :class:`~graphopt.costmodel.learned.LearnedCostModel`; validation always uses the simulator.
    """
    sim = sim or Simulator()
    train_cost: CostModel = sim
    if config.cost_model != "simulator":
        from graphopt.costmodel.learned import LearnedCostModel  # torch_geometric: import lazily

        train_cost = LearnedCostModel.load(config.cost_model)
    train_graphs, val_graphs, settings = _inputs(config)
    cluster = config.resolved_cluster  # resolved once: every environment shares it
    envs = [
        make_env(
            config.task,
            train_graphs,
            cluster,
            cost_model=train_cost,
            seed=config.seed + i,
            **settings,
        )
        for i in range(config.n_envs)
    ]
    return envs, _val_env(config, val_graphs, settings, sim)


def env_spec(config: TrainConfig) -> tuple[EnvSpec, Any | None]:
    """The :class:`EnvSpec` of ``config``'s training environments, and its validation
    environment (in this process)."""
    train_graphs, val_graphs, settings = _inputs(config)
    spec = EnvSpec(
        task=config.task,
        graphs=tuple(g.to_json_dict() for g in train_graphs),
        cluster=config.resolved_cluster.to_dict(),
        settings=settings,
        seeds=tuple(config.seed + i for i in range(config.n_envs)),
        cost_model=config.cost_model,
    )
    return spec, _val_env(config, val_graphs, settings, Simulator())


def make_vec_env(
    config: TrainConfig,
    *,
    backend: str = "auto",
    workers: int = 1,
    ray_address: str | None = None,
) -> tuple[Any, Any | None]:
    """The vectorised training environments of ``config`` on the backend :func:`choose_backend`
    picks, and the validation environment (None without ``val_graphs``). Close the first when
    done (it ends the processes or actors of the ``subproc`` and ``ray`` backends).

    Args:
        backend: ``auto``, ``dummy``, ``subproc`` or ``ray``.
        workers: Ray actors that host the environments (``ray``; at most ``n_envs``).
        ray_address: the Ray cluster to run them on (default: Ray started on this machine).

    Raises:
        ValueError: see :func:`choose_backend`; more workers than environments; for ``ray``, an
            address where no cluster answers or a cluster with fewer CPUs than workers.
        graphopt.errors.DependencyNotInstalled: ``ray`` without Ray installed.
    """
    chosen = choose_backend(
        config.n_envs, backend=backend, workers=workers, ray_address=ray_address
    )
    if chosen == "dummy":
        from stable_baselines3.common.vec_env import DummyVecEnv

        envs, val_env = make_envs(config)
        return DummyVecEnv([existing(e) for e in envs]), val_env
    if workers > config.n_envs:
        raise InvalidArgument(
            "{workers} {got} is more than the {envs} environments (n_envs) they would host; give "
            "at most {envs} workers or raise n_envs",
            got=workers,
            envs=config.n_envs,
        )
    spec, val_env = env_spec(config)
    if chosen == "subproc":
        from functools import partial

        from stable_baselines3.common.vec_env import SubprocVecEnv

        return SubprocVecEnv([partial(build_one, spec, i) for i in range(spec.n_envs)]), val_env
    from graphopt.train.ray_vec_env import RayVecEnv

    return RayVecEnv(spec, workers=workers, address=ray_address), val_env
