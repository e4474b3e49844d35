"""``graphopt costmodel dataset|train|eval|ops``: build a dataset of measured decisions, train a
learned cost model on it (``runs/costmodel/<name>_<k>/``), and score a trained model; ``ops``:
the learned per-op runtime model (:mod:`graphopt.cli.costmodel_ops`).

The heavy imports (torch, PyG) happen inside the commands, so ``graphopt --help`` stays fast.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from graphopt import strict_json
from graphopt.cli import options

NAME = "costmodel"
HELP = "datasets, training and evaluation of the learned cost model"
METRIC_KEYS = ("kendall_tau", "opa", "top1_error", "top5_error", "top10_error")
METRIC_HEADERS = ("tau", "OPA", "top-1", "top-5", "top-10")
# The bounds of graphopt.costmodel.data and .runs, which this module does not import at start-up
# (tests/graphopt/cli/test_costmodel_cli.py checks that they agree).
MAX_SAMPLES = 100_000
MAX_EPOCHS = 1_000_000
MAX_BATCH_SIZE = 4096
MAX_HIDDEN = 4096
MAX_LAYERS = 64
MAX_LR = 10.0
MAX_SECONDS = 30 * 86_400


def register(sub: Any) -> None:
    from graphopt.hardware import DEFAULT_CLUSTER

    p = sub.add_parser(
        NAME,
        help=HELP,
        description="Learned cost model: sample decisions and measure them with the simulator "
        "(dataset), train a GNN that ranks them (train), score a trained model (eval).",
    )
    csub = p.add_subparsers(dest="costmodel_command", metavar="ACTION", required=True)

    ds = csub.add_parser(
        "dataset",
        help="sample decisions of graphs and measure them with the simulator",
        description="Writes one .npz per graph (decisions, step times, simulator status) and a "
        "meta.json into --out; `graphopt costmodel train --data OUT` reads it.",
    )
    ds.add_argument("--graphs", required=True, help="name, suite:NAME, graph file, or a comma list")
    options.add_cluster(
        ds, default=DEFAULT_CLUSTER, help=f"cluster preset or file (default {DEFAULT_CLUSTER})"
    )
    ds.add_argument(
        "--samples",
        type=options.integer(1, MAX_SAMPLES),
        default=256,
        help=f"decisions per graph, 1..{MAX_SAMPLES} (default 256)",
    )
    ds.add_argument(
        "--task",
        default="placement",
        choices=("placement", "joint"),
        help="placement only, or placement + priorities + fusion (default placement)",
    )
    options.add_seed(ds, help="seed of the sampled decisions")
    ds.add_argument("--out", required=True, help="dataset directory to write")
    ds.add_argument("--no-progress", action="store_true", help="no progress bar")
    options.add_workers(
        ds,
        help="graphs measured at once, one Ray task per graph (above 1 needs pip install "
        "'graphopt[ray]'); the same dataset as one at a time",
    )
    options.name_flags(ds, samples="--samples")
    ds.set_defaults(func=cmd_dataset)

    tr = csub.add_parser(
        "train",
        help="train a cost model (writes runs/costmodel/<name>_<k>/)",
        description="Train the cost network on SRC: a dataset directory, a sample .npz or a "
        "TpuGraphs .npz. Without --val-data, each graph's configurations are split (with --seed) "
        "into training, validation (--val-fraction: picks the best epoch, model.pt) and test "
        "(--test-fraction: scored once, in test_metrics.json). With --val-data, all of --data "
        "trains and --test-data (if given) is scored. Ctrl-C keeps the best model so far.",
    )
    tr.add_argument("--data", required=True, metavar="SRC", help="training data")
    tr.add_argument(
        "--val-data", metavar="SRC", help="validation data (default: a split of --data)"
    )
    tr.add_argument("--test-data", metavar="SRC", help="test data, with --val-data (default: none)")
    fraction = options.number(0, 1, above=True, below=True)
    tr.add_argument(
        "--test-fraction",
        type=fraction,
        default=0.2,
        help="configurations per graph held out for test without --val-data, in (0, 1) "
        "(default 0.2)",
    )
    tr.add_argument(
        "--val-fraction",
        type=fraction,
        default=0.1,
        help="configurations per graph held out for validation without --val-data, in (0, 1) "
        "(default 0.1)",
    )
    tr.add_argument(
        "--loss", default="listmle", help="mse, hinge, logistic or listmle (default listmle)"
    )
    tr.add_argument(
        "--epochs",
        type=options.integer(1, MAX_EPOCHS),
        default=10,
        help=f"passes over the training data, 1..{MAX_EPOCHS} (default 10)",
    )
    tr.add_argument(
        "--batch-size",
        type=options.integer(2, MAX_BATCH_SIZE),
        default=32,
        help=f"configurations per batch, 2..{MAX_BATCH_SIZE} (default 32)",
    )
    tr.add_argument(
        "--lr",
        type=options.number(0, MAX_LR, above=True),
        default=1e-3,
        help=f"learning rate, in {options.span(0, MAX_LR, above=True)} (default 0.001)",
    )
    tr.add_argument(
        "--hidden",
        type=options.integer(1, MAX_HIDDEN),
        default=64,
        help=f"node embedding width, 1..{MAX_HIDDEN} (default 64)",
    )
    tr.add_argument(
        "--layers",
        type=options.integer(0, MAX_LAYERS),
        default=3,
        help=f"GraphSAGE layers, 0..{MAX_LAYERS} (default 3)",
    )
    options.add_seed(tr, help="seed of the data split and the model")
    tr.add_argument(
        "--time-budget",
        type=options.number(0, MAX_SECONDS, above=True),
        metavar="SECONDS",
        help="stop after the epoch during which this many seconds have passed, in "
        f"{options.span(0, MAX_SECONDS, above=True)}",
    )
    tr.add_argument("--name", default="cost", help="run name (runs/costmodel/<name>_<k>)")
    options.add_runs_dir(
        tr,
        dest="runs_root",
        aliases=("--runs-root",),
        help="where runs are written (default runs/)",
    )
    options.name_flags(
        tr,
        val_data="--val-data",
        test_data="--test-data",
        test_fraction="--test-fraction",
        val_fraction="--val-fraction",
        epochs="--epochs",
        batch_size="--batch-size",
        lr="--lr",
        hidden="--hidden",
        layers="--layers",
        time_budget="--time-budget",
    )
    tr.set_defaults(func=cmd_train)

    ev = csub.add_parser(
        "eval",
        help="score a trained cost model on a dataset",
        description="Ranking metrics of RUN's model on every configuration of SRC (per graph and "
        "averaged over graphs), and its scoring throughput next to the simulator's.",
    )
    ev.add_argument(
        "run", metavar="RUN", help="run directory (runs/costmodel/<name>_<k>) or model.pt"
    )
    ev.add_argument("--data", required=True, metavar="SRC", help="data to score on")
    ev.add_argument(
        "--batch-size",
        type=options.integer(1, MAX_BATCH_SIZE),
        default=256,
        help=f"configurations per forward pass, 1..{MAX_BATCH_SIZE} (default 256)",
    )
    ev.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    options.name_flags(ev, batch_size="--batch-size")
    ev.set_defaults(func=cmd_eval)

    from graphopt.cli import costmodel_ops

    costmodel_ops.register(csub)


def check_data(source: str | None, flag: str) -> None:
    """Refuse a file that cannot be a dataset (not an .npz archive) with a hint at what is expected;
    directories and missing paths are left to the loader, whose messages say what is wrong."""
    import zipfile

    if source is None:
        return
    path = Path(source)
    if path.is_file() and not zipfile.is_zipfile(path):
        raise ValueError(
            f"{flag} {source}: not a dataset; expected a dataset directory or a .npz written by "
            "`graphopt costmodel dataset --out DIR` (or a TpuGraphs layout .npz)"
        )


# ---------------------------------------------------------------------- dataset
def cmd_dataset(args: argparse.Namespace) -> int:
    import numpy as np

    from graphopt.costmodel.data import generate
    from graphopt.workloads import resolve_graphs

    out = Path(args.out)
    if out.is_dir() and any(out.glob("*.npz")):
        raise ValueError(
            f"{out} already holds a dataset (.npz files); choose another --out or delete it"
        )
    graphs = resolve_graphs(args.graphs)
    cluster = args.cluster  # resolved by the option's check
    start = time.perf_counter()
    paths = generate(
        graphs,
        cluster,
        out,
        samples=args.samples,
        seed=args.seed,
        task=args.task,
        progress=not args.no_progress,
        workers=args.workers,
        address=args.ray_address,
    )
    seconds = time.perf_counter() - start
    status = np.concatenate([np.load(p)["status"] for p in paths])
    valid, oom = float(np.mean(status == 0)), float(np.mean(status == 1))
    print(
        f"{out}: {len(graphs)} graph(s) on {cluster.name}, {status.size:,} {args.task} samples, "
        f"valid {valid:.1%} (out of memory {oom:.1%}, illegal {1 - valid - oom:.1%}), "
        f"{seconds:.1f} s"
    )
    return 0


# ---------------------------------------------------------------------- train
def epoch_line(row: dict[str, float], epochs: int) -> str:
    """One line per epoch: loss, validation tau and top-5 error, elapsed seconds."""
    return (
        f"epoch {int(row['epoch'])}/{epochs}  loss {row['train/loss']:.4f}  "
        f"val tau {row.get('val/kendall_tau', float('nan')):.3f}  "
        f"top-5 error {row.get('val/top5_error', float('nan')):.3f}  ({row['time']:.1f} s)"
    )


def cmd_train(args: argparse.Namespace) -> int:
    import sys

    import torch

    from graphopt.costmodel.runs import CostModelInterrupted, train_run

    for source, flag in (
        (args.data, "--data"),
        (args.val_data, "--val-data"),
        (args.test_data, "--test-data"),
    ):
        check_data(source, flag)
    torch.set_num_threads(1)  # see TrainConfig.threads: one thread is fastest on shared cores
    try:
        run = train_run(
            args.data,
            val_data=args.val_data,
            test_data=args.test_data,
            test_fraction=args.test_fraction,
            val_fraction=args.val_fraction,
            loss=args.loss,
            epochs=args.epochs,
            batch_size=args.batch_size,
            lr=args.lr,
            hidden=args.hidden,
            layers=args.layers,
            seed=args.seed,
            time_budget=args.time_budget,
            name=args.name,
            runs_root=args.runs_root,
            on_epoch=lambda row: print(epoch_line(row, args.epochs), flush=True),
        )
    except CostModelInterrupted as e:
        print(f"graphopt: {e}", file=sys.stderr)
        return 130
    test = json.loads((run / "test_metrics.json").read_text())
    print(
        f"{test['scored_on']}: tau {test['kendall_tau']:.3f}, OPA {test['opa']:.3f}, "
        f"top-5 error {test['top5_error']:.3f} (best epoch {test['best_epoch']})"
    )
    print(f"run: {run}")
    return 0


# ---------------------------------------------------------------------- eval
def cmd_eval(args: argparse.Namespace) -> int:
    from graphopt.rundir import resolve_cost_model

    check_data(args.data, "--data")
    resolve_cost_model(args.run)  # wrong paths fail before torch is imported
    import torch
    from rich.table import Table

    from graphopt.costmodel.runs import evaluate_run
    from graphopt.eval.console import make_console

    torch.set_num_threads(1)
    result = evaluate_run(args.run, args.data, batch_size=args.batch_size)
    table = Table(
        title=f"{result['model']} on {result['data']}",
        caption="tau: Kendall's tau-b; OPA: ordered-pair accuracy; top-k: runtime of the best of "
        "the model's top k over the best runtime, minus 1",
    )
    table.add_column("graph", no_wrap=True)
    table.add_column("configs", justify="right")
    for header in METRIC_HEADERS:
        table.add_column(header, justify="right")
    for row in result["graphs"]:
        table.add_row(row["graph"], f"{row['configs']:,}", *(f"{row[k]:.3f}" for k in METRIC_KEYS))
    mean = result["mean"]
    table.add_row(
        f"mean of {int(mean['num_groups'])}",
        f"{sum(r['configs'] for r in result['graphs']):,}",
        *(f"{mean[k]:.3f}" for k in METRIC_KEYS),
        style="bold",
    )
    if "prior" in result:
        prior = result["prior"]
        table.add_row("analytic prior alone", "", *(f"{prior[k]:.3f}" for k in METRIC_KEYS))
    console = make_console()
    console.print(table)
    t = result["throughput"]
    console.print(
        f"scoring: {t['model_configs_per_second']:,.0f} configurations/s "
        f"(model, batches of {t['batch_size']}, {t['torch_threads']} thread(s))"
        + (
            f"; simulator {t['simulator_configs_per_second']:,.0f} configurations/s"
            if "simulator_configs_per_second" in t
            else ""
        )
    )
    if args.json:
        from graphopt.file_set import write_file

        print(f"wrote {write_file(args.json, strict_json.dumps(result, indent=2))}")
    return 0
