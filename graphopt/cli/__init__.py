"""The ``graphopt`` command. Each subcommand lives in its own module and registers itself here.

Bad input (unknown graph, preset, malformed file, a bad value of a flag) is reported as one line
on stderr with exit status 2, never as a traceback. Ctrl-C or SIGTERM ends a command with one line
and exit status 130, its output complete or as it was. The options several commands share are defined
once, with their checks, in :mod:`graphopt.cli.options`; errors of the library name its arguments,
and the command line writes the flags that gave them (:func:`graphopt.cli.options.message`).

Start-up is kept short: the command modules import only the standard library at module level and
import the library (numpy, numba, torch, ...) inside the functions that run a command, and
:func:`main` builds the full parser only for the command named on the command line (the others
are listed by name and help, which is all ``graphopt --help`` shows). ``graphopt --help`` thus
imports none of torch, numba or stable-baselines3; tests/graphopt/cli/test_startup.py checks it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from graphopt.cli import (
    baselines,
    calibrate,
    costmodel,
    decision,
    evaluate,
    graphs,
    moves,
    optimize,
    profile,
    simulate,
    stepwise,
    sweep,
    train,
)
from graphopt.cli.options import check, message
from graphopt.errors import DependencyNotInstalled
from graphopt.signals import INTERRUPTED as INTERRUPTED  # exit status after Ctrl-C or SIGTERM
from graphopt.signals import interrupted, interrupts, received

COMMANDS = (
    graphs,
    optimize,
    simulate,
    profile,
    calibrate,
    baselines,
    decision,
    train,
    stepwise,
    moves,
    sweep,
    evaluate,
    costmodel,
)
"""The command modules in the order ``graphopt --help`` lists them; each has ``NAME``, ``HELP``
(its one-line help) and ``register(sub)`` (adds its full sub-parser)."""


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

    def error(self, message: str) -> NoReturn:
        """A value argparse refuses (not an integer, not a choice, missing): one line, exit 2,
        as every other bad input (``--help`` shows the usage)."""
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``graphopt`` parser.

    Args:
        command: build only this command's sub-parser in full, and list the others by name and
            help (enough for ``graphopt --help`` and for refusing an unknown command); ``None``
            builds every command in full.
    """
    parser = Parser(
        prog="graphopt",
        description="Reinforcement-learning graph optimizer for ML compilers: placement, "
        "scheduling and fusion of computation graphs, with a fast simulator and baselines.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in COMMANDS:
        if command is None or command == module.NAME:
            module.register(sub)
        else:
            sub.add_parser(module.NAME, help=module.HELP)
    return parser


def command_of(argv: Sequence[str]) -> str:
    """The command named in ``argv``: its first argument that is not an option (the top-level
    parser has only ``-h``, which takes no value); ``""`` when there is none."""
    return next((a for a in argv if not a.startswith("-")), "")


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = None
    with interrupts():  # SIGTERM cleans up as Ctrl-C does (graphopt.signals)
        try:
            args = build_parser(command_of(argv)).parse_args(argv)
            check(args)  # the shared options, before the command does any work
            return int(args.func(args) or 0)
        except KeyboardInterrupt:
            return interrupted()
        except Exception as e:
            if received() or caused_by_interrupt(e):  # a Ctrl-C surfaced as another error
                return interrupted()
            if not isinstance(e, (ValueError, DependencyNotInstalled)):
                raise
            # DependencyNotInstalled's message is the install hint
            print(f"graphopt: error: {message(e, args)}", file=sys.stderr)
            return 2


def caused_by_interrupt(error: BaseException) -> bool:
    """Whether ``error`` was caused by a ``KeyboardInterrupt`` (:func:`graphopt.rundir.is_interrupt`):
    numba reports one raised during compiled code as a ``SystemError``, Python one raised in a
    class body's ``__set_name__`` (an import) as a ``RuntimeError``."""
    from graphopt.rundir import is_interrupt

    return is_interrupt(error)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
