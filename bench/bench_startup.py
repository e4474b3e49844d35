"""Start-up time of the ``graphopt`` command, with ``PYTHONDONTWRITEBYTECODE=1`` set.

Usage: python bench/bench_startup.py [--runs 5] [--graph txl-tiny] [--json FILE]

Each figure is the median over ``--runs`` fresh processes (after one untimed run that warms the
file cache) of the wall time and of the CPU time (user + system, of the process and its children):

- ``python -c pass``: the interpreter alone, the reference;
- ``graphopt --help``: building the command's parser; target 0.3 s;
- ``graphopt simulate GRAPH``: a small graph on ``v100-nvlink-4`` under the round-robin placement
  (loads the simulator); target 3 s.

Every process runs with ``PYTHONDONTWRITEBYTECODE=1``, as in many Docker images: no bytecode is
written, so start-up is fast only if the install compiled it (``make install`` does). The script
also lists the heavy packages (torch, numba, ...) that ``graphopt --help``, ``graphopt simulate
--help`` and ``graphopt simulate`` import; ``--help`` should import none of them.

On shared cores wall times vary with the load: the CPU times are the steadier figure.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = (
    "torch",
    "stable_baselines3",
    "numba",
    "torch_geometric",
    "gymnasium",
    "matplotlib",
    "scipy",
    "ortools",
    "lightgbm",
    "networkx",
    "pymetis",
)
"""Packages a command should import only when it needs them."""
TARGETS = {"graphopt --help": 0.3, "graphopt simulate": 3.0}
"""Wall-time targets, seconds (median of the runs)."""

IMPORTS_CHILD = """
import sys
from graphopt.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
heavy = {heavy!r}
print("\\n" + repr(sorted(m for m in sys.modules if m.split(".")[0] in heavy)))
"""


def environment() -> dict[str, str]:
    return {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "COLUMNS": "200"}


def graphopt_command() -> list[str]:
    """The installed ``graphopt`` script beside this Python, else ``python -m graphopt``."""
    script = Path(sys.executable).with_name("graphopt")
    return [str(script)] if script.exists() else [sys.executable, "-m", "graphopt"]


def run_once(cmd: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one run of ``cmd``; fails on a non-zero exit."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=environment())
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def measure(cmd: list[str], runs: int) -> dict[str, float]:
    """Median wall and CPU seconds over ``runs`` runs, after one untimed run."""
    run_once(cmd)
    walls, cpus = zip(*(run_once(cmd) for _ in range(runs)), strict=True)
    return {
        "wall": statistics.median(walls),
        "cpu": statistics.median(cpus),
        "wall_min": min(walls),
        "wall_max": max(walls),
    }


def heavy_imports(args: list[str]) -> list[str]:
    """The packages of :data:`HEAVY` (and their submodules) in ``sys.modules`` after
    ``graphopt ARGS`` has run in a fresh process."""
    code = IMPORTS_CHILD.format(heavy=HEAVY)
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=environment(),
    )
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    if not last.startswith("["):
        raise SystemExit(f"graphopt {' '.join(args)}: cannot read its imports:\n{proc.stderr}")
    modules: list[str] = ast.literal_eval(last)
    return sorted({m.split(".")[0] for m in modules})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs per command (median)")
    parser.add_argument("--graph", default="txl-tiny", help="graph for graphopt simulate")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args()

    graphopt = graphopt_command()
    simulate = ["simulate", args.graph, "--cluster", "v100-nvlink-4", "--placement", "round-robin"]
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "graphopt --help": [*graphopt, "--help"],
        "graphopt simulate --help": [*graphopt, "simulate", "--help"],
        "graphopt simulate": [*graphopt, *simulate],
    }
    print(f"PYTHONDONTWRITEBYTECODE=1, {args.runs} runs each (median), {os.cpu_count()} CPUs")
    print(f"graphopt: {' '.join(graphopt)}; simulate: {' '.join(simulate)}")
    results: dict[str, dict[str, float]] = {}
    for name, cmd in commands.items():
        results[name] = measure(cmd, args.runs)
    ref = results["python -c pass"]
    print(f"\n{'command':<26} {'wall (s)':>9} {'CPU (s)':>8} {'x ref':>7}   target")
    met = True
    for name, r in results.items():
        target = TARGETS.get(name)
        verdict = ""
        if target is not None:
            ok = r["wall"] <= target
            met &= ok
            verdict = f"<= {target:g} s: {'met' if ok else 'MISSED'}"
            if not ok and r["cpu"] <= target:
                verdict += " (CPU time meets it; the machine is loaded)"
        ratio = r["wall"] / ref["wall"] if ref["wall"] > 0 else float("nan")
        print(f"{name:<26} {r['wall']:>9.3f} {r['cpu']:>8.3f} {ratio:>7.1f}   {verdict}")
        r["ratio_to_reference"] = ratio

    print("\nheavy packages imported:")
    imports = {}
    for label, argv in (
        ("graphopt --help", ["--help"]),
        ("graphopt simulate --help", ["simulate", "--help"]),
        ("graphopt simulate", simulate),
    ):
        imports[label] = heavy_imports(argv)
        print(f"  {label:<26} {', '.join(imports[label]) or 'none'}")
    if imports["graphopt --help"]:
        met = False
        print("graphopt --help should import none of them")

    print(f"\ntargets {'met' if met else 'NOT met'}")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"times": results, "heavy_imports": imports, "targets_met": met}, indent=2)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
