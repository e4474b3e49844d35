"""Evaluate a trained run on graphs against every baseline (``graphopt eval``).

The policy runs in one of four modes (:mod:`policies.rollout`): ``greedy`` (zero-shot, the
most likely decision), ``sample:K`` (best of K sampled decisions), ``finetune:STEPS`` (PPO on
the graph alone for STEPS more decisions first, as in GO) or ``plan:K`` (placement: the greedy
decision refined by K analytic estimates, no simulation; the table then also holds
``estimate-search@K``, the same search from the best heuristic with uniform proposals, so what the
policy adds to the search is visible). Results go to ``RUN/eval/<mode>/``:
``results.json``, ``results.csv``, ``comparison.png`` (per-graph bars) and ``training_curve.png``.

:func:`curve_run` (``graphopt eval RUN --curve``) instead draws the anytime curves of the policy's
modes and the baselines (:mod:`graphopt.eval.curves`) into ``RUN/eval/curves/``.

Graphs are evaluated one at a time, each on its own: the policy's sampling is seeded with ``seed``
at every policy run (:func:`policy_result`), so a graph's rows depend neither on the graphs before
it nor on the process that computes them. With ``workers`` above 1 or an ``address`` each graph is
one Ray task (:func:`graphopt.distributed.map_jobs`; :func:`compare_graph_job`,
:func:`curve_graph_job`) that loads the run's model itself from the run directory (weights only),
so the run directory must exist on every node, and runs it on CPU with one torch thread; the
tables are those of the serial evaluation on CPU, wall-clock columns excepted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import torch
from rich.console import Console

from envs import make_env
from envs.base import GraphSpec, resolve_graph_list
from graphopt import rundir
from graphopt.accelerator import resolve_device
from graphopt.decisions.files import write_outputs
from graphopt.distributed import check_ray_device, check_workers, map_jobs, uses_ray
from graphopt.errors import InvalidArgument
from graphopt.eval.compare import GraphComparison, compare_on_graph, stage_decisions
from graphopt.eval.curves import (
    CALLS,
    SECONDS,
    CurvePoint,
    curve_files,
    graph_curves,
    print_curves,
    stage_curve_decisions,
)
from graphopt.eval.report import (
    comparison_files,
    comparison_plot,
    make_console,
    print_comparisons,
    training_curve_plot,
)
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster, get_cluster
from graphopt.modes import parse_mode
from graphopt.sim import Simulator
from graphopt.tasks import SIMULATED_MOVE_TASKS, get_task
from graphopt.train.config import TrainConfig, load_config
from graphopt.train.policy_registry import get_policy, plans, runs_on_any_device_count
from graphopt.train.trainer import load_model
from graphopt.typing import Decision
from graphopt.workloads.clusters import EACH, graph_clusters
from policies.rollout import PolicyResult, check_compatible, run_policy

POLICY_KINDS = {
    "placement": ("sample", "finetune", "plan"),
    "placement-edit": ("sample", "finetune", "search"),
    **dict.fromkeys(SIMULATED_MOVE_TASKS, ("search",)),
}
"""The budgeted modes of a task's policy on the anytime curves (others: sample, finetune)."""


def policy_kinds(config: TrainConfig) -> tuple[str, ...]:
    """The budgeted modes of ``config``'s policy on the anytime curves: :data:`POLICY_KINDS`, and
    for a run with a decoder ``sample`` and ``search`` (annealing of the decoder's inputs); HDP
    and Placeto (no per-op device probabilities for ``plan``, no candidate moves for ``search``):
    ``sample`` and ``finetune``."""
    if getattr(config, "decoder", "none") != "none":
        return ("sample", "search")
    if not plans(getattr(config, "policy", "go")):  # no per-op device probabilities
        return ("sample", "finetune")
    return POLICY_KINDS.get(config.task, ("sample", "finetune"))


def check_baseline_mode(config: TrainConfig, mode: str) -> None:
    """Refuse ``plan:K`` and ``search:K`` for an HDP or Placeto run (no per-op device
    probabilities to plan with, no candidate moves to search).

    Raises:
        InvalidArgument: one line naming the mode and the modes the run takes.
    """
    policy = getattr(config, "policy", "go")
    if not plans(policy) and mode.split(":")[0] in ("plan", "search"):
        raise InvalidArgument(
            "{mode} {got} needs per-op device probabilities or candidate moves; a {policy} run "
            "takes greedy, sample:K or finetune:STEPS",
            got=mode,
            policy=policy,
        )


def load_run_model(
    run: Path,
    path: Path | None = None,
    device: str | None = None,
    config: TrainConfig | None = None,
) -> Any:
    """The run's best model (PPO; or that of its model file ``path``), on ``device`` (default:
    the run's setting, :mod:`graphopt.accelerator`): rebuilt from the
    run's ``config.yaml`` and ``model.json`` and given the file's weights, read with
    ``torch.load(weights_only=True)`` (:func:`graphopt.train.trainer.load_model`). Nothing of the
    run is unpickled. ``config``: the run's configuration, where the caller has loaded it.

    Raises:
        ValueError: no model; a run that holds only SB3 ``.zip`` models (older versions; never
            opened); a model file that is not a plain weights file; the message names the file.
    """
    run = Path(run)
    best = path if path is not None else rundir.best_model_path(run)
    return load_model(run, best, device=device, config=config)


def model_sizes(model: Any, task: str) -> tuple[int, int]:
    """``(max_ops, max_edges)`` a trained ``task`` policy was built for (its environments')."""
    obs_space = model.observation_space
    if not get_task(task).one_shot:
        if "op_features" in getattr(obs_space, "spaces", {}):  # a graph network's padding
            return obs_space["op_features"].shape[0], obs_space["edge_index"].shape[1]
        return 2**62, 2**62  # an edit policy's rows do not grow with the graph
    if "op_features" in getattr(obs_space, "spaces", {}):  # also a decoder run's (Box actions)
        max_ops = obs_space["op_features"].shape[0]
    else:  # obs_mode="id": the action layout tells
        max_ops = len(model.action_space.nvec) // (3 if task == "joint" else 1)
    max_edges = (
        obs_space["edge_index"].shape[1] if "edge_index" in obs_space.spaces else 4 * max_ops
    )
    return max_ops, max_edges


class LoadedRun(NamedTuple):
    """A run ready to evaluate: its directory, config and model, and an environment of its task
    on the graphs and cluster asked for (``env.graphs``, ``env.cluster``), priced by ``sim``."""

    path: Path
    config: Any
    model: Any
    env: Any
    sim: Simulator


def load_run(
    run: str | Path,
    graphs: GraphSpec,
    cluster: str | Cluster | None,
    seed: int,
    device: str | None = None,
    config: TrainConfig | None = None,
) -> LoadedRun:
    """The run of directory ``run`` with an environment of its task on ``graphs``, on
    ``cluster`` (default: the run's). ``config``: the run's configuration where the caller has
    loaded it already (it is read from ``config.yaml`` otherwise, once).

    Raises:
        ValueError: not a run / no model; a cluster with another device count, for a policy
            whose observation depends on it (all but the edit tasks); a graph larger than the
            policy's ``max_ops`` (each naming the fix).
    """
    path = rundir.check_run_dir(run)
    if config is None:
        config = load_config(path / rundir.CONFIG_FILE)
    trained = config.resolved_cluster
    target = trained if cluster is None else get_cluster(cluster)
    if device is not None:
        resolve_device(device)  # no such device: refused before the model is read
    model = load_run_model(path, device=device, config=config)
    max_ops, max_edges = model_sizes(model, config.task)
    graph_list = resolve_graph_list(graphs)
    too_big = [g for g in graph_list if g.num_ops > max_ops or g.num_edges > max_edges]
    if too_big:
        g = too_big[0]
        raise ValueError(
            f"graph {g.name!r} has {g.num_ops:,} ops and {g.num_edges:,} edges but the policy of run "
            f"{path} supports at most {max_ops:,} ops and {max_edges:,} edges (its max_ops); train "
            "with a larger max_ops to evaluate on it"
        )
    sim = Simulator()
    env = make_env(
        config.task,
        graph_list,
        target,
        cost_model=sim,
        seed=seed,
        **config.env_settings(max_ops, max_edges),
    )
    try:
        check_compatible(model, env)
    except ValueError:
        if target.num_devices == trained.num_devices:
            raise
        if runs_on_any_device_count(config.policy, config.policy_kwargs):
            # its weights do not depend on the device count: the same weights in a model of
            # this cluster's action space
            best = rundir.best_model_path(path)
            model = load_model(path, best, device=device, spaces=env, config=config)
            check_compatible(model, env)
            return LoadedRun(path, config, model, env, sim)
        # A policy whose observation does not depend on the device count (the edit tasks: one
        # row per candidate move) runs on any cluster; for the others this is the cause.
        switch = get_policy(config.policy).any_device_count
        retrain = (
            f"train with policy_kwargs: {{{switch}: true}}"
            if switch is not None
            else f"train a run on {target.num_devices} devices (the weights of policy "
            f"{config.policy} fit the device count they were trained for)"
        )
        raise ValueError(
            f"run {path} was trained for {trained.num_devices} devices ({trained.name}); "
            f"cluster {target.name} has {target.num_devices}: evaluate on a cluster with the "
            f"same device count, or {retrain}"
        ) from None
    return LoadedRun(path, config, model, env, sim)


def policy_result(model: Any, env: Any, index: int, mode: str, seed: int) -> PolicyResult:
    """:func:`policies.rollout.run_policy` with torch's generator seeded with ``seed`` first: the
    policy samples from it (``sample:K``), so a run draws the same whatever ran before it in this
    process."""
    torch.manual_seed(seed)
    return run_policy(model, env, index, mode, seed)


def compare_graph(
    loaded: LoadedRun, index: int, *, mode: str, budget: int, seed: int
) -> GraphComparison:
    """Graph ``index`` of ``loaded.env``: the policy in ``mode`` next to every baseline
    (:func:`graphopt.eval.compare.compare_on_graph`)."""
    config, model, env = loaded.config, loaded.model, loaded.env
    kind, amount = parse_mode(mode, config.task)

    def policy() -> tuple[str, Decision, int]:
        result = policy_result(model, env, index, mode, seed)
        return f"policy ({mode})", result.decision, result.samples

    return compare_on_graph(
        env.graphs[index],
        env.cluster,
        config.decides,
        budget=budget,
        seed=seed,
        num_priorities=config.num_priorities,
        policy=policy,
        sim=loaded.sim,
        estimate_budget=amount if kind == "plan" else 0,
    )


def curve_graph(
    loaded: LoadedRun,
    index: int,
    *,
    calls: tuple[int, ...],
    seconds: tuple[float, ...],
    seed: int,
    finetune_max: int,
) -> list[CurvePoint]:
    """The anytime curves (:func:`graphopt.eval.curves.graph_curves`) of the policy's modes and
    the baselines on graph ``index`` of ``loaded.env``."""
    config, model, env = loaded.config, loaded.model, loaded.env

    def policy(i: int, mode: str) -> tuple[Decision, int]:
        result = policy_result(model, env, i, mode, seed)
        return result.decision, result.samples

    return graph_curves(
        env.graphs[index],
        env.cluster,
        config.decides,
        calls=calls,
        seconds=seconds,
        seed=seed,
        num_priorities=config.num_priorities,
        policy=policy,
        index=index,
        finetune_max=finetune_max,
        policy_kinds=policy_kinds(config),
        sim=loaded.sim,
    )


def load_runs(
    run: Path,
    graphs: GraphSpec,
    cluster: str | Cluster | None,
    seed: int,
    device: str | None,
    config: TrainConfig | None = None,
) -> tuple[list[tuple[LoadedRun, list[int]]], str]:
    """:func:`load_run` of ``graphs`` on ``cluster``, or with ``cluster`` :data:`EACH` of every
    graph on its own cluster (:func:`graphopt.workloads.clusters.graph_clusters`; ``graphs`` a
    spec then): one loaded run per distinct cluster, with the positions of its graphs in
    ``graphs``, and the name of the cluster (or clusters) for a title. ``config``: the run's
    configuration, loaded once for them all (by the caller, or here).

    Raises:
        ValueError: as :func:`load_run`, and a graph without a cluster of its own.
    """
    if config is None:
        config = load_config(Path(run) / rundir.CONFIG_FILE)
    if not (isinstance(cluster, str) and cluster == EACH):
        loaded = load_run(run, graphs, cluster, seed, device, config)
        return [(loaded, list(range(len(loaded.env.graphs))))], loaded.env.cluster.name
    if not isinstance(graphs, str):
        raise ValueError(f"cluster {EACH!r} reads each graph's cluster: give the graphs as a spec")
    groups: dict[str, tuple[Cluster, list[CompGraph], list[int]]] = {}
    for i, (graph, own) in enumerate(graph_clusters(graphs)):
        _, members, positions = groups.setdefault(own.fingerprint, (own, [], []))
        members.append(graph)
        positions.append(i)
    out = [
        (load_run(run, list(gs), own, seed, device, config), idx)
        for own, gs, idx in groups.values()
    ]
    names = dict.fromkeys(own.name for own, _, _ in groups.values())
    return out, "each graph's cluster (" + ", ".join(names) + ")"


def in_order(groups: list[tuple[LoadedRun, list[int]]], results: list[Any]) -> list[Any]:
    """``results`` (one per graph, group after group) in the order of the graphs asked for."""
    positions = [i for _, idx in groups for i in idx]
    ordered: list[Any] = [None] * len(results)
    for position, result in zip(positions, results, strict=True):
        ordered[position] = result
    return ordered


def graph_cluster_pairs(groups: list[tuple[LoadedRun, list[int]]]) -> list[tuple[Any, Any]]:
    """``(graph, cluster)`` of every graph asked for, in that order (:func:`in_order`)."""
    return in_order(
        groups, [(g, loaded.env.cluster) for loaded, _ in groups for g in loaded.env.graphs]
    )


def decision_dir(save_decisions: str | Path | None) -> Any:
    """The :class:`graphopt.decisions.files.DecisionDir` of ``save_decisions``, checked before the
    (slow) work so that one that cannot be written fails now (it is created only when the
    decisions are written); ``None`` without one."""
    if save_decisions is None:
        return None
    from graphopt.decisions.files import DecisionDir

    return DecisionDir(save_decisions, "save_decisions")


def graph_jobs(loaded: LoadedRun, **settings: Any) -> list[dict[str, Any]]:
    """One Ray job per graph of ``loaded.env``, plain data: ``run`` (the run directory, absolute),
    ``graph`` (:meth:`CompGraph.to_json_dict`), ``cluster`` (:meth:`Cluster.to_dict`),
    ``device`` (``cpu``: :func:`graphopt.distributed.check_ray_device`) and ``settings`` (``seed``
    and those of :func:`compare_graph` or :func:`curve_graph`)."""
    common = {
        "run": str(loaded.path.resolve()),
        "cluster": loaded.env.cluster.to_dict(),
        "device": "cpu",
        **settings,
    }
    return [{**common, "graph": g.to_json_dict()} for g in loaded.env.graphs]


def _load_job(job: dict[str, Any]) -> LoadedRun:
    """The run of a job of :func:`graph_jobs` on its one graph, loaded in the worker."""
    torch.set_num_threads(1)  # one task per CPU: more torch threads would oversubscribe it
    graph = CompGraph.from_json_dict(job["graph"])
    cluster = Cluster.from_dict(job["cluster"])
    return load_run(job["run"], graph, cluster, job["seed"], job["device"])


def compare_graph_job(job: dict[str, Any]) -> GraphComparison:
    """:func:`compare_graph` as a Ray task; ``job``: :func:`graph_jobs` with ``seed``, ``mode``
    and ``budget``."""
    return compare_graph(
        _load_job(job), 0, mode=job["mode"], budget=job["budget"], seed=job["seed"]
    )


def curve_graph_job(job: dict[str, Any]) -> list[CurvePoint]:
    """:func:`curve_graph` as a Ray task; ``job``: :func:`graph_jobs` with ``seed``, ``calls``,
    ``seconds`` and ``finetune_max``."""
    return curve_graph(
        _load_job(job),
        0,
        calls=tuple(job["calls"]),
        seconds=tuple(job["seconds"]),
        seed=job["seed"],
        finetune_max=job["finetune_max"],
    )


def curve_run(
    run: str | Path,
    graphs: str,
    *,
    calls: tuple[int, ...] = CALLS,
    seconds: tuple[float, ...] = SECONDS,
    cluster: str | Cluster | None = None,
    seed: int = 0,
    finetune_max: int = 256,
    out_dir: Path | None = None,
    console: Console | None = None,
    device: str | None = None,
    workers: int = 1,
    address: str | None = None,
    save_decisions: str | Path | None = None,
) -> list[CurvePoint]:
    """Anytime curves (:mod:`graphopt.eval.curves`) of the run's policy and the baselines on
    ``graphs``; printed, and written to ``out_dir`` (default ``RUN/eval/curves``). With
    ``workers`` above 1 or an ``address``, one Ray task per graph (module docstring). ``cluster``:
    default the run's; ``"each"``: every graph on its own (:func:`load_runs`).
    ``save_decisions``: a directory where every point's decision is saved
    (:func:`graphopt.eval.curves.stage_curve_decisions`). The curves' files and the decisions
    are one set: all of them or nothing new (:func:`graphopt.decisions.files.write_outputs`).

    Raises:
        ValueError: as :func:`load_run`, and an output directory that cannot be created (before
            any work); bad ``workers`` or ``address`` (:mod:`graphopt.distributed`); a CUDA
            ``device`` with Ray (:func:`graphopt.distributed.check_ray_device`).
    """
    check_workers(workers)
    check_ray_device(device, workers, address)
    path = rundir.check_run_dir(run)
    out = out_dir or path / "eval" / "curves"
    rundir.check_output_path(out, "output directory", directory=True)  # before any work
    saved = decision_dir(save_decisions)
    groups, where = load_runs(path, graphs, cluster, seed, device)
    settings = dict(calls=calls, seconds=seconds, seed=seed, finetune_max=finetune_max)
    if uses_ray(workers, address):
        jobs = [job for loaded, _ in groups for job in graph_jobs(loaded, **settings)]
        found = map_jobs(curve_graph_job, jobs, workers=workers, address=address)
    else:
        found = [
            curve_graph(
                loaded, i, calls=calls, seconds=seconds, seed=seed, finetune_max=finetune_max
            )
            for loaded, _ in groups
            for i in range(len(loaded.env.graphs))
        ]
    per_pair: list[list[CurvePoint]] = in_order(groups, found)
    points = [p for per_graph in per_pair for p in per_graph]
    title = f"{groups[0][0].config.task} on {where}, run {path.name}"
    print_curves(points, title, console)
    if saved is not None:
        pairs = graph_cluster_pairs(groups)
        task = groups[0][0].config.decides
        stage_curve_decisions(pairs, per_pair, saved, task=task, seed=seed)
    files = {out / name: content for name, content in curve_files(points, title).items()}
    index = write_outputs(files, saved)
    shown = [*files, *([index] if index is not None else [])]
    (console or make_console()).print(f"wrote {', '.join(str(f) for f in shown)}")
    return points


def evaluate_run(
    run: str | Path,
    graphs: str,
    *,
    mode: str = "greedy",
    cluster: str | Cluster | None = None,
    budget: int = 0,
    seed: int = 0,
    out_dir: Path | None = None,
    console: Console | None = None,
    device: str | None = None,
    workers: int = 1,
    address: str | None = None,
    save_decisions: str | Path | None = None,
) -> list[GraphComparison]:
    """Compare the run's policy with the baselines on ``graphs``; print, write and plot. With
    ``workers`` above 1 or an ``address``, one Ray task per graph (module docstring).
    ``save_decisions``: a directory where every row's decision is saved
    (:class:`graphopt.decisions.files.DecisionDir`: one file per graph and method and an
    ``index.json``; ``results.json`` rows name their file). The results, the plots and the
    decisions are one set: all of them or nothing new
    (:func:`graphopt.decisions.files.write_outputs`).
    ``cluster``: default the run's; ``"each"``: every graph on its own cluster, all in one table
    (:func:`load_runs`).

    Raises:
        ValueError: not a run / no model; an output directory that cannot be created; a cluster
            with another device count; a graph larger than the policy's ``max_ops``; an unknown
            mode (all before any evaluation); bad ``workers`` or ``address``
            (:mod:`graphopt.distributed`); a CUDA ``device`` with Ray
            (:func:`graphopt.distributed.check_ray_device`).
    """
    check_workers(workers)
    check_ray_device(device, workers, address)
    path = rundir.check_run_dir(run)
    config = load_config(path / rundir.CONFIG_FILE)
    parse_mode(mode, config.task)  # a mode the run's policy does not take: before any work
    check_baseline_mode(config, mode)
    out = out_dir or path / "eval" / mode.replace(":", "-")
    rundir.check_output_path(out, "output directory", directory=True)
    saved = decision_dir(save_decisions)
    groups, where = load_runs(path, graphs, cluster, seed, device, config)
    if uses_ray(workers, address):
        settings = dict(mode=mode, budget=budget, seed=seed)
        jobs = [job for loaded, _ in groups for job in graph_jobs(loaded, **settings)]
        found = map_jobs(compare_graph_job, jobs, workers=workers, address=address)
    else:
        found = [
            compare_graph(loaded, i, mode=mode, budget=budget, seed=seed)
            for loaded, _ in groups
            for i in range(len(loaded.env.graphs))
        ]
    comparisons: list[GraphComparison] = in_order(groups, found)
    if saved is not None:
        pairs = graph_cluster_pairs(groups)
        stage_decisions(comparisons, pairs, saved, task=config.decides, seed=seed)
    title = f"{config.task} on {where}, run {path.name}"
    print_comparisons(comparisons, title, console)
    files: dict[Path, str | bytes] = {
        out / name: text for name, text in comparison_files(comparisons, "results.json").items()
    }
    files[out / "comparison.png"] = comparison_plot(comparisons, title)
    curve = training_curve_plot(path / rundir.METRICS, f"training of {path.name}")
    if curve is not None:
        files[out / "training_curve.png"] = curve
    index = write_outputs(files, saved)
    shown = [*files, *([index] if index is not None else [])]
    (console or make_console()).print(f"wrote {', '.join(str(f) for f in shown)}")
    return comparisons
