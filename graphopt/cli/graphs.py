"""``graphopt graphs list|show|export``: browse the built-in workloads and graph files."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphopt import strict_json

if TYPE_CHECKING:  # pragma: no cover
    from graphopt.graph import CompGraph

NAME = "graphs"
HELP = "list, inspect and export computation graphs"


def non_negative(text: str) -> int:
    """An argparse type: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value}")
    return value


def register(sub: Any) -> None:
    p = sub.add_parser(NAME, help=HELP)
    gsub = p.add_subparsers(dest="graphs_command", metavar="ACTION", required=True)

    ls = gsub.add_parser("list", help="list built-in graphs and suites")
    ls.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ls.set_defaults(func=cmd_list)

    show = gsub.add_parser("show", help="op counts, FLOPs, bytes and the largest ops of graphs")
    show.add_argument(
        "graphs", metavar="GRAPH", help="name, suite:NAME, graph file, or a comma list"
    )
    show.add_argument(
        "--top", type=non_negative, default=10, help="how many of the largest ops to list"
    )
    show.add_argument("--json", action="store_true", help="print JSON instead of tables")
    show.set_defaults(func=cmd_show)

    ex = gsub.add_parser("export", help="write graphs as graphopt graph files (JSON, .gz allowed)")
    ex.add_argument("graphs", metavar="GRAPH", help="name, suite:NAME, graph file, or a comma list")
    ex.add_argument(
        "-o",
        "--output",
        required=True,
        help="output file for one graph, or a directory (one <name>.json each) for several",
    )
    ex.set_defaults(func=cmd_export)

    im = gsub.add_parser(
        "import",
        help="import a graph from a PyTorch zoo model or a PipeDream profile into a graph file",
        description="SOURCE is torch:NAME?ARG=INT&... (graphopt graphs list shows the zoo) or "
        "pipedream:NAME / pipedream:PATH.txt; add mode=forward to the query for the forward graph "
        "(default: training, forward + backward).",
    )
    im.add_argument("source", metavar="SOURCE")
    im.add_argument("-o", "--output", required=True, help="graph file to write (.json or .json.gz)")
    im.set_defaults(func=cmd_import)


def _importable() -> dict[str, str]:
    """Zoo models, PipeDream profiles and Tarnawski et al.'s operator graphs, addressable as
    ``torch:NAME`` / ``pipedream:NAME`` / ``tarnawski:NAME``."""
    from graphopt.importers.pipedream import list_profiles
    from graphopt.importers.tarnawski import list_graphs
    from graphopt.importers.zoo import list_zoo

    out = {f"torch:{name}": desc for name, desc in list_zoo().items()}
    for name, path in list_profiles().items():
        out[f"pipedream:{name}"] = f"PipeDream profile {path.name} (measured layer times)"
    for name, path in list_graphs().items():
        out[f"tarnawski:{name}"] = (
            f"Tarnawski et al. operator graph {path.name} (measured op times; its cluster: "
            f"graphopt/data/tarnawski/{name}.cluster.yaml)"
        )
    return out


def cmd_list(args: argparse.Namespace) -> int:
    from rich.markup import escape
    from rich.table import Table

    from graphopt.eval.console import make_console
    from graphopt.workloads import SUITES, list_graphs

    graphs = list_graphs()
    imported = _importable()
    if args.json:
        suites = {k: list(v) for k, v in SUITES.items()}
        print(
            strict_json.dumps({"graphs": graphs, "imported": imported, "suites": suites}, indent=2)
        )
        return 0
    console = make_console()
    table = Table(title="built-in graphs")
    table.add_column("name")
    table.add_column("description")
    for name, desc in graphs.items():
        table.add_row(escape(name), escape(desc))
    console.print(table)
    table = Table(title="imported graphs (training graphs; add ?mode=forward for forward only)")
    table.add_column("source")
    table.add_column("description")
    for name, desc in imported.items():
        table.add_row(escape(name), escape(desc))
    console.print(table)
    suite_table = Table(title="suites (use as suite:NAME)")
    suite_table.add_column("suite")
    suite_table.add_column("graphs")
    for name, members in SUITES.items():
        suite_table.add_row(escape(name), escape(", ".join(members)))
    console.print(suite_table)
    return 0


def graph_report(graph: CompGraph, top: int) -> dict[str, Any]:
    """Summary of a graph plus its ``top`` largest ops by FLOPs, each with its output tensors and
    input shapes (``outputs``, ``inputs``: ``f32[4,32,32,32]``, ``?`` where unknown) and, with
    them, how many ops have known shapes (``ops_with_shapes``)."""
    from graphopt.shapes import format_tensors

    report = graph.summary()
    report["ops_with_shapes"] = sum(s is not None for s in graph.output_shapes)
    order = graph.flops.argsort()[::-1][:top]

    def tensors(i: int) -> tuple[str, str]:
        shapes = graph.output_shapes[i] if graph.output_shapes else None
        dtypes = graph.output_dtypes[i] if graph.output_dtypes else None
        inputs = graph.input_shapes[i] if graph.input_shapes else None
        shown = "?" if inputs is None else ", ".join(f"[{','.join(map(str, s))}]" for s in inputs)
        return format_tensors(shapes, dtypes), shown

    report["largest_ops"] = [
        {
            "name": graph.op_names[i],
            "type": graph.op_types[i],
            "flops": float(graph.flops[i]),
            "bytes": float(graph.bytes_accessed[i]),
            "param_bytes": float(graph.param_bytes[i]),
            "outputs": tensors(i)[0],
            "inputs": tensors(i)[1],
        }
        for i in order
    ]
    return report


def cmd_show(args: argparse.Namespace) -> int:
    from rich.markup import escape
    from rich.table import Table

    from graphopt.eval.console import make_console
    from graphopt.workloads import resolve_graphs

    reports = [graph_report(g, args.top) for g in resolve_graphs(args.graphs)]
    if args.json:
        print(strict_json.dumps(reports, indent=2))
        return 0
    console = make_console()
    for r in reports:
        console.print(
            f"[bold]{escape(r['name'])}[/bold]: {r['ops']:,} ops, {r['edges']:,} edges, "
            f"{r['total_flops'] / 1e9:,.2f} GFLOPs, {r['total_bytes_accessed'] / 1e9:,.3f} GB accessed, "
            f"{r['total_param_bytes'] / 1e6:,.1f} MB parameters"
            + (
                f", measured on {escape(', '.join(r['measured_kinds']))}"
                if r["measured_kinds"]
                else ""
            )
            + f"; shapes known for {r['ops_with_shapes']:,} of {r['ops']:,} ops"
        )
        types = Table(title="op types")
        types.add_column("type")
        types.add_column("count", justify="right")
        for t, c in list(r["op_types"].items())[:15]:
            types.add_row(escape(t), f"{c:,}")
        console.print(types)
        big = Table(title=f"largest {len(r['largest_ops'])} ops by FLOPs")
        for col in ("op", "type", "outputs", "inputs", "GFLOPs", "MB accessed", "MB params"):
            numeric = col not in ("op", "type", "outputs", "inputs")
            big.add_column(col, justify="right" if numeric else "left", no_wrap=numeric)
        for op in r["largest_ops"]:
            big.add_row(
                escape(op["name"]),
                escape(op["type"]),
                escape(op["outputs"]),
                escape(op["inputs"]),
                f"{op['flops'] / 1e9:,.3f}",
                f"{op['bytes'] / 1e6:,.2f}",
                f"{op['param_bytes'] / 1e6:,.2f}",
            )
        console.print(big)
    return 0


GRAPH_SUFFIXES = (".json", ".gz")
"""An ``-o`` ending in one of these is a graph file; otherwise a directory."""


def cmd_export(args: argparse.Namespace) -> int:
    from graphopt.rundir import check_output_path

    out = Path(args.output)
    # before any graph is built or imported
    check_output_path(out, "-o", directory=out.suffix not in GRAPH_SUFFIXES)

    from graphopt.workloads import resolve_graphs

    graphs = resolve_graphs(args.graphs)
    if len(graphs) == 1 and out.suffix in GRAPH_SUFFIXES:
        paths = [graphs[0].save(out)]
    else:
        if out.suffix in GRAPH_SUFFIXES:
            raise ValueError(
                f"{len(graphs)} graphs cannot go to one file {str(out)!r}; give a directory"
            )
        from graphopt.file_set import FileSet

        files = FileSet(out, "-o")  # every graph's file, or none
        for g in graphs:
            files.write(f"{g.name}.json", g.file_content())
        files.commit()
        paths = [out / f"{g.name}.json" for g in graphs]
    for p in paths:
        print(p)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from rich.markup import escape
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from graphopt.importers.sources import is_source, load_source
    from graphopt.rundir import check_output_path

    source = args.source
    if not is_source(source) and source.endswith(".txt"):
        source = f"pipedream:{source}"
    if not is_source(source):
        raise ValueError(
            f"cannot import {args.source!r}: give torch:NAME?ARG=INT&... or pipedream:NAME "
            "(see graphopt graphs list)"
        )
    out = Path(args.output)
    if out.suffix not in GRAPH_SUFFIXES:
        raise ValueError(f"output {str(out)!r} must end in .json or .json.gz")
    check_output_path(out, "-o")  # before the (slow) import
    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), transient=True
    ) as progress:
        progress.add_task(
            f"importing {escape(source)} (export, decomposition, costing)", total=None
        )
        graph = load_source(source)
    graph.save(out)
    print(
        f"{out}: {graph.name}, {graph.num_ops:,} ops, {graph.num_edges:,} edges, "
        f"{graph.flops.sum() / 1e9:,.2f} GFLOPs"
    )
    return 0
