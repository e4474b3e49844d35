"""``graphopt costmodel ops train|eval``: the learned per-op runtime model.

``train GRAPH... --cluster C -o MODEL.json`` fits :class:`graphopt.op_model.OpModel` on the
measured op times of the GRAPHs (``graphopt profile`` writes them) for the device kinds of C
(:func:`graphopt.costmodel.op_fit.fit_op_model`). A cluster file with ``op_times: learned`` and
``op_model: MODEL.json`` then prices every op without a measured time by it
(:mod:`graphopt.hardware`). ``eval GRAPH... --cluster C --model MODEL.json`` scores a model on
measured graphs: per graph the median relative error of its ops and of their sum.

The heavy imports (LightGBM) happen inside the commands, so ``graphopt --help`` stays fast.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from graphopt import strict_json
from graphopt.cli import options

MAX_ROUNDS = 10_000
""":data:`graphopt.costmodel.op_fit.MAX_ROUNDS`, which this module does not import at start-up
(tests/graphopt/cli/test_costmodel_ops_cli.py checks that they agree)."""


def register(csub: Any) -> None:
    """Add ``ops`` and its actions under ``graphopt costmodel``."""
    p = csub.add_parser(
        "ops",
        help="the learned per-op runtime model: train it on measured op times, score it",
        description="A per-op runtime model (LightGBM on op type, class, shapes, FLOPs, bytes "
        "and the device's figures) trained on the measured op times graphopt profile writes; "
        "a cluster file with `op_times: learned` and `op_model: MODEL.json` uses it.",
    )
    osub = p.add_subparsers(dest="ops_command", metavar="ACTION", required=True)

    tr = osub.add_parser(
        "train",
        help="fit the op model on measured graphs and write it (JSON)",
        description="Fit the op model on every measured op of GRAPHs for the device kinds of "
        "--cluster (the cluster file graphopt profile wrote) and write it to -o.",
    )
    tr.add_argument("graphs", metavar="GRAPH", nargs="+", help="graph files with measured times")
    options.add_cluster(
        tr, required=True, help="cluster file or preset holding the measured device kind(s)"
    )
    tr.add_argument("-o", "--output", required=True, help="model file to write (.json)")
    tr.add_argument(
        "--rounds",
        type=options.integer(1, MAX_ROUNDS),
        default=None,
        help=f"boosting rounds, 1..{MAX_ROUNDS} (default 300)",
    )
    options.name_flags(tr, rounds="--rounds")
    tr.set_defaults(func=cmd_train)

    ev = osub.add_parser(
        "eval",
        help="score an op model on measured graphs",
        description="Per GRAPH: the median relative error of the model's op times against the "
        "measured ones, and of their sum, on the devices of --cluster.",
    )
    ev.add_argument("graphs", metavar="GRAPH", nargs="+", help="graph files with measured times")
    options.add_cluster(ev, required=True, help="cluster file or preset")
    ev.add_argument("--model", required=True, help="op model file (graphopt costmodel ops train)")
    ev.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ev.set_defaults(func=cmd_eval)


def cmd_train(args: argparse.Namespace) -> int:
    from graphopt.cli.profile import check_output

    out = Path(args.output)
    check_output(out, "op model file", (".json",))

    from graphopt.costmodel.op_fit import ROUNDS, fit_op_model
    from graphopt.graph import CompGraph

    graphs = [CompGraph.load(path) for path in args.graphs]
    model = fit_op_model(
        graphs,
        args.cluster.devices,
        rounds=args.rounds or ROUNDS,
        metadata={"cluster": args.cluster.name},
    )

    model.save(out)  # whole or not at all
    print(
        f"wrote {out}: {model.metadata['ops']:,} measured ops of {len(graphs)} graph(s), "
        f"{len(model.types)} op types, device kind(s) {', '.join(model.kinds)}"
    )
    return 0


def evaluate(graphs: list[Any], cluster: Any, model: Any) -> list[dict[str, Any]]:
    """Per graph and measured device kind: ops priced, median |op error|, error of the sum."""
    import numpy as np

    from graphopt.costmodel.op_fit import op_errors

    rows = []
    for graph in graphs:
        for device in {d.kind: d for d in cluster.devices}.values():
            if device.kind not in graph.measured:
                continue
            errors = op_errors(model, graph, device)
            priced = np.isfinite(errors)
            times = graph.measured[device.kind]
            predicted = model.predict(graph, device)
            both = priced & np.isfinite(times)
            measured_sum = float(times[both].sum())
            row = {
                "graph": graph.name,
                "kind": device.kind,
                "ops": int(np.isfinite(times).sum()),
                "priced": int(priced.sum()),
                "median_op_error": float(np.median(np.abs(errors[priced])))
                if priced.any()
                else math.nan,
                "sum_error": float(predicted[both].sum() / measured_sum - 1)
                if measured_sum > 0
                else math.nan,
            }
            if not (times[np.isfinite(times)] > 0).any():  # no error to take: nothing measured
                row["note"] = "the graph has no measured times on this kind (all zero)"
            elif not priced.any():  # --json writes the missing figures as null, this says why
                row["note"] = "the model prices none of the measured ops (no op type it knows)"
            elif measured_sum <= 0:
                row["note"] = "the priced ops' measured times sum to 0: no error of the sum"
            rows.append(row)
    return rows


def cmd_eval(args: argparse.Namespace) -> int:
    from graphopt.graph import CompGraph
    from graphopt.op_model import OpModel

    model = OpModel.load(args.model)
    graphs = [CompGraph.load(path) for path in args.graphs]
    rows = evaluate(graphs, args.cluster, model)
    if not rows:
        raise ValueError(
            f"no graph has measured times for a device kind of cluster {args.cluster.name!r} "
            f"({', '.join(args.cluster.kinds)}); give the cluster the graphs were profiled on"
        )
    if args.json:
        print(strict_json.dumps(rows, indent=2))
        return 0
    # Columns as wide as their longest entry (zoo graph names run to 130 characters).
    name = max(len("graph"), *(len(r["graph"]) for r in rows)) + 2
    kind = max(len("kind"), *(len(r["kind"]) for r in rows)) + 2
    print(
        f"{'graph':<{name}}{'kind':<{kind}}{'ops':>6}{'priced':>8}{'|op err| med':>14}{'sum err':>9}"
    )
    for r in rows:
        print(
            f"{r['graph']:<{name}}{r['kind']:<{kind}}{r['ops']:>6}{r['priced']:>8}"
            f"{r['median_op_error']:>14.1%}{r['sum_error']:>+9.1%}"
        )
    for r in rows:
        if "note" in r:
            print(f"{r['graph']} on {r['kind']}: {r['note']}")
    return 0
