"""``graphopt moves``: train a model of single-op moves that ``graphopt optimize --moves`` uses to
rank the moves its search tries (:mod:`graphopt.nn.move_gain`, :mod:`graphopt.train.move_gain`)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from graphopt.cli import options

NAME = "moves"
HELP = "a learned model of single-op moves for graphopt optimize --moves: train it"
MAX_OPS = 100_000
MAX_EPOCHS = 10_000
LOSSES = ("bce", "mse")
"""``graphopt.train.move_gain.LOSSES``, the first the default (that module imports torch; a test
keeps the two equal)."""


def register(sub: Any) -> None:
    p = sub.add_parser(
        NAME,
        help=HELP,
        description="A graph network that predicts, for every op and device, how much moving "
        "that op alone to that device would speed up a placement (graphopt/nn/move_gain.py). "
        "'train' labels moves of each training graph's best-heuristic placement with the "
        "simulator and fits the network; graphopt optimize --moves MODEL.pt then tries the "
        "moves it ranks first.",
    )
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    t = verbs.add_parser(
        "train",
        help="label moves with the simulator and fit the model",
        description="For each graph of --graphs (at most --max-ops ops), --ops of its ops are "
        "drawn and every move of each to another allowed device is simulated; the network is "
        "fitted to which of them gain (--loss) for --epochs passes "
        "(graphopt/train/move_gain.py). The model is written after every pass (whole or not "
        "at all): Ctrl-C keeps the last pass's and exits with 130.",
    )
    t.add_argument(
        "--graphs",
        default="suite:train-gen",
        help="training graphs (names, suite:NAME, files; comma list)",
    )
    t.add_argument(
        "--clusters",
        default="v100-nvlink-4",
        help="cluster presets or files, comma-separated: the training graphs go to each in turn "
        "(one model for several device counts and kinds)",
    )
    t.add_argument(
        "--max-ops",
        type=options.integer(1, 10_000_000),
        default=1400,
        help="graphs with more ops are left out",
    )
    t.add_argument(
        "--ops",
        type=options.integer(1, MAX_OPS),
        default=256,
        help="ops whose moves are labelled, per graph",
    )
    t.add_argument(
        "--epochs",
        type=options.integer(1, MAX_EPOCHS),
        default=15,
        help="passes over the training graphs",
    )
    t.add_argument(
        "--loss",
        default=LOSSES[0],
        choices=LOSSES,
        help="bce: whether each move gains (ranks the moves that pay first best: "
        "docs/results/moves.md); mse: the gains themselves, clipped to +-2%%",
    )
    options.add_seed(t, help="seeds the ops drawn, the initial weights and the order")
    t.add_argument(
        "-o",
        "--output",
        metavar="MODEL.pt",
        required=True,
        help="the model file to write (missing folders are created)",
    )
    options.name_flags(
        t,
        _check_train,
        graphs="--graphs",
        max_ops="--max-ops",
        clusters="--clusters",
        ops="--ops",
        epochs="--epochs",
        output="-o",
    )
    t.set_defaults(func=cmd_train)


def _check_train(args: argparse.Namespace) -> None:
    from graphopt.rundir import check_output_path
    from graphopt.train.step_run import resolve_clusters

    check_output_path(args.output, "-o")
    args.resolved_clusters = resolve_clusters(args.clusters)
    if Path(args.output).suffix.lower() != ".pt":
        raise ValueError(f"-o {args.output!r}: a model file is a .pt; name it e.g. moves.pt")


def cmd_train(args: argparse.Namespace) -> int:
    import torch

    from graphopt.nn.move_gain import save_move_net
    from graphopt.rundir import write_atomic
    from graphopt.train.move_gain import fit_move_net, move_examples
    from graphopt.train.step_run import resolve_run_graphs

    torch.set_num_threads(max(1, min(torch.get_num_threads(), 2)))
    clusters = args.resolved_clusters
    graphs = [g for g in resolve_run_graphs(args.graphs) if g.num_ops <= args.max_ops]
    if not graphs:
        raise ValueError(
            f"--graphs {args.graphs!r}: no graph of at most {args.max_ops} ops (--max-ops); "
            "raise --max-ops or name smaller graphs"
        )
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    trained_on = f"{args.graphs} ({len(graphs)} graphs) on {','.join(c.name for c in clusters)}"
    began = time.perf_counter()
    saved = [False]

    def labelled(i: int, name: str) -> None:
        if (i + 1) % 50 == 0 or i + 1 == len(graphs):
            print(f"labelled {i + 1}/{len(graphs)} graphs ({time.perf_counter() - began:.0f} s)")

    def epoch_done(epoch: int, loss: float, net: Any) -> None:
        write_atomic(out, lambda tmp: save_move_net(net, tmp, trained_on))
        saved[0] = True
        print(
            f"epoch {epoch + 1}/{args.epochs}: loss {loss:.4f} "
            f"({time.perf_counter() - began:.0f} s)",
            flush=True,
        )

    try:
        examples = move_examples(graphs, clusters, args.ops, args.seed, on_graph=labelled)
        fit_move_net(examples, args.epochs, seed=args.seed, loss=args.loss, on_epoch=epoch_done)
    except KeyboardInterrupt:
        kept = f"{out} holds the last complete pass" if saved[0] else "nothing was written"
        print(f"graphopt: interrupted; {kept}", file=sys.stderr)
        return 130
    print(f"model: {out}")
    return 0
