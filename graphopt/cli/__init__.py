"""The ``graphopt`` command. Each subcommand lives in its own module and registers itself here.

Bad input (unknown graph, preset, malformed file) is reported as one line on stderr with exit
status 2, never as a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from graphopt.cli import baselines, costmodel, evaluate, graphs, simulate, train


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends ``(default: X)`` to an option's help, except where the help already names its
    default or there is nothing to show (no default, or an off switch)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        help_text = action.help or ""
        nothing = any(action.default is v for v in (None, False, argparse.SUPPRESS))
        if nothing or "default" in help_text:
            return action.help
        return super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` with :class:`DefaultsHelpFormatter`; subcommands inherit it
    (``add_subparsers`` makes sub-parsers of the parser's own class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", DefaultsHelpFormatter)
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
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
    except ImportError as e:  # an optional dependency (its message holds the install hint)
        from graphopt.importers.zoo import DependencyNotInstalled

        if not isinstance(e, DependencyNotInstalled):
            raise
        print(f"graphopt: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # pragma: no cover
        print("graphopt: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
