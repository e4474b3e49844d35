"""The ``graphopt`` command. Each subcommand lives in its own module and registers itself here.

Bad input (unknown graph, preset, malformed file) is reported as one line on stderr with exit
status 2, never as a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from graphopt.cli import baselines, costmodel, evaluate, graphs, simulate, train


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="graphopt",
        description="Reinforcement-learning graph optimizer for ML compilers: placement, "
        "scheduling and fusion of computation graphs, with a fast simulator and baselines.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    graphs.register(sub)
    simulate.register(sub)
    baselines.register(sub)
    train.register(sub)
    evaluate.register(sub)
    costmodel.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ValueError as e:
        print(f"graphopt: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # pragma: no cover
        print("graphopt: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
