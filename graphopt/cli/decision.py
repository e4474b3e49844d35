"""``graphopt decision``: compare two saved decisions, or export one for PyTorch."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from graphopt.decisions.diff import DecisionDiff
    from graphopt.typing import DecisionRecord

from graphopt import strict_json
from graphopt.cli import options

NAME = "decision"
HELP = "compare saved decisions (diff) or export one for PyTorch (export)"


def register(sub: Any) -> None:
    p = sub.add_parser(
        NAME,
        help=HELP,
        description="Work with decision files (docs/decisions.md), e.g. those of "
        "graphopt baselines --save-decisions DIR.",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    d = actions.add_parser(
        "diff",
        help="ops moved, priorities changed, kernels split or merged, step-time delta",
        description="What changes from decision A to decision B of the same graph: ops moved, "
        "priorities changed, fused kernels split or merged, and the step time (the saved ones "
        "when both files are for the same cluster; simulated again with --graph).",
    )
    d.add_argument("a", metavar="A", help="decision file")
    d.add_argument("b", metavar="B", help="decision file")
    d.add_argument(
        "--graph",
        help="the graph of both decisions (name, graph file...): checks them against it and "
        "simulates both; needed for decision files without op names or fingerprints",
    )
    options.add_cluster(
        d,
        help="with --graph: the cluster to simulate on (default: the one A was saved for when it "
        "is a preset, else the default cluster)",
    )
    d.add_argument(
        "--limit",
        type=options.integer(0, 1_000_000),
        default=20,
        help="rows shown per section, 0..1000000",
    )
    d.add_argument("--json", action="store_true", help="print JSON instead of text")
    d.set_defaults(func=cmd_diff)

    e = actions.add_parser(
        "export",
        help="write a decision in a form another tool applies (--format torch)",
        description="Export a decision file. --format torch writes JSON with 'placement', a "
        "{FX node name: torch device} map, and 'fusion', the fused kernels as lists of FX node "
        "names; apply it with graphopt.importers.torch_apply.apply_placement (graphs imported "
        "from PyTorch name their ops after the FX nodes).",
    )
    e.add_argument("file", metavar="FILE", help="decision file (versioned: docs/decisions.md)")
    e.add_argument("--format", choices=("torch",), default="torch", help="what to write")
    e.add_argument(
        "--devices",
        help="comma list of the torch device of each cluster device, in order (default "
        "cuda:0,cuda:1,...)",
    )
    e.add_argument("--out", metavar="OUT.json", help="write here instead of standard output")
    e.set_defaults(func=cmd_export)


# ---------------------------------------------------------------------------- diff


def _records(args: argparse.Namespace) -> tuple[DecisionRecord, DecisionRecord, Any]:
    """Both records, and their re-simulated step times with ``--graph`` (else ``None``)."""
    from graphopt.decisions.format import is_versioned, read_json, read_record

    if not args.graph:
        if args.cluster is not None:
            raise ValueError("--cluster applies with --graph (the graph to simulate on)")
        for path in (args.a, args.b):
            if not is_versioned(read_json(path)):
                raise ValueError(
                    f"{path}: not a versioned decision file (no op names and fingerprints to "
                    "compare by); give --graph (and --cluster) to read it"
                )
        return read_record(args.a), read_record(args.b), None

    from graphopt.decisions.format import record_of
    from graphopt.decisions.io import load_decision
    from graphopt.hardware import DEFAULT_CLUSTER, PRESETS, get_cluster
    from graphopt.sim import Simulator
    from graphopt.workloads import resolve_graphs

    graphs = resolve_graphs(args.graph)
    if len(graphs) != 1:
        raise ValueError(f"--graph {args.graph!r} names {len(graphs)} graphs; give one")
    graph = graphs[0]
    spec = args.cluster  # a Cluster, resolved by the option's check
    if spec is None:
        data = read_json(args.a)
        saved = data.get("cluster") if is_versioned(data) else None
        spec = saved if saved in PRESETS else DEFAULT_CLUSTER
    cluster = get_cluster(spec)
    sim = Simulator()
    out = []
    for path in (args.a, args.b):
        data = read_json(path)
        method = read_record(path).method if is_versioned(data) else Path(path).stem
        decision = load_decision(path, graph, cluster=cluster)
        m = sim.evaluate(graph, cluster, decision)
        out.append((record_of(graph, cluster, decision, method=method, measurement=m), m))
    steps = tuple(m.step_time if m.valid else None for _, m in out)
    return out[0][0], out[1][0], steps


def _shown(items: list[Any], limit: int) -> tuple[list[Any], str]:
    extra = len(items) - limit
    return items[: max(limit, 0)], (f"  ... and {extra} more" if extra > 0 else "")


def print_diff(
    diff: DecisionDiff, a: DecisionRecord, b: DecisionRecord, names: tuple[str, str], limit: int
) -> None:
    """The diff as text (at most ``limit`` rows per section)."""

    def header(tag: str, path: str, r: DecisionRecord) -> str:
        return f"{tag}: {path}  ({r.method or 'decision'}; {r.graph} on {r.cluster})"

    print(header("A", names[0], a))
    print(header("B", names[1], b))
    n = diff.num_ops
    print(f"ops moved: {len(diff.moved)} of {n}")
    rows, more = _shown(diff.moved, limit)
    for op, x, y in rows:
        da = diff.devices_a[x] if x < len(diff.devices_a) else x
        db = diff.devices_b[y] if y < len(diff.devices_b) else y
        print(f"  {op}: {da} -> {db}")
    if more:
        print(more)
    print(f"priorities changed: {len(diff.reprioritised)} of {n}")
    rows, more = _shown(diff.reprioritised, limit)
    for op, x, y in rows:
        print(f"  {op}: {x} -> {y}")
    if more:
        print(more)

    def groups(pieces: list[tuple[str, ...]]) -> str:
        return " + ".join("[" + ", ".join(p) + "]" for p in pieces)

    for title, found in (("kernels split", diff.split), ("kernels merged", diff.merged)):
        print(f"{title}: {len(found)}")
        rows, more = _shown(found, limit)
        for pieces in rows:
            print(f"  {groups(pieces)}")
        if more:
            print(more)
    delta = diff.step_time_delta
    if delta is None:
        print(f"step time: not compared ({diff.step_time_note}; give --graph to simulate)")
    else:
        ta, tb = diff.step_time_a or 0.0, diff.step_time_b or 0.0
        rel = f" ({delta / ta:+.2%})" if ta > 0 else ""
        print(f"step time: {ta * 1e3:,.6f} ms -> {tb * 1e3:,.6f} ms, {delta * 1e3:+,.6f} ms{rel}")


def cmd_diff(args: argparse.Namespace) -> int:
    from graphopt.decisions.diff import diff_records

    a, b, steps = _records(args)
    diff = diff_records(a, b, step_times=steps)
    if args.json:
        print(strict_json.dumps(diff.to_dict(), indent=2))
        return 0
    print_diff(diff, a, b, (args.a, args.b), args.limit)
    return 0


# ---------------------------------------------------------------------------- export


def cmd_export(args: argparse.Namespace) -> int:

    from graphopt.decisions.format import is_versioned, read_json, read_record
    from graphopt.importers.torch_apply import export_torch

    if args.out:
        from graphopt.rundir import check_output_path

        check_output_path(args.out, "--out")
    if not is_versioned(read_json(args.file)):
        raise ValueError(
            f"{args.file}: not a versioned decision file; convert it with graphopt simulate GRAPH "
            "--decision FILE --save-decisions DIR, then export DIR's file"
        )
    record = read_record(args.file)
    devices = None if args.devices is None else [d.strip() for d in args.devices.split(",")]
    try:
        exported = export_torch(record, devices)
    except ValueError as e:
        raise ValueError(f"--devices: {e}") from None
    if not args.out:
        print(strict_json.dumps(exported, indent=1))
        return 0
    from graphopt.decisions.files import write_json_atomic

    print(f"wrote {write_json_atomic(Path(args.out), exported)}")
    return 0
