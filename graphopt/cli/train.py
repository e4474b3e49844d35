"""``graphopt train``: launch (or resume) a PPO run of the GO policy."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from graphopt.cli import options

NAME = "train"
BACKENDS = ("auto", "dummy", "subproc", "ray")
"""The choices of --vec-env (graphopt.train.vec_env.BACKENDS, which the CLI does not import)."""
HELP = "train a policy with PPO (writes runs/<task>/<name>_<k>/)"
RUN_FLAGS = {
    "task": "--task",
    "graphs": "--graphs",
    "val_graphs": "--val-graphs",
    "cluster": "--cluster",
    "config": "--config",
    "seed": "--seed",
    "name": "--name",
    "policy": "--policy",
    "cost_model": "--cost-model",
    "max_ops": "--max-ops",
    "runs_dir": "--runs-dir",
}
"""Flags that define a run (argument name -> flag); --resume keeps the run's own and refuses them."""


def register(sub: Any) -> None:
    from graphopt.tasks import TASKS
    from graphopt.train.policy_registry import POLICIES  # light: no torch, no policies

    p = sub.add_parser(
        NAME,
        help=HELP,
        description="Train a GO policy with PPO. Defaults are TrainConfig's (graphopt/train/config.py); "
        "--config FILE.yaml overrides them and flags override both. Ctrl-C leaves a resumable run: "
        "--resume RUN continues it with its own configuration, and --resume RUN --total-timesteps N "
        "extends a run (a finished one too) to N timesteps in all.",
    )
    p.add_argument(
        "--task", choices=tuple(TASKS), help="what the policy decides (default: the config's)"
    )
    p.add_argument(
        "--graphs",
        help="training graphs (name, suite:NAME, file, pipedream:/torch: source; comma list)",
    )
    p.add_argument("--val-graphs", help="validation graphs (best model by these)")
    options.add_cluster(p, help="cluster preset or file (default: the config's)", keep_name=True)
    p.add_argument(
        "--total-timesteps",
        type=int,
        help="decisions to train for (default: the config's); with --resume, the run's new total",
    )
    p.add_argument(
        "--config", metavar="FILE.yaml", help="configuration file (all hyper-parameters)"
    )
    options.add_seed(
        p, default=None, help="seeds environments, PPO and torch (default: the config's)"
    )
    p.add_argument("--name", help="run name (directory runs/<task>/<name>_<k>)")
    p.add_argument("--policy", choices=POLICIES, help="policy network (default: the config's)")
    p.add_argument(
        "--max-ops",
        type=int,
        help="largest graph (ops) the policy takes, config key max_ops; evaluation on larger graphs "
        "needs a larger value (default: the largest training or validation graph)",
    )
    p.add_argument(
        "--cost-model",
        metavar="RUN",
        help="training reward from a learned cost model (runs/costmodel/<name>_<k> or model.pt) "
        "instead of the simulator; validation stays on the simulator. Train it with "
        "'graphopt costmodel train --loss mse': ranking losses order runtimes but exaggerate "
        "their ratios, which the speedup reward uses",
    )
    options.add_runs_dir(p, default=None, help="where runs are written (default runs/)")
    p.add_argument(
        "--resume",
        metavar="RUN",
        help="continue a run directory (interrupted, crashed, or finished with --total-timesteps)",
    )
    options.add_device(
        p,
        help="where the policy trains: auto (a CUDA GPU if there is one), cpu, cuda or cuda:N "
        "(default: the config's, auto); with --resume, from now on",
    )
    options.add_workers(
        p,
        help="Ray workers that host the training environments and their simulators (above 1: "
        "rollouts on Ray, started on this machine unless --ray-address; needs "
        "pip install 'graphopt[ray]'); at most n_envs",
        address_help="run the workers on the Ray cluster at ADDR (HOST:PORT printed by 'ray "
        "start --head', ray://HOST:10001 or auto); the learner stays here",
    )
    p.add_argument(
        "--vec-env",
        choices=BACKENDS,
        default="auto",
        help="how the training environments run: dummy (this process), subproc (a process each), "
        "ray (Ray workers); auto: ray with --workers above 1 or --ray-address, else subproc with "
        "several environments on more than 2 cores, else dummy",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar (e.g. in CI logs)")
    options.name_flags(
        p, total_timesteps="--total-timesteps", resume="--resume", backend="--vec-env"
    )
    p.set_defaults(func=cmd_train)


def summary(run: Path) -> str:
    """One line from the run's ``state.json``: timesteps, wall time, validation speed-ups."""
    from graphopt import rundir

    state = rundir.read_state(run)
    line = f"{state.get('status', 'unknown')}: {int(state.get('timesteps', 0)):,} timesteps"
    if state.get("wall_seconds") is not None:
        line += f" in {float(state['wall_seconds']):,.1f} s"
    best, last = state.get("best_val_speedup"), state.get("last_val_speedup")
    if last is None or best is None or not math.isfinite(best):
        return line + "; no validation yet"
    return f"{line}; validation speed-up (geomean): best {best:.3f}x, last {last:.3f}x"


def check_args(args: argparse.Namespace) -> None:
    """Refuse what would fail only after the (slow) set-up: flags that --resume does not take,
    a run that is not one or that another process trains, a --name that cannot make a run
    directory (the shared options, --runs-dir among them, are checked before:
    :func:`graphopt.cli.options.check`). Imports neither torch nor the trainer.

    Raises:
        ValueError: one line naming the culprit.
    """
    from graphopt import rundir

    if args.resume:
        given = [flag for key, flag in RUN_FLAGS.items() if getattr(args, key) is not None]
        if given:
            raise ValueError(
                f"--resume continues {args.resume} with its own configuration; "
                f"{', '.join(given)} would change the run: start a new run instead "
                "(only --total-timesteps and --no-progress go with --resume)"
            )
        run = rundir.check_run_dir(args.resume, need_model=False)
        rundir.read_state(run)  # a corrupt state.json, named
        with rundir.locked(run):  # a run another process trains (resume takes it for good)
            pass
        return
    if args.name is not None:
        rundir.check_run_name(args.name)


def cmd_train(args: argparse.Namespace) -> int:
    check_args(args)  # before torch is imported

    from graphopt import rundir
    from graphopt.errors import RunAlreadyFinished, TrainingInterrupted, WorkerDied
    from graphopt.train.config import TrainConfig, load_config

    config = None
    if not args.resume:  # a bad config or flag value is refused before torch is imported
        config = load_config(
            args.config,
            task=args.task,
            graphs=args.graphs,
            val_graphs=args.val_graphs,
            cluster=args.cluster,
            resolved_cluster=getattr(args, "resolved_cluster", None),  # by the --cluster check
            total_timesteps=args.total_timesteps,
            seed=args.seed,
            name=args.name,
            policy=args.policy,
            cost_model=args.cost_model,
            max_ops=args.max_ops,
            device=args.device,
        )
    from graphopt.train.trainer import resume, train

    where: dict[str, Any] = {
        "workers": args.workers,
        "ray_address": args.ray_address,
        "backend": args.vec_env,
    }
    started: list[Path] = []  # the run directory, once it exists
    try:
        if args.resume:

            def resuming(run: Path, resumed: TrainConfig) -> None:
                started.append(run)
                done = int(rundir.read_state(run).get("timesteps", 0))
                total = resumed.total_timesteps  # the run's, or --total-timesteps
                print(f"resuming {run} at {done:,} of {total:,} timesteps", flush=True)

            run = resume(
                args.resume,
                total_timesteps=args.total_timesteps,
                show_progress=not args.no_progress,
                on_start=resuming,
                device=args.device,
                **where,
            )
        else:
            assert config is not None

            def starting(run: Path, training: TrainConfig) -> None:
                started.append(run)
                print(f"run: {run} (training {training.total_timesteps:,} timesteps)", flush=True)

            run = train(
                config,
                runs_root=args.runs_dir or "runs",
                show_progress=not args.no_progress,
                on_start=starting,
                **where,
            )
    except RunAlreadyFinished as e:
        print(f"graphopt: {e}")
        print(summary(e.run))
        return 0
    except TrainingInterrupted as e:
        print(f"graphopt: {e}")
        print(summary(e.run))
        return 130
    except WorkerDied as e:
        if not started:
            raise ValueError(f"{e}; run the command again") from None
        print(
            f"graphopt: error: {e}; run {started[0]} is checkpointed: resume with: graphopt train "
            f"--resume {started[0]} (add --workers/--ray-address as before)",
            file=sys.stderr,
        )
        return 1
    print(summary(run))
    print(f"run: {run}")
    return 0
