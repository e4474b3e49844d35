"""PPO training speed and memory: samples per second and peak RSS of a default-config run.

Usage: python bench/bench_train.py [--timesteps N] [--config FILE.yaml] [--threads T]

Runs ``graphopt train`` (:func:`graphopt.train.trainer.train`) with the default configuration
(the defaults of :class:`graphopt.train.config.TrainConfig`: placement on ``suite:default``, validation on
``suite:heldout-small``, ``v100-nvlink-4``, 4 environments, rollouts of 4 x 64 decisions) for
``--timesteps`` decisions into a temporary run directory, validating once at the end. Prints:

- rollout samples per second (decisions collected per second while PPO steps the environments:
  policy forward pass + simulator), the mean of ``metrics.csv``'s ``samples_per_second``;
- end-to-end samples per second: decisions over the wall time of the training rows (rollouts and
  PPO updates, without the final validation);
- the resident memory of the process (sampled every 0.5 s by a thread) at a quarter, half and
  three quarters of the run, at the end, and its peak (``ru_maxrss``), against the 24 GiB target.
  A flat figure means a longer run of the same configuration stays there (rollout buffers have a
  fixed size: ``n_envs * n_steps`` observations).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import resource
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from graphopt.train.config import load_config
from graphopt.train.trainer import train


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--timesteps", type=int, default=2048)
    parser.add_argument("--config", type=Path, default=None, help="default: TrainConfig's defaults")
    parser.add_argument("--threads", type=int, default=None, help="default: the config's")
    args = parser.parse_args()
    config = load_config(args.config)
    config = dataclasses.replace(
        config,
        total_timesteps=args.timesteps,
        eval_every=args.timesteps,
        checkpoint_every=args.timesteps,
        name="bench",
        threads=args.threads or config.threads,
    )
    samples: list[tuple[float, int]] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            samples.append((time.perf_counter(), _rss_bytes()))
            stop.wait(0.5)

    watcher = threading.Thread(target=watch, daemon=True)
    start = time.perf_counter()
    watcher.start()
    with tempfile.TemporaryDirectory() as tmp:
        run = train(config, runs_root=tmp, show_progress=False)
        stop.set()
        watcher.join()
        with open(run / "metrics.csv") as f:
            rows = [r for r in csv.DictReader(f) if r["kind"] == "train"]
    total = time.perf_counter() - start
    rollout = np.mean([float(r["samples_per_second"]) for r in rows])
    last = rows[-1]
    end_to_end = int(last["timesteps"]) / float(last["wall_seconds"])
    gib = 1024**3
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(
        f"PPO on {config.graphs} ({config.task}, {config.cluster}), {config.n_envs} envs x "
        f"{config.n_steps} steps, {config.threads} torch thread(s): {last['timesteps']} decisions"
    )
    print(f"  rollout samples/s          {rollout:8.1f}")
    print(f"  end-to-end samples/s       {end_to_end:8.1f}  (rollouts + PPO updates)")
    print(f"  wall time                  {total:8.1f} s (setup and final validation included)")
    quarters = [samples[min(len(samples) - 1, q * len(samples) // 4)][1] / gib for q in (1, 2, 3)]
    print(
        f"  RSS at 1/4, 1/2, 3/4 of the run {', '.join(f'{x:.2f}' for x in quarters)} GiB, "
        f"at the end {samples[-1][1] / gib:.2f} GiB, peak {peak / gib:.2f} GiB (target 24 GiB)"
    )


if __name__ == "__main__":
    main()
