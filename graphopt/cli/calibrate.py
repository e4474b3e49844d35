"""``graphopt calibrate GRAPH... --cluster C -o OUT.yaml``: fit a cluster's roofline to measured ops.

For every device kind of the cluster that the graphs hold measured times for (``graphopt
profile`` writes them), fits that kind's per-op overhead and efficiency per op type and class
(:func:`graphopt.sim.calibrate.calibrate`) and writes the cluster with them, so that graphs never
profiled are simulated as this machine runs them: ``graphopt simulate OTHER.json --cluster
OUT.yaml``. The output is written atomically, only after the fit succeeded; bad input (no
measured kind in common, an output path that cannot be written, a bad graph or cluster) is one
line on stderr, exit status 2.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from graphopt import strict_json
from graphopt.cli import options
from graphopt.cli.profile import CLUSTER_SUFFIXES, check_output

NAME = "calibrate"
HELP = "fit a cluster's per-op overhead and efficiency per op type to measured op times"
MAX_COUNT = 1_000_000
"""The bound of ``--min-ops`` and ``--min-sources``."""


def register(sub: Any) -> None:
    p = sub.add_parser(
        NAME,
        help=HELP,
        description="Fit, for every device kind of CLUSTER that the GRAPHs hold measured op "
        "times for (graphopt profile), the per-op overhead and the efficiency (share of peak "
        "FLOP/s or of memory bandwidth) per op class and per op type seen in enough graphs, and "
        "write the cluster with them. Ops without a measured time are then priced by the "
        "calibrated roofline (graphopt simulate OTHER.json --cluster OUT.yaml).",
    )
    p.add_argument("graphs", metavar="GRAPH", nargs="+", help="graph files with measured times")
    options.add_cluster(
        p,
        required=True,
        help="cluster file or preset holding the measured device kind (e.g. the file graphopt "
        "profile wrote)",
    )
    p.add_argument("-o", "--output", required=True, help="cluster file to write (.yaml, .json)")
    p.add_argument(
        "--min-ops",
        type=options.integer(1, MAX_COUNT),
        default=8,
        help=f"measured ops an op type needs for its own entry, 1..{MAX_COUNT} (default 8)",
    )
    p.add_argument(
        "--min-sources",
        type=options.integer(1, MAX_COUNT),
        default=2,
        help="model families an op type must be measured in for its own entry, "
        f"1..{MAX_COUNT} (default 2)",
    )
    p.add_argument("--json", action="store_true", help="print the fitted rows as JSON")
    p.set_defaults(func=cmd_calibrate)


def cmd_calibrate(args: argparse.Namespace) -> int:
    out = Path(args.output)
    check_output(out, "output cluster file", CLUSTER_SUFFIXES)

    from dataclasses import replace

    from graphopt import rundir
    from graphopt.graph import CompGraph
    from graphopt.sim.calibrate import calibrate

    graphs = [CompGraph.load(path) for path in args.graphs]
    cluster = args.cluster  # resolved by the option's check
    measured = sorted({kind for g in graphs for kind in g.measured})
    kinds = [kind for kind in cluster.kinds if kind in measured]
    if not kinds:
        raise ValueError(
            f"no device kind of cluster {cluster.name!r} ({', '.join(cluster.kinds)}) is measured "
            f"in these graphs (measured: {', '.join(measured) or 'none'}); give the cluster file "
            "graphopt profile wrote beside them"
        )
    fits = {}
    for kind in kinds:
        device = next(d for d in cluster.devices if d.kind == kind)
        fits[kind] = calibrate(graphs, device, min_ops=args.min_ops, min_sources=args.min_sources)
    devices = tuple(
        replace(
            d,
            launch_overhead=fits[d.kind].device.launch_overhead,
            efficiency=fits[d.kind].device.efficiency,
        )
        if d.kind in fits
        else d
        for d in cluster.devices
    )
    # replace keeps every other field: the links and the model options (contention, route and
    # host, send, copies, dispatch, colocation)
    fitted = replace(
        cluster,
        devices=devices,
        description=(cluster.description + " " if cluster.description else "")
        + f"(calibrated by graphopt calibrate on {len(graphs)} graph(s))",
    )
    rundir.write_atomic(out, fitted.save)
    if args.json:
        rows = {
            kind: {
                "launch_overhead": fit.device.launch_overhead,
                "ops": fit.ops,
                "sources": fit.sources,
                "measured_seconds": fit.measured_seconds,
                "before_seconds": fit.before_seconds,
                "after_seconds": fit.after_seconds,
                "rows": [vars(r) for r in fit.rows],
            }
            for kind, fit in fits.items()
        }
        print(strict_json.dumps(rows, indent=2))
        return 0
    for kind, fit in fits.items():
        print(
            f"{kind}: {fit.ops:,} measured ops from {fit.sources} model families; "
            f"{fit.device.launch_overhead * 1e6:.2f} us per op; summed op time "
            f"{fit.measured_seconds * 1e3:,.2f} ms measured, roofline "
            f"{fit.before_seconds * 1e3:,.2f} ms before, {fit.after_seconds * 1e3:,.2f} ms after"
        )
        print(f"  {'entry':<36}{'ops':>7}{'fam.':>5}{'compute':>9}{'memory':>8}")
        for r in fit.rows[:20]:
            print(
                f"  {r.level + ' ' + r.key:<36}{r.ops:>7}{r.sources:>5}{r.compute:>9.3g}"
                f"{r.memory:>8.3g}"
            )
        if len(fit.rows) > 20:
            print(f"  ... {len(fit.rows) - 20} more entries in {out}")
    print(f"wrote {out}")
    return 0
