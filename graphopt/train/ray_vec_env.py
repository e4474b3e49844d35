"""A stable-baselines3 ``VecEnv`` whose environments run in Ray actors.

The ``n`` environments of an :class:`~graphopt.train.env_spec.EnvSpec` are split into ``workers``
contiguous shares (``numpy.array_split`` of ``0..n-1``); each share lives in one Ray actor
(:class:`EnvHost`) as an SB3 ``DummyVecEnv`` over environments built there, from the spec's
plain data, with one simulator. A step sends every actor its slice of the actions at once and
concatenates their answers in environment order, so the PPO learner sees exactly what a
``DummyVecEnv`` of the same environments would give: the same observations, rewards, ``dones``
and ``infos`` (``terminal_observation`` included, SB3's auto-reset happens in the actor).

Actors need one CPU each. Without an address Ray is started on this machine with
``max(workers, cores)`` CPUs and shut down by :meth:`RayVecEnv.close`.

An actor that dies (its process killed, its node lost) ends the step with
:class:`graphopt.errors.WorkerDied`; the trainer then checkpoints the run as crashed, and
``graphopt train --resume RUN`` continues it with new actors (the episodes in flight are
collected again).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import (
    VecEnv,
    VecEnvIndices,
    VecEnvObs,
    VecEnvStepReturn,
)

from graphopt.distributed import check_capacity, connect, died, import_ray
from graphopt.train.env_spec import EnvSpec, build_envs, existing


class EnvHost:
    """Environments ``indices`` of ``spec`` in one process (the body of a Ray actor): a
    ``DummyVecEnv`` of them, driven by :class:`RayVecEnv`."""

    def __init__(self, spec: EnvSpec, indices: list[int]) -> None:
        import torch
        from stable_baselines3.common.vec_env import DummyVecEnv

        torch.set_num_threads(1)  # the environments are single-threaded; keep torch off the cores
        envs = build_envs(spec, indices)
        self.vec = DummyVecEnv([existing(e) for e in envs])

    def spaces(self) -> tuple[Any, Any]:
        return self.vec.observation_space, self.vec.action_space

    def pid(self) -> int:
        return os.getpid()

    def reset(self, seeds: list[int | None], options: list[dict[str, Any]]) -> tuple[Any, list]:
        # DummyVecEnv.reset reads the seeds and options its VecEnv.seed/set_options stored
        self.vec._seeds = list(seeds)
        self.vec._options = list(options)
        return self.vec.reset(), list(self.vec.reset_infos)

    def step(self, actions: np.ndarray) -> VecEnvStepReturn:
        return self.vec.step(actions)

    def get_attr(self, name: str, indices: list[int]) -> list[Any]:
        return self.vec.get_attr(name, indices)

    def set_attr(self, name: str, value: Any, indices: list[int]) -> None:
        self.vec.set_attr(name, value, indices)

    def env_method(self, name: str, args: tuple, kwargs: dict, indices: list[int]) -> list[Any]:
        return self.vec.env_method(name, *args, indices=indices, **kwargs)

    def env_is_wrapped(self, wrapper: type, indices: list[int]) -> list[bool]:
        return self.vec.env_is_wrapped(wrapper, indices)

    def close(self) -> None:
        self.vec.close()


def _concat(parts: Sequence[Any]) -> Any:
    """Per-actor observations (arrays, or dicts of arrays) joined along the environment axis."""
    if isinstance(parts[0], dict):
        return {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
    return np.concatenate(parts)


class RayVecEnv(VecEnv):
    """The environments of ``spec`` in ``workers`` Ray actors (see the module docstring).

    Args:
        spec: the environments (plain data, rebuilt in the actors).
        workers: actors, 1 to ``spec.n_envs``.
        address: the Ray cluster (``HOST:PORT``, ``ray://...``, ``auto``); None: Ray on this
            machine (or the Ray this process already joined).

    Raises:
        ValueError: workers out of range, an address where no cluster answers, a cluster with
            fewer CPUs than workers.
        graphopt.errors.DependencyNotInstalled: Ray is not installed.
    """

    def __init__(self, spec: EnvSpec, workers: int = 1, address: str | None = None) -> None:
        if not 1 <= workers <= spec.n_envs:
            raise ValueError(f"workers must be in [1, {spec.n_envs}] (n_envs), got {workers}")
        ray = import_ray()
        self._ray = ray
        self._started = connect(address, num_cpus=max(workers, os.cpu_count() or 1))
        try:
            check_capacity(workers, address)
            shares = [list(map(int, s)) for s in np.array_split(np.arange(spec.n_envs), workers)]
            actor = ray.remote(num_cpus=1, max_restarts=0)(EnvHost)
            self.shares = shares
            self.actors = [actor.remote(spec, share) for share in shares]
            observation_space, action_space = self._get([self.actors[0].spaces.remote()])[0]
        except BaseException:
            self._shutdown()
            raise
        self._actions: np.ndarray | None = None
        super().__init__(spec.n_envs, observation_space, action_space)

    # ------------------------------------------------------------------ plumbing
    def _get(self, refs: list[Any]) -> list[Any]:
        """``ray.get`` of one call per actor, in actor order; a dead actor is :class:`WorkerDied`
        and an environment's own error is raised as itself."""
        ray = self._ray
        try:
            return list(ray.get(refs))
        except ray.exceptions.RayTaskError as e:
            cause = getattr(e, "cause", None)
            raise (cause if isinstance(cause, Exception) else e) from None
        except ray.exceptions.RayActorError as e:
            which = next(
                (k for k, r in enumerate(refs) if _failed(ray, r)), None
            )  # the first that failed
            what = "environment worker" + ("" if which is None else f" {which}")
            raise died(e, what) from None

    def _by_actor(self, indices: VecEnvIndices) -> list[tuple[int, list[int]]]:
        """``(actor, its local indices)`` for the environments ``indices``, in actor order."""
        wanted = set(self._get_indices(indices))
        out = []
        for k, share in enumerate(self.shares):
            local = [j for j, i in enumerate(share) if i in wanted]
            if local:
                out.append((k, local))
        return out

    # ------------------------------------------------------------------ VecEnv
    def reset(self) -> VecEnvObs:
        refs = [
            actor.reset.remote([self._seeds[i] for i in share], [self._options[i] for i in share])
            for actor, share in zip(self.actors, self.shares, strict=True)
        ]
        answers = self._get(refs)
        self.reset_infos = [info for _, infos in answers for info in infos]
        self._reset_seeds()
        self._reset_options()
        return _concat([obs for obs, _ in answers])

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions)

    def step_wait(self) -> VecEnvStepReturn:
        assert self._actions is not None, "step_wait before step_async"
        actions, self._actions = self._actions, None
        refs = [
            actor.step.remote(actions[share[0] : share[-1] + 1])
            for actor, share in zip(self.actors, self.shares, strict=True)
        ]
        answers = self._get(refs)
        obs = _concat([a[0] for a in answers])
        rewards = np.concatenate([a[1] for a in answers])
        dones = np.concatenate([a[2] for a in answers])
        infos = [info for a in answers for info in a[3]]
        return obs, rewards, dones, infos

    def close(self) -> None:
        ray = self._ray
        for actor in getattr(self, "actors", []):
            with contextlib.suppress(Exception):  # an actor that is already gone
                ray.kill(actor)
        self.actors = []
        self._shutdown()

    def _shutdown(self) -> None:
        if self._started and self._ray.is_initialized():
            self._ray.shutdown()
        self._started = False

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        parts = self._get(
            [
                self.actors[k].get_attr.remote(attr_name, local)
                for k, local in self._by_actor(indices)
            ]
        )
        return [value for part in parts for value in part]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        self._get(
            [
                self.actors[k].set_attr.remote(attr_name, value, local)
                for k, local in self._by_actor(indices)
            ]
        )

    def env_method(
        self,
        method_name: str,
        *method_args: Any,
        indices: VecEnvIndices = None,
        **method_kwargs: Any,
    ) -> list[Any]:
        parts = self._get(
            [
                self.actors[k].env_method.remote(method_name, method_args, method_kwargs, local)
                for k, local in self._by_actor(indices)
            ]
        )
        return [value for part in parts for value in part]

    def env_is_wrapped(self, wrapper_class: type, indices: VecEnvIndices = None) -> list[bool]:
        parts = self._get(
            [
                self.actors[k].env_is_wrapped.remote(wrapper_class, local)
                for k, local in self._by_actor(indices)
            ]
        )
        return [value for part in parts for value in part]

    def get_images(self) -> Sequence[np.ndarray | None]:
        return [None] * self.num_envs

    def worker_pids(self) -> list[int]:
        """The process id of every actor (for tests that kill one)."""
        return [int(pid) for pid in self._get([a.pid.remote() for a in self.actors])]


def _failed(ray: Any, ref: Any) -> bool:
    """Whether the call ``ref`` (already finished) raised."""
    try:
        ray.get(ref, timeout=0)
    except Exception:
        return True
    return False
