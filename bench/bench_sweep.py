"""A sweep on Ray Tune against the same trials run one after another (issue "scale out on Ray",
sweep target: 3 seeds x 2 settings of the demo config, the same per-trial figures as 6 serial
runs).

Runs ``graphopt sweep CONFIG --set learning_rate=1e-4,3e-4 --seeds 3`` twice from the same
configuration (default ``graphopt/configs/demo.yaml`` with ``total_timesteps`` set by
``--timesteps``, 2048 by default: the full 16,384 take about an hour serially on 2 cores): in
this process, then as Ray Tune trials on ``--workers`` local workers. Prints each trial's
validation speed-up in both, whether each trial's ``metrics.csv`` is the same in both (every
column but the two timing ones, ``wall_seconds`` and ``samples_per_second``), and both wall
times. Needs ``pip install 'graphopt[ray]'``.

Run: ``python bench/bench_sweep.py [--config FILE] [--timesteps 2048] [--workers 2]
[--out DIR]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from graphopt.configs import CONFIG_DIR
from graphopt.train.config import load_config
from graphopt.train.sweep import sweep

TIMING = ("wall_seconds", "samples_per_second")


def figures(run: str) -> list[list[str]]:
    """A run's ``metrics.csv`` rows without the timing columns."""
    lines = (Path(run) / "metrics.csv").read_text().splitlines()
    header = lines[0].split(",")
    keep = [i for i, name in enumerate(header) if name not in TIMING]
    return [[row.split(",")[i] for i in keep] for row in lines]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default=str(CONFIG_DIR / "demo.yaml"))
    p.add_argument("--timesteps", type=int, default=2048)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", default="")
    args = p.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="bench-sweep-"))
    config = load_config(args.config, total_timesteps=args.timesteps)
    sets = {"learning_rate": [1e-4, 3e-4]}
    began = time.perf_counter()
    _, serial, _ = sweep(config, sets, seeds=3, runs_root=out / "serial")
    serial_s = time.perf_counter() - began
    began = time.perf_counter()
    _, tuned, _ = sweep(config, sets, seeds=3, runs_root=out / "tune", workers=args.workers)
    tune_s = time.perf_counter() - began
    print(f"{args.config}, {args.timesteps} timesteps per trial, runs in {out}")
    print(f"{'trial':<12} {'setting':<24} {'serial':>8} {'tune':>8}  metrics.csv equal")
    equal = 0
    for a, b in zip(serial, tuned, strict=True):
        same = a["status"] == b["status"] == "finished" and figures(a["run"]) == figures(b["run"])
        equal += same
        setting = ",".join(f"{k}={v}" for k, v in a["setting"].items() if k in sets)
        print(
            f"{a['name'][-3:]:<12} {setting:<24} {a['val_speedup']:>8.4f} "
            f"{b['val_speedup']:>8.4f}  {same}"
        )
    print(f"{equal}/{len(serial)} trials with the same figures")
    print(f"wall time: serial {serial_s:.0f} s, Ray Tune on {args.workers} workers {tune_s:.0f} s")


if __name__ == "__main__":
    main()
