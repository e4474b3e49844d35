"""``graphopt sweep``: train runs over settings and seeds, with a summary table and plot."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from graphopt.cli import options

NAME = "sweep"
HELP = "train runs over settings x seeds (Ray Tune with --workers); summary table and plot"
MAX_SEEDS = 1_000
""":data:`graphopt.train.sweep.MAX_SEEDS`, which this module does not import at start-up
(tests/graphopt/cli/test_sweep_cli.py checks that they agree)."""


def register(sub: Any) -> None:
    p = sub.add_parser(
        NAME,
        help=HELP,
        description="Train one run per setting and seed: the values of every --set crossed, each "
        "with --seeds seeds (the config's seed, +1, ...). Each trial is a normal run directory "
        "under runs/<task>/; the sweep's summary.csv, summary.png and sweep.json go to "
        "runs/sweep/<name>_<k>/. A failed trial is recorded and the others go on; --resume "
        "continues the trials that did not finish. Ctrl-C or SIGTERM stops the training trial "
        "after its current step (checkpointed), starts no further trial and exits with 130.",
    )
    p.add_argument("config", nargs="?", metavar="CONFIG", help="configuration file (YAML)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="a config key and its values (repeatable; e.g. learning_rate=1e-4,3e-4)",
    )
    p.add_argument(
        "--seeds",
        type=options.integer(1, MAX_SEEDS),
        default=3,
        help=f"seeds per setting, 1..{MAX_SEEDS} (default 3)",
    )
    p.add_argument("--name", help="sweep name (default: the config's name)")
    options.add_runs_dir(p, help="where runs and the sweep are written")
    options.add_workers(
        p,
        help="trials at once, as Ray Tune trials (above 1 needs pip install 'graphopt[ray]')",
        address_help="run the trials on this Ray cluster",
    )
    p.add_argument("--resume", metavar="SWEEP", help="continue a sweep directory")
    options.name_flags(p, sets="--set", seeds="--seeds")
    p.set_defaults(func=cmd_sweep)


def format_rows(rows: list[dict[str, Any]]) -> list[str]:
    """The summary table as text lines."""

    def num(x: float) -> str:
        return "-" if math.isnan(x) else f"{x:.3f}"

    width = max([len("setting"), *(len(r["setting"]) for r in rows)])
    lines = [f"{'setting':<{width}}  finished  mean    std     min     max"]
    for r in rows:
        lines.append(
            f"{r['setting']:<{width}}  {r['finished']:>8}  {num(r['mean']):<7} {num(r['std']):<7} "
            f"{num(r['min']):<7} {num(r['max'])}"
        )
    return lines


def _sweep(args: argparse.Namespace, starting: Any) -> tuple[Path, list[Any], list[Any]]:
    """:func:`graphopt.train.sweep.sweep` of the command line: a new sweep, or ``--resume``."""
    from graphopt.train.sweep import parse_sets, sweep

    if args.resume:
        if args.config or args.set or args.name:
            raise ValueError("--resume continues a sweep as planned; drop CONFIG, --set and --name")
        return sweep(
            resume=args.resume, workers=args.workers, address=args.ray_address, on_start=starting
        )
    from graphopt.train.config import load_config

    sets = parse_sets(args.set)  # a bad key: one line, before any work
    config = load_config(args.config, name=args.name)
    return sweep(
        config,
        sets,
        args.seeds,
        runs_root=args.runs_dir,
        workers=args.workers,
        address=args.ray_address,
        on_start=starting,
    )


def cmd_sweep(args: argparse.Namespace) -> int:
    from graphopt.train.sweep import SweepInterrupted

    def starting(path: Path, n: int) -> None:
        print(f"sweep: {path} ({n} trials)", flush=True)

    try:
        sweep_dir, trials, rows = _sweep(args, starting)
    except SweepInterrupted as e:
        print("\n".join(format_rows(e.rows)))
        print(f"graphopt: {e}")
        return 130
    print("\n".join(format_rows(rows)))
    print(f"summary: {sweep_dir / 'summary.csv'}, {sweep_dir / 'summary.png'}")
    failed = [t for t in trials if t.get("status") != "finished"]
    if failed:
        first = failed[0]
        import sys

        print(
            f"graphopt: error: {len(failed)} of {len(trials)} trials did not finish (first: "
            f"{first['name']}: {first.get('error') or first.get('status')}); finished trials are "
            f"kept: continue with: graphopt sweep --resume {sweep_dir}",
            file=sys.stderr,
        )
        return 1
    return 0
