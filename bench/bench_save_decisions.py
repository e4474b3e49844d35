"""What ``--save-decisions`` costs a ``graphopt baselines --budget 256`` run (target: <= 5%).

In one process (numba compiled, graphs built and the decisions directory's code imported by a
warm-up run first), the same ``baselines`` command runs ``--repeats`` times without and with
``--save-decisions`` (a fresh directory each time), alternating. Printed:

- the median wall time of each and the median of the paired differences, over the run without
  (end to end: the cost plus the noise of two runs);
- the seconds spent in :class:`graphopt.decisions.files.DecisionDir` (preparing every file,
  writing them, the index) during the runs with saving, over the run without;
- the same split in two: preparing the texts only (the writes dropped), and what writing the files
  adds (their creation is system time, done by a thread of its own while the next text is
  prepared).

The machine's load moves these figures: on a shared two-core machine, creating a file took from
0.2 to 0.5 ms of system time.

Run: ``python bench/bench_save_decisions.py [--graphs suite:tiny,pipedream:resnet50]
[--task joint] [--budget 256] [--repeats 7]``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from graphopt.cli import main as graphopt
from graphopt.decisions.files import DecisionDir


class SaveClock:
    """Adds up the seconds spent in :class:`DecisionDir`'s methods; ``write=False`` drops the
    writes of the decision files (what is left is preparing their texts)."""

    def __init__(self, write: bool = True) -> None:
        self.seconds = 0.0
        self.files = 0
        self.write = write

    def __enter__(self) -> SaveClock:
        names = ("__init__", "save", "write_index") + (() if self.write else ("_write",))
        self.originals = {name: getattr(DecisionDir, name) for name in names}
        for name in names[:3]:
            setattr(DecisionDir, name, self._timed(self.originals[name], name == "save"))
        if not self.write:
            DecisionDir._write = lambda self, path, text: None  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: Any) -> None:
        for name, original in self.originals.items():
            setattr(DecisionDir, name, original)

    def _timed(self, original: Any, counts: bool) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - began
                self.files += counts

        return timed


def run(argv: list[str]) -> float:
    """Seconds for one ``graphopt`` command (its printed tables dropped)."""
    began = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        code = graphopt(argv)
    assert code == 0, argv
    return time.perf_counter() - began


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--graphs", default="suite:tiny,pipedream:resnet50")
    p.add_argument("--task", default="joint")
    p.add_argument("--budget", type=int, default=256)
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args()
    command = ["baselines", args.graphs, "--task", args.task, "--budget", str(args.budget)]
    plain, saving, spent, prepared = [], [], [], []
    files = 0
    with tempfile.TemporaryDirectory() as tmp:
        run([*command, "--save-decisions", str(Path(tmp) / "warm-up")])
        for k in range(args.repeats):
            plain.append(run(command))
            with SaveClock() as clock:
                saving.append(run([*command, "--save-decisions", str(Path(tmp) / f"run{k}")]))
            spent.append(clock.seconds)
            files = clock.files
            with SaveClock(write=False) as clock:
                run([*command, "--save-decisions", str(Path(tmp) / f"dry{k}")])
            prepared.append(clock.seconds)
    base = statistics.median(plain)
    paired = statistics.median(s - p for s, p in zip(saving, plain, strict=True))
    cost, prep = statistics.median(spent), statistics.median(prepared)
    print(f"baselines {args.graphs} --task {args.task} --budget {args.budget}")
    print(f"  {args.repeats} runs each, {files} decision files per run with saving")
    print(f"  without --save-decisions: {base:.3f} s (median)")
    print(f"  with --save-decisions:    {statistics.median(saving):.3f} s (median)")
    print(f"  end to end (median paired difference): {paired / base:+.1%}")
    print(f"  in DecisionDir: {cost * 1e3:.1f} ms = {cost / base:.1%} of the run (target <= 5%)")
    print(f"    preparing the texts: {prep * 1e3:.1f} ms = {prep / base:.1%}")
    print(f"    writing the files adds: {(cost - prep) * 1e3:.1f} ms = {(cost - prep) / base:.1%}")


if __name__ == "__main__":
    main()
