"""PPO training runs: build the environments and the policy, learn, record, survive interruption.

Reads top to bottom: resolve graphs -> environments -> PPO -> learn with :class:`RunCallback` ->
final model. Ctrl-C or a crash leaves ``checkpoints/last.pt`` and a ``state.json`` that says so;
:func:`resume` continues from there with the same configuration (a larger ``total_timesteps`` may
extend a run, a finished one included), dropping the rows of ``metrics.csv`` past that checkpoint.

One process at a time trains a run: :func:`train` and :func:`resume` hold its lock
(:func:`graphopt.rundir.locked`) and refuse a run another process holds.

Models are saved as weights only (:mod:`policies.checkpoint`) and rebuilt from the run's
``config.yaml`` and ``model.json`` (:func:`build_model`); nothing of a run directory is unpickled.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from graphopt import rundir
from graphopt.accelerator import resolve_device
from graphopt.errors import InvalidArgument, RunAlreadyFinished, TrainingInterrupted
from graphopt.tasks import get_task
from graphopt.train.callbacks import RunCallback
from graphopt.train.config import TrainConfig, load_config
from graphopt.train.vec_env import make_envs, make_vec_env  # noqa: F401 (make_envs: re-exported)
from policies import checkpoint

DEFAULTS = TrainConfig().to_dict()
"""The settings a key missing from a run's ``config.yaml`` takes (for
:func:`policies.checkpoint.read_model_info`, whose layer does not import the config)."""


def _policy(config: TrainConfig) -> tuple[Any, dict[str, Any]]:
    kwargs = dict(config.policy_kwargs)
    cls = config.policy_class()
    if get_task(config.task).one_shot and not isinstance(cls, str):
        kwargs.setdefault("task", config.task)
    return cls, kwargs


def build_model(
    config: TrainConfig,
    env: Any | None = None,
    *,
    observation_space: Any | None = None,
    action_space: Any | None = None,
    device: str | None = None,
) -> Any:
    """A new PPO of ``config``'s policy and hyper-parameters, on ``device`` (a torch device
    name as :func:`graphopt.accelerator.resolve_device` returns it; default: the config's,
    resolved here). ``algorithm: reinforce`` is PPO's update with one epoch over one minibatch
    of the whole rollout (see :class:`~graphopt.train.config.TrainConfig`).

    Args:
        env: the (vectorised) training environment; or None and
        observation_space, action_space: the spaces of the model (a run's ``model.json``,
            :func:`policies.checkpoint.read_model_info`): a model that predicts, but learns only
            once given an environment (``set_env``).
    """
    from stable_baselines3 import PPO

    policy, policy_kwargs = _policy(config)
    n_epochs, batch_size = config.n_epochs, config.batch_size
    if config.algorithm == "reinforce":  # one gradient step on the whole rollout: REINFORCE
        n_envs = env.num_envs if env is not None else 1
        n_epochs, batch_size = 1, config.n_steps * n_envs
    kwargs: dict[str, Any] = dict(
        learning_rate=config.learning_rate,
        n_steps=config.n_steps,
        batch_size=batch_size,
        n_epochs=n_epochs,
        gamma=config.gamma,
        gae_lambda=config.gae_lambda,
        clip_range=config.clip_range,
        ent_coef=config.ent_coef,
        vf_coef=config.vf_coef,
        max_grad_norm=config.max_grad_norm,
        seed=config.seed,
        device=device or resolve_device(config.device),
        policy_kwargs=policy_kwargs,
        verbose=0,
    )
    if env is not None:
        return PPO(policy, env, **kwargs)
    if observation_space is None or action_space is None:
        raise ValueError("build_model needs an environment or both spaces")
    model = PPO(policy, None, _init_setup_model=False, **kwargs)  # type: ignore[arg-type]
    model.observation_space = observation_space
    model.action_space = action_space
    model.n_envs = 1
    model._setup_model()
    return model


def load_model(
    run: Path,
    path: Path,
    env: Any | None = None,
    weights: dict[str, Any] | None = None,
    device: str | None = None,
    spaces: Any | None = None,
    config: TrainConfig | None = None,
) -> Any:
    """The PPO model of run directory ``run`` with the weights of its model file ``path``: rebuilt
    from the run's ``config.yaml`` and ``model.json`` (or on ``env``, a vectorised environment
    that must have the spaces of ``model.json``), then filled with the weights (``weights``: those
    :func:`policies.checkpoint.read_weights` already read from ``path``). Nothing is unpickled:
    the weights are read with ``torch.load(weights_only=True)``. ``spaces``: an environment
    whose observation and action spaces replace ``model.json``'s (a device-agnostic policy,
    ``policy_kwargs: {device_agnostic: true}``, on a cluster of another device count: its
    weights fit any). ``config``: the run's configuration where the caller has loaded it
    already (it is read from ``config.yaml`` otherwise).

    Raises:
        ValueError: an SB3 ``.zip`` or any file that is not a plain weights file (refused before
            anything in it could run), a missing or malformed ``model.json``, or weights that do
            not fit the model; each message names the file.
    """
    if weights is None:
        weights = checkpoint.read_weights(path)  # refuse a bad file before building anything
    if config is None:
        config = load_config(run / rundir.CONFIG_FILE)
    observation_space, action_space = checkpoint.read_model_info(
        run, DEFAULTS, cluster=config.resolved_cluster
    )
    if spaces is not None:  # a device-agnostic policy on another cluster
        observation_space, action_space = spaces.observation_space, spaces.action_space
    device = resolve_device(device or config.device)
    if env is None:
        model = build_model(
            config, observation_space=observation_space, action_space=action_space, device=device
        )
    else:
        model = build_model(config, env, device=device)
        if not checkpoint.same_spaces(model, observation_space, action_space):
            raise ValueError(
                f"run {run}'s environments no longer match its model ({rundir.MODEL_INFO}: "
                f"observations {observation_space}, actions {action_space}; now: observations "
                f"{model.observation_space}, actions {model.action_space}): its graphs, cluster "
                "or settings changed since it was trained"
            )
    checkpoint.load_weights(model, weights, path)
    return model


def _learn(
    model: Any,
    run: Path,
    config: TrainConfig,
    val_env: Any | None,
    steps: int,
    show_progress: bool,
    reset: bool,
) -> None:
    from stable_baselines3.common.logger import configure

    model.set_logger(configure(str(run / "tb"), ["tensorboard"]))
    callback = RunCallback(
        run,
        val_env,
        config.eval_every,
        config.checkpoint_every,
        total_timesteps=config.total_timesteps,
        show_progress=show_progress,
    )
    # a resumed crash's error is not this session's
    rundir.write_state(run, status="running", drop=("error", "traceback"))
    target = steps + (0 if reset else int(model.num_timesteps))
    try:
        with rundir.graceful_stop() as stop:
            callback.stop = stop
            model.learn(total_timesteps=steps, callback=callback, reset_num_timesteps=reset)
        # a Ctrl-C after the last step leaves a finished run
        interrupted = stop.requested and int(model.num_timesteps) < target
    except (Exception, KeyboardInterrupt) as e:
        if not rundir.is_interrupt(e):
            callback._on_training_end()
            try:
                checkpoint.save_weights(model, run / rundir.LAST)
            finally:
                rundir.write_state(
                    run,
                    status="crashed",
                    timesteps=int(model.num_timesteps),
                    wall_seconds=round(callback.elapsed(), 2),
                    error=f"{type(e).__name__}: {e}",
                    traceback=traceback.format_exc(limit=8),
                )
            raise
        interrupted = True
    if interrupted:
        callback._on_training_end()
        checkpoint.save_weights(model, run / rundir.LAST)
        rundir.write_state(
            run,
            status="interrupted",
            timesteps=int(model.num_timesteps),
            wall_seconds=round(callback.elapsed(), 2),
        )
        raise TrainingInterrupted(run) from None
    if val_env is not None and callback.validated_at != model.num_timesteps:
        callback.validate()  # the final model's, unless the last step just validated it
    checkpoint.save_weights(model, run / rundir.FINAL)
    checkpoint.save_weights(model, run / rundir.LAST)
    rundir.write_state(
        run,
        status="finished",
        timesteps=int(model.num_timesteps),
        wall_seconds=round(callback.elapsed(), 2),
    )


def train(
    config: TrainConfig,
    runs_root: str | Path = "runs",
    show_progress: bool = True,
    on_start: Callable[[Path, TrainConfig], None] | None = None,
    *,
    workers: int = 1,
    ray_address: str | None = None,
    backend: str = "auto",
) -> Path:
    """Train a new run; returns its directory (``runs_root/<task>/<name>_<k>``). ``on_start`` is
    called with the directory and the configuration it trains with once the directory exists,
    before training begins. ``backend``, ``workers`` and ``ray_address`` say where the training
    environments run (:func:`graphopt.train.vec_env.make_vec_env`); they are not part of the run,
    which may resume on any backend.

    Raises:
        ValueError: a bad configuration, a run name that is not a plain directory name or a
            ``runs_root`` that cannot be created (both before any work), graphs that cannot be
            resolved; no run directory is created then.
    """
    if config.cost_model != "simulator":  # config.yaml keeps a path that works from any directory
        absolute = str(Path(config.cost_model).resolve())
        if absolute != config.cost_model:
            config = config.replace(cost_model=absolute)  # the cluster carried over
    config.validate()  # once: nothing more for a config that load_config returned
    rundir.check_run_name(config.name)
    rundir.check_output_path(runs_root, "runs directory", directory=True)
    device = resolve_device(config.device)  # no such device: refused before any work
    torch.set_num_threads(config.threads)
    # resolve everything before creating the run directory
    vec_env, val_env = make_vec_env(
        config, backend=backend, workers=workers, ray_address=ray_address
    )
    try:
        model = build_model(config, vec_env, device=device)
        run = rundir.new_run_dir(runs_root, config.task, config.name)  # once all of that worked
        _train_new(model, run, config, val_env, show_progress, on_start)
    finally:
        vec_env.close()  # ends the processes or actors of the subproc and ray backends
    return run


def _train_new(
    model: Any,
    run: Path,
    config: TrainConfig,
    val_env: Any | None,
    show_progress: bool,
    on_start: Callable[[Path, TrainConfig], None] | None,
) -> None:
    """:func:`train`'s run directory ``run``: written and trained under its lock. A Ctrl-C or
    SIGTERM before the first checkpoint that is not a stop during training (which :func:`_learn`
    records as interrupted, with a checkpoint) removes ``run`` again: nothing in it could be
    resumed (:func:`graphopt.rundir.removed_if_interrupted`)."""
    with rundir.removed_if_interrupted(run, unless=run / rundir.LAST), rundir.locked(run):
        config.save(run / rundir.CONFIG_FILE)
        checkpoint.write_model_info(run, model, config.task)
        rundir.write_state(
            run, status="starting", timesteps=0, total_timesteps=config.total_timesteps
        )
        if on_start is not None:
            on_start(run, config)
        _learn(model, run, config, val_env, config.total_timesteps, show_progress, reset=True)


def resume(
    run: str | Path,
    total_timesteps: int | None = None,
    show_progress: bool = True,
    on_start: Callable[[Path, TrainConfig], None] | None = None,
    device: str | None = None,
    *,
    workers: int = 1,
    ray_address: str | None = None,
    backend: str = "auto",
) -> Path:
    """Continue a run from ``checkpoints/last.pt`` up to its ``total_timesteps``, with the
    configuration it was started with (the model is rebuilt from it and given the checkpoint's
    weights, optimizer state and timestep count: :func:`load_model`). The rows of ``metrics.csv``
    recorded after that checkpoint (by a session that was interrupted or killed before its next
    one) are dropped, as their steps are trained again. The run is locked meanwhile
    (:func:`graphopt.rundir.locked`).

    Args:
        run: the run directory.
        total_timesteps: a new total for the run (more than it has done), recorded in its
            ``config.yaml`` and ``state.json``; this also extends a finished run. Default: the
            run's own total.
        show_progress: draw a progress bar.
        on_start: called with the run directory and the configuration it goes on with (its
            new total included) before training goes on.
        device: where to train from now on (default: the run's ``device`` setting); not
            recorded in the run.
        workers, ray_address, backend: where the training environments run from now on
            (:func:`graphopt.train.vec_env.make_vec_env`); not recorded in the run.

    Raises:
        ValueError: not a run directory, no checkpoint to resume from (a run of an older version
            that holds only SB3 ``.zip`` models is refused unopened), a checkpoint that is not a
            plain weights file, a corrupt ``state.json``, or a ``total_timesteps`` below what the
            run has done.
        graphopt.errors.RunLocked: another process trains the run (a ``ValueError``; nothing was
            read or written).
        RunAlreadyFinished: a finished run and no larger ``total_timesteps``.
    """
    path = rundir.check_run_dir(run, need_model=False)
    with rundir.locked(path):
        where = {"workers": workers, "ray_address": ray_address, "backend": backend}
        return _resume(path, total_timesteps, show_progress, on_start, device, where)


def _resume(
    path: Path,
    total_timesteps: int | None,
    show_progress: bool,
    on_start: Callable[[Path, TrainConfig], None] | None,
    device: str | None = None,
    where: dict[str, Any] | None = None,
) -> Path:
    """:func:`resume` of the run directory ``path``, whose lock this process holds; ``where``:
    the keyword arguments of :func:`graphopt.train.vec_env.make_vec_env`."""
    config = load_config(path / rundir.CONFIG_FILE)
    state = rundir.read_state(path)
    if not (path / rundir.LAST).exists():
        legacy = [name for name in rundir.LEGACY_MODELS if (path / name).exists()]
        if legacy:
            raise rundir.legacy_model_error(path, legacy)
        raise ValueError(f"run {path} has no checkpoint to resume from ({rundir.LAST})")
    weights = checkpoint.read_weights(path / rundir.LAST)  # fails before anything is written
    checkpoint.read_model_info(path, DEFAULTS, cluster=config.resolved_cluster)
    done = int(state.get("timesteps", 0))
    if total_timesteps is not None:
        if total_timesteps < done:
            raise InvalidArgument(
                "{total_timesteps} {got:,} is below the {done:,} timesteps run {path} has done; "
                "with {resume} it is the run's new total",
                got=total_timesteps,
                done=done,
                path=path,
            )
        if total_timesteps != config.total_timesteps:
            config = config.replace(total_timesteps=total_timesteps)
            config.save(path / rundir.CONFIG_FILE)
            rundir.write_state(path, total_timesteps=total_timesteps)
    if state.get("status") == "finished" and config.total_timesteps <= done:
        raise RunAlreadyFinished(path, done)
    device = resolve_device(device or config.device)  # no such device: refused before any work
    torch.set_num_threads(config.threads)
    vec_env, val_env = make_vec_env(config, **(where or {}))
    try:
        _resume_model(
            path, config, vec_env, val_env, weights, done, show_progress, on_start, device
        )
    finally:
        vec_env.close()  # ends the processes or actors of the subproc and ray backends
    return path


def _resume_model(
    path: Path,
    config: TrainConfig,
    vec_env: Any,
    val_env: Any | None,
    weights: dict[str, Any],
    done: int,
    show_progress: bool,
    on_start: Callable[[Path, TrainConfig], None] | None,
    device: str | None,
) -> None:
    """:func:`_resume`'s training on ``vec_env`` from the checkpoint's ``weights``."""
    model = load_model(path, path / rundir.LAST, vec_env, weights, device=device, config=config)
    resumed = int(model.num_timesteps)  # the checkpoint's, whatever state.json says
    rundir.truncate_metrics(path, resumed)  # those steps are trained again
    if resumed != done:  # killed between saving the checkpoint and recording it
        rundir.write_state(path, timesteps=resumed)
    remaining = config.total_timesteps - resumed
    if on_start is not None:
        on_start(path, config)
    if remaining > 0:
        _learn(model, path, config, val_env, remaining, show_progress, reset=False)
    else:
        checkpoint.save_weights(model, path / rundir.FINAL)
        rundir.write_state(path, status="finished", drop=("error", "traceback"))
