"""``graphopt optimize``: the best decision for one graph in the time (or simulator calls) given,
saved as a decision file (:mod:`graphopt.optimizer` does the work)."""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from graphopt.graph import CompGraph
    from graphopt.hardware import Cluster
    from graphopt.optimizer import Optimized, Progress
    from graphopt.typing import Decision, DecisionRecord, Measurement

from graphopt.cli import options

NAME = "optimize"
HELP = "the best decision for one graph within the seconds or simulator calls you give"
TASKS = ("placement", "scheduling", "fusion", "joint")
"""The tasks ``--task`` takes (graphopt.tasks.ONE_SHOT_TASKS; tests/graphopt/cli/
test_optimize_cli.py checks that they agree)."""


def register(sub: Any) -> None:
    p = sub.add_parser(
        NAME,
        help=HELP,
        description="Start from the best heuristic (every heuristic of the task is run and "
        "measured) and search until the budget is spent: for placement, two rounds of the "
        "search through the placement decoder (windows of ops released from the best so far and "
        "re-placed by a list scheduler), each followed by annealing of the placement; for "
        "joint, two rounds of the joint decoder search (those windows, moving fused kernels "
        "whole, with priority shifts and fusion vetoes and additions) each followed by annealing "
        "of all three; for scheduling and fusion, simulated annealing of the task's array. "
        "Writes the best decision found to -o as a "
        "decision file (docs/decisions.md: replay it with graphopt simulate GRAPH --decision "
        "FILE) and prints the step time, the speed-up over every heuristic, the peak memory of "
        "each device and what moved. Ctrl-C (or SIGTERM) writes the best decision found so far "
        "(with its Gantt chart when --gantt is given) and exits with 130.",
    )
    p.add_argument(
        "graph",
        metavar="GRAPH",
        help="one graph: a built-in name, a graph file, pipedream:NAME or torch:NAME",
    )
    options.name_flags(p, _keep_cluster_spec)  # before --cluster's check replaces it
    options.add_cluster(p, required=True, help="preset name or cluster file")
    p.add_argument(
        "--seconds",
        type=float,
        help="wall time to spend, heuristics included (give this or --calls)",
    )
    p.add_argument(
        "--calls",
        type=int,
        help="simulator calls of the search, its start included (give this or --seconds)",
    )
    p.add_argument(
        "--task",
        default="placement",
        choices=TASKS,
        help="what to decide; placement and joint search through the decoders (joint: "
        "placement, priorities and fusion together), scheduling and fusion anneal",
    )
    p.add_argument(
        "--run",
        metavar="RUN",
        help="a trained run (graphopt train) for the same task and device count: its greedy "
        "decision is the start when it is faster than the best heuristic",
    )
    p.add_argument(
        "--start",
        metavar="DECISION.json",
        help="a saved decision to start from when it is faster than the best heuristic, applied "
        "by op name: e.g. the decision of the same model at another batch size (every op of "
        "GRAPH named, devices within the cluster's; not with --run)",
    )
    p.add_argument(
        "--prescreen",
        type=int,
        default=1,
        metavar="M",
        help="placement: each simulator call of the decoder search prices the best of M window "
        "moves ranked by the analytic schedule estimate (1..64; default 1: none). For --calls "
        "budgets, when simulator calls are the scarce resource: about M times the wall time per "
        "call",
    )
    p.add_argument(
        "--moves",
        metavar="MODEL.pt",
        help="placement: a learned model of single-op moves (a file of graphopt moves train, or "
        "'builtin': the one shipped, trained on 450 generated graphs); the search spends the "
        "second half of the budget on the moves it ranks first",
    )
    options.add_seed(p, help="seeds the search")
    p.add_argument(
        "-o",
        "--output",
        metavar="DECISION.json",
        required=True,
        help="the decision file to write (whole or not at all; missing folders are created)",
    )
    p.add_argument(
        "--gantt",
        metavar="OUT.png",
        help="also write the best decision's Gantt chart (.png, .svg, ...: the suffix says the "
        "type); it and -o appear together or neither",
    )
    options.name_flags(
        p,
        check_optimize,
        graph="GRAPH",
        seconds="--seconds",
        calls="--calls",
        output="-o",
        run="--run",
        start="--start",
        gantt="--gantt",
        prescreen="--prescreen",
        moves="--moves",
    )
    p.set_defaults(func=cmd_optimize)


def _keep_cluster_spec(args: argparse.Namespace) -> None:
    """Keep ``--cluster`` as given (a preset or a file), for the replay line of the summary."""
    args.cluster_spec = args.cluster


def check_optimize(args: argparse.Namespace) -> None:
    """The budget, the output paths and the run, before any work (nothing is written)."""
    from graphopt.optimizer import check_budget, check_prescreen
    from graphopt.rundir import check_output_path, check_run_dir

    check_budget(args.seconds, args.calls)
    check_prescreen(args.prescreen, args.task)
    check_output_path(args.output, "-o")
    if Path(args.output).suffix.lower() != ".json":
        raise ValueError(f"-o {args.output!r}: a decision file is JSON; name it e.g. best.json")
    if args.gantt:
        from graphopt.cli.baselines import PLOT_SUFFIXES

        check_output_path(args.gantt, "--gantt")
        if Path(args.gantt).resolve() == Path(args.output).resolve():
            raise ValueError(f"--gantt {args.gantt!r} would overwrite the decision file (-o)")
        if Path(args.gantt).suffix.lower() not in (*PLOT_SUFFIXES, ""):
            raise ValueError(
                f"--gantt {args.gantt!r}: the suffix says the image type; use one of "
                f"{', '.join(PLOT_SUFFIXES)}"
            )
    if args.run:
        if args.start:
            raise ValueError("give --run or --start, not both: the search has one start")
        try:
            check_run_dir(args.run)
        except ValueError as e:
            raise ValueError(f"--run {args.run}: {e}") from e
    if args.moves:
        if args.task != "placement":
            raise ValueError(
                f"--moves ranks placement moves; --task {args.task} has none (use --task placement)"
            )
        from graphopt.nn.move_search import load_move_phase

        args.move_phase = load_move_phase(args.moves, args.seed)  # before any work
    if args.start:
        from graphopt.decisions.format import read_record

        try:  # the file's structure, before any work; kept for cmd_optimize
            args.start_record = read_record(args.start)
        except ValueError as e:
            raise ValueError(f"--start: {e}") from e


def start_decision(
    path: str, record: DecisionRecord, graph: CompGraph, cluster: Cluster
) -> tuple[Decision, str]:
    """The start ``--start`` names and what the result calls it. A file that names exactly the
    graph's ops (the model at another batch size) gives its whole decision; one of another
    version of the model (more or fewer layers) gives the placement of the ops it names, the
    others taking the best heuristic's device (at least half must be named).

    Raises:
        ValueError: one line starting with ``--start:`` (:mod:`graphopt.decisions.format`).
    """
    from graphopt.decisions.format import decision_by_names, placement_by_names
    from graphopt.typing import Decision

    name = Path(path).name
    try:
        if record.placement is None or set(record.placement) == set(graph.op_names):
            return decision_by_names(path, record, graph, cluster), name
        placement, named = placement_by_names(path, record.placement, graph, cluster.num_devices)
    except ValueError as e:
        raise ValueError(f"--start: {e}") from e
    return Decision(placement=placement), f"{name} ({named:,} of {graph.num_ops:,} ops by name)"


def cmd_optimize(args: argparse.Namespace) -> int:
    from graphopt.cli.simulate import check_constraints
    from graphopt.optimizer import optimize_graph, resolve
    from graphopt.rundir import is_interrupt

    graph, cluster = resolve(args.graph, args.cluster)
    check_constraints([(graph, cluster)], args.graph)
    if args.moves:
        from graphopt.nn.move_search import check_moves

        check_moves(graph, cluster)
    start, start_name = None, "start"
    if args.run:
        start = run_decision(args.run, graph, cluster, args.task, args.seed)
        start_name = f"run {Path(args.run).name}"
    if args.start:
        start, start_name = start_decision(args.start, args.start_record, graph, cluster)
    bar = ProgressLine(graph.name)
    try:
        with bar:
            result = optimize_graph(
                graph,
                cluster,
                task=args.task,
                seconds=args.seconds,
                calls=args.calls,
                seed=args.seed,
                start=start,
                start_name=start_name,
                on_progress=bar.update,
                prescreen=args.prescreen,
                moves=args.move_phase if args.moves else None,
            )
    except BaseException as e:  # Ctrl-C or SIGTERM, however it surfaced (numba: SystemError)
        if not is_interrupt(e):
            raise
        return interrupted(args, graph, cluster, bar.latest)
    write_outputs(args, graph, cluster, result.decision, result.measurement, result.method)
    print("\n".join(summary(result, graph, cluster, args)))
    return 0


def run_decision(run: str, graph: CompGraph, cluster: Cluster, task: str, seed: int) -> Decision:
    """The greedy decision of trained run ``run`` on ``graph`` (:func:`graphopt.eval.evaluate.
    load_run`, which refuses a run trained for another device count or for smaller graphs).

    Raises:
        ValueError: a run that decides another task than ``task``, or that cannot run here.
    """
    from graphopt.eval.evaluate import load_run, policy_result
    from graphopt.rundir import CONFIG_FILE, check_run_dir
    from graphopt.train.config import load_config

    config = load_config(check_run_dir(run) / CONFIG_FILE)
    if config.decides != task:
        raise ValueError(
            f"--run {run}: the run decides {config.decides} (task {config.task}) but --task is "
            f"{task}; give --task {config.decides} or a run trained for {task}"
        )
    try:
        loaded = load_run(run, [graph], cluster, seed, device="cpu", config=config)
        return policy_result(loaded.model, loaded.env, 0, "greedy", seed).decision
    except ValueError as e:
        raise ValueError(f"--run {run}: {e}") from e


def method_name(method: str, args: argparse.Namespace) -> str:
    """How the decision file names what made it: ``decoder-search@seconds=10``,
    ``annealing@calls=256``."""
    axis, budget = ("seconds", args.seconds) if args.seconds is not None else ("calls", args.calls)
    return f"{method}@{axis}={budget:g}"


def write_outputs(
    args: argparse.Namespace,
    graph: CompGraph,
    cluster: Cluster,
    decision: Decision,
    measurement: Measurement,
    method: str,
) -> None:
    """Write the decision file (-o; :mod:`graphopt.decisions.format`, as ``--save-decisions``
    writes them) and, with ``--gantt``, its Gantt chart, as one set: both or nothing new, each
    whole (:func:`graphopt.file_set.write_together`).

    Raises:
        ValueError: a file cannot be written (one line naming it).
    """
    from graphopt.decisions.files import dumps
    from graphopt.decisions.format import record_of, to_json
    from graphopt.file_set import write_together

    record = record_of(
        graph,
        cluster,
        decision,
        method=method_name(method, args),
        measurement=measurement,
        task=args.task,
        seed=args.seed,
    )
    files: dict[Path, str | bytes] = {Path(args.output): dumps(to_json(record))}
    if args.gantt:
        files[Path(args.gantt)] = gantt_chart(Path(args.gantt), graph, cluster, decision, method)
    write_together(files)


def gantt_chart(
    path: Path, graph: CompGraph, cluster: Cluster, decision: Decision, method: str
) -> bytes:
    """The Gantt chart of ``decision`` as the bytes of a file of ``path``'s type
    (:func:`graphopt.eval.gantt.gantt_plot`).

    Raises:
        ValueError: ``--gantt``'s suffix is not an image type matplotlib writes.
    """
    from graphopt.eval.gantt import gantt_plot
    from graphopt.sim import Simulator

    m = Simulator().evaluate(graph, cluster, decision, schedule=True)
    assert m.schedule is not None
    title = f"{graph.name} on {cluster.name}, {method}"
    try:
        return gantt_plot(graph, cluster, m.schedule, title, path.suffix[1:].lower() or "png")
    except ValueError as e:
        raise ValueError(f"--gantt: {e}") from e


def interrupted(
    args: argparse.Namespace, graph: CompGraph, cluster: Cluster, latest: Progress | None
) -> int:
    """Ctrl-C or SIGTERM: write the best decision found so far, with its Gantt chart when asked
    (none before the search began), say so in one line, exit status 130."""
    if latest is None:
        print("graphopt: interrupted before the search began; nothing written", file=sys.stderr)
        return 130
    write_outputs(args, graph, cluster, latest.decision, latest.measurement, latest.method)
    gantt = f" and its Gantt chart to {args.gantt}" if args.gantt else ""
    print(
        f"graphopt: interrupted after {latest.calls:,} calls ({latest.seconds:.1f} s): wrote the "
        f"best decision so far, {latest.speedup:.4f}x over {latest.start}, to {args.output}"
        f"{gantt}",
        file=sys.stderr,
    )
    return 130


class ProgressLine:
    """A progress bar on stderr with the best speed-up so far (rich, redrawn at most ten times a
    second; nothing is drawn when stderr is not a terminal). Keeps the latest report, for Ctrl-C."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.latest: Progress | None = None
        self._bar: Any = None
        self._task: Any = None
        self._shown = 0.0

    def __enter__(self) -> ProgressLine:
        from rich.console import Console

        console = Console(stderr=True)
        if console.is_terminal:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.fields[best]}"),
                TimeElapsedColumn(),
                console=console,
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task(
                f"optimize {self.name}", total=1.0, best="running the heuristics"
            )
        return self

    def update(self, progress: Progress) -> None:
        self.latest = progress
        now = time.monotonic()
        if self._bar is None or (now - self._shown < 0.1 and progress.share < 1.0):
            return
        self._shown = now
        best = f"best {progress.speedup:.4f}x over {progress.start} · {progress.calls:,} calls"
        self._bar.update(self._task, completed=progress.share, best=best)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.4f} ms"


def _bytes(count: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= size:
            return f"{count / size:,.1f} {unit}"
    return f"{count:,.0f} B"


def summary(
    result: Optimized, graph: CompGraph, cluster: Cluster, args: argparse.Namespace
) -> list[str]:
    """The one-screen summary: step time, speed-up over every heuristic, peak memory per device,
    what changed from the best heuristic, where the decision went and how to replay it."""
    m = result.measurement
    heuristic = result.heuristic_measurement.step_time
    lines = [
        f"{graph.name} ({graph.num_ops:,} ops) on {cluster.name}, {result.task}: "
        f"{result.method} from {result.start}, {result.calls:,} simulator calls in "
        f"{result.seconds:.1f} s (seed {args.seed})",
        f"step time      {_ms(m.step_time)}: {result.speedup_over(heuristic):.4f}x over the best "
        f"heuristic ({result.best_heuristic}, {_ms(heuristic)})"
        + ("" if m.valid else f"; INVALID: {m.reason}"),
    ]
    if result.given is not None:
        name, given = result.given
        used = "the search's start" if result.start == name else "not used: slower"
        lines.append(
            f"given start    {name}: {_ms(given.step_time)}, "
            f"{result.heuristic_measurement.step_time / given.step_time:.4f}x over the best "
            f"heuristic ({used})"
            if given.valid
            else f"given start    {name}: INVALID ({given.reason}; not used)"
        )
    lines.append("speed-up over each heuristic:")
    cells = []
    for h in result.heuristics:
        if h.measurement is None:
            cells.append(f"{h.method}: none")
        elif not h.measurement.valid:
            cells.append(f"{h.method}: invalid")
        else:
            cells.append(f"{h.method} {result.speedup_over(h.measurement.step_time):.3f}x")
    width = max(len(c) for c in cells) + 3
    per_line = max(1, 96 // width)
    for k in range(0, len(cells), per_line):
        lines.append("  " + "".join(c.ljust(width) for c in cells[k : k + per_line]).rstrip())
    memory = [
        f"{d.name} {_bytes(peak)} of {_bytes(d.memory)}"
        for d, peak in zip(cluster.devices, m.peak_memory.tolist(), strict=True)
    ]
    lines.append("peak memory    " + ", ".join(memory))
    ours, theirs = result.decision, result.heuristic_decision
    changes = [f"{_changed(ours.placement, theirs.placement):,} ops moved"]
    if result.task != "placement":
        changes.append(f"{_changed(ours.priority, theirs.priority):,} priorities changed")
        changes.append(f"{_changed(ours.fusion, theirs.fusion):,} fusion bits flipped")
    lines.append(
        f"changes        {', '.join(changes)} from {result.best_heuristic} "
        f"(of {graph.num_ops:,} ops)"
    )
    replay = (
        f"graphopt simulate {shlex.quote(args.graph)} --cluster {shlex.quote(_cluster_arg(args))} "
        f"--decision {shlex.quote(args.output)}"
    )
    lines.append(f"wrote {args.output}; replay: {replay}")
    if args.gantt:
        lines.append(f"wrote {args.gantt}")
    return lines


def _changed(a: Any, b: Any) -> int:
    """Entries where two filled decision arrays differ."""
    import numpy as np

    return int(np.count_nonzero(np.asarray(a) != np.asarray(b)))


def _cluster_arg(args: argparse.Namespace) -> str:
    """``--cluster`` as given: a preset's name or a file's path."""
    given = getattr(args, "cluster_spec", None)
    return str(given if isinstance(given, str) else args.cluster.name)
