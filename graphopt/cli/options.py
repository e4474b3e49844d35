"""The command-line options that several commands share, each defined once with its check.

========================  ==========================================================================
option                    check (run by :func:`check` after parsing, before the command's work)
========================  ==========================================================================
``--cluster``             a preset or cluster file (:func:`graphopt.hardware.get_cluster`); the
                          resolved :class:`~graphopt.hardware.Cluster` replaces the name (or
                          goes beside it, ``args.resolved_cluster``, for ``train``);
                          ``each`` (baselines, eval): every graph on its own cluster
``--workers``,            workers >= 1, Ray installed when work goes to it, an address that answers
``--ray-address``         (:func:`graphopt.distributed.check_options`)
``--seed``                an integer in 0..2**32-1 (what numpy and torch take as a seed)
``--device``              auto, cpu, cuda or cuda:N (:func:`graphopt.accelerator.check_device_name`);
                          for work on Ray tasks, not CUDA (:func:`~graphopt.distributed.check_ray_device`)
``--budget``              evaluations >= 0 (:func:`graphopt.baselines.search.check_budget`)
``--runs-dir``            a directory that can be created (:func:`graphopt.rundir.check_output_path`)
``--curve-calls``,        budgets of the anytime curves (:func:`graphopt.eval.budgets.parse_budgets`);
``--curve-seconds``       the parsed tuples replace the text
``--mode``                how a policy runs (:func:`graphopt.modes.parse_mode`)
========================  ==========================================================================

A numeric option of one command takes its range as its argparse ``type`` (:func:`integer`,
:func:`number`), written in its help too.

Library functions name their arguments in their errors (:class:`graphopt.errors.InvalidArgument`);
each option records which flag gives which argument, and :func:`message` writes the flag in its
place, so a bad flag is one line that names it (exit 2, :func:`graphopt.cli.main`). A command
records its own flags the same way with :func:`name_flags`.

Standard library only at module level: the checks import the library when they run.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

CHECKS = "shared_checks"
"""The namespace attribute holding the checks of the options a parser was given."""
FLAGS = "shared_flags"
"""The namespace attribute mapping argument names to the flags that give them."""
MAX_SEED = 2**32 - 1
"""The largest seed: numpy's legacy seeding (which stable-baselines3 uses) takes 32 bits."""

Check = Callable[[argparse.Namespace], None]


def name_flags(p: Any, check: Check | None = None, **flags: str) -> None:
    """Record on parser ``p`` that each argument of ``flags`` is given by its flag (so errors
    that name the argument name the flag), and ``check`` to run after parsing."""
    checks = p.get_default(CHECKS) or ()
    known = dict(p.get_default(FLAGS) or {})
    known.update(flags)
    p.set_defaults(**{CHECKS: (*checks, check) if check else checks, FLAGS: known})


def message(error: BaseException, args: argparse.Namespace | None) -> str:
    """``error``'s message, with the arguments it names written as the flags of ``args``'s
    command (:class:`graphopt.errors.InvalidArgument`)."""
    from graphopt.errors import InvalidArgument

    if isinstance(error, InvalidArgument):
        return error.named(getattr(args, FLAGS, None) or {})
    return str(error)


def check(args: argparse.Namespace) -> None:
    """Run the checks of the options the command was given, in the order they were added.

    Raises:
        ValueError: one line naming the flag (through :func:`message`).
        graphopt.errors.DependencyNotInstalled: Ray missing for ``--workers`` or
            ``--ray-address``.
    """
    for run in getattr(args, CHECKS, ()):
        run(args)


def _wrapped(flag: str, value: object, fn: Callable[[], Any]) -> Any:
    """``fn()``; a ``ValueError`` or ``OSError`` it raises that does not name ``flag`` is raised
    again as a ``ValueError`` that does."""
    from graphopt.errors import InvalidArgument

    try:
        return fn()
    except InvalidArgument:
        raise
    except (ValueError, OSError) as e:
        text = str(e) if isinstance(e, ValueError) else f"{e.strerror or e}"
        raise ValueError(f"{flag} {value}: {text}") from e


def integer(low: int, high: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer in ``low..high`` (give the range in the option's help).
    argparse refuses anything else in one line naming the flag (exit 2), before any work."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"must be an integer in {low}..{high}, got {text!r}"
            ) from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be an integer in {low}..{high}, got {value}")
        return value

    parse.__name__ = "integer"
    return parse


def number(
    low: float, high: float, *, above: bool = False, below: bool = False
) -> Callable[[str], float]:
    """An argparse ``type``: a finite number in ``low..high`` (as :func:`integer`); ``above``:
    ``low`` itself refused too, ``below``: ``high`` itself refused too (the range then reads
    ``(0, 1]``, ``(0, 1)``; :func:`span` writes it for the help)."""
    shown = span(low, high, above=above, below=below)

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        inside = (low < value if above else low <= value) and (
            value < high if below else value <= high
        )
        if not inside:  # NaN too
            raise argparse.ArgumentTypeError(f"must be a number in {shown}, got {text!r}")
        return value

    parse.__name__ = "number"
    return parse


def span(low: float, high: float, *, above: bool = False, below: bool = False) -> str:
    """The range of :func:`number` as its messages write it: ``0.001..86400`` with both ends
    taken, else an interval (``(0, 1)``, ``(0, 10]``)."""
    a, b = _figure(low), _figure(high)
    if not above and not below:
        return f"{a}..{b}"
    return f"{'(' if above else '['}{a}, {b}{')' if below else ']'}"


def _figure(x: float) -> str:
    """``x`` as a range writes it: whole numbers in full (``2592000``), others as ``%g``."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"


# ---------------------------------------------------------------------- the options
def add_cluster(
    p: Any,
    *,
    help: str,
    default: str | None = None,
    keep_name: bool = False,
    required: bool = False,
    each: bool = False,
) -> None:
    """``--cluster``: a preset or cluster file, resolved once, by the check, which replaces the
    name with the :class:`~graphopt.hardware.Cluster`. ``keep_name``: the name stays in
    ``args.cluster`` (for a command that keeps it, as a training config does) and the Cluster
    goes to ``args.resolved_cluster`` (None without ``--cluster``), for the command to pass on.
    ``each``: ``--cluster each`` is taken too, every graph on its own cluster
    (:mod:`graphopt.workloads.clusters`), and left as it is."""
    p.add_argument("--cluster", default=default, required=required, help=help)

    def check_cluster(args: argparse.Namespace) -> None:
        spec = args.cluster
        if keep_name:
            args.resolved_cluster = None
        if spec is None or (each and spec == EACH):
            return
        from graphopt.hardware import get_cluster

        cluster = _wrapped("--cluster", spec, lambda: get_cluster(spec))
        if keep_name:
            args.resolved_cluster = cluster
        else:
            args.cluster = cluster

    name_flags(p, check_cluster, cluster="--cluster")


EACH = "each"
"""``--cluster each`` (:data:`graphopt.workloads.clusters.EACH`, which this module does not import
at start-up: tests/graphopt/cli/test_options.py checks that they agree)."""


def add_workers(
    p: Any, *, help: str, address_help: str = "run the tasks on this Ray cluster"
) -> None:
    """``--workers`` (default 1) and ``--ray-address``."""
    p.add_argument("--workers", type=int, default=1, help=help)
    p.add_argument("--ray-address", metavar="ADDR", help=address_help)

    def check_workers(args: argparse.Namespace) -> None:
        from graphopt.distributed import check_options

        check_options(args.workers, args.ray_address)

    name_flags(
        p, check_workers, workers="--workers", address="--ray-address", ray_address="--ray-address"
    )


def add_seed(p: Any, *, help: str, default: int | None = 0) -> None:
    """``--seed``: an integer in 0..:data:`MAX_SEED` (None: left to the command's default)."""
    p.add_argument("--seed", type=int, default=default, help=help)

    def check_seed(args: argparse.Namespace) -> None:
        if args.seed is not None and not 0 <= args.seed <= MAX_SEED:
            raise ValueError(f"--seed must be an integer in 0..{MAX_SEED}, got {args.seed}")

    name_flags(p, check_seed, seed="--seed")


def add_device(p: Any, *, help: str, default: str | None = None, ray_tasks: bool = False) -> None:
    """``--device``: where torch computes. ``ray_tasks``: the command's work goes to Ray tasks
    with ``--workers`` or ``--ray-address`` (added before), which have no GPU."""
    p.add_argument("--device", default=default, help=help)

    def check_device(args: argparse.Namespace) -> None:
        if args.device is None:
            return
        from graphopt.accelerator import check_device_name

        check_device_name(args.device)
        if ray_tasks:
            from graphopt.distributed import check_ray_device

            check_ray_device(args.device, args.workers, args.ray_address)

    name_flags(p, check_device, device="--device")


def add_budget(
    p: Any, *, help: str, default: int = 0, flag: str = "--budget", dest: str = "budget"
) -> None:
    """``--budget`` (or another budget ``flag``): simulator evaluations, an integer >= 0."""
    p.add_argument(flag, type=int, default=default, dest=dest, help=help)

    def check_budget(args: argparse.Namespace) -> None:
        from graphopt.baselines.search import check_budget

        check_budget(getattr(args, dest), dest)

    name_flags(p, check_budget, **{dest: flag})


def add_runs_dir(
    p: Any, *, help: str, default: str | None = "runs", dest: str = "runs_dir", aliases: tuple = ()
) -> None:
    """``--runs-dir``: where runs are written (None: ``runs``), a directory that can be made."""
    p.add_argument("--runs-dir", *aliases, dest=dest, default=default, help=help)

    def check_runs_dir(args: argparse.Namespace) -> None:
        from graphopt.rundir import check_output_path

        check_output_path(getattr(args, dest) or "runs", "--runs-dir", directory=True)

    name_flags(p, check_runs_dir, **{"runs_root": "--runs-dir", dest: "--runs-dir"})


def add_save_decisions(p: Any, *, help: str) -> None:
    """``--save-decisions DIR``: a directory that can be made, where every decision found is
    saved (:class:`graphopt.decisions.files.DecisionDir`)."""
    p.add_argument("--save-decisions", metavar="DIR", help=help)

    def check_save_decisions(args: argparse.Namespace) -> None:
        if args.save_decisions:
            from graphopt.rundir import check_output_path

            check_output_path(args.save_decisions, "--save-decisions", directory=True)

    name_flags(p, check_save_decisions, save_decisions="--save-decisions")


def open_save_decisions(args: argparse.Namespace) -> Any:
    """The :class:`graphopt.decisions.files.DecisionDir` of ``--save-decisions`` (checked now, so
    that one that cannot be written, or holds a bad index, fails before the slow work; created
    only when its decisions are written), or ``None`` without the flag."""
    if not args.save_decisions:
        return None
    from graphopt.decisions.files import DecisionDir

    return DecisionDir(args.save_decisions, "--save-decisions")


def add_curve_budgets(p: Any) -> None:
    """``--curve-calls`` and ``--curve-seconds``, the budgets of ``--curve``; the check replaces
    each with its parsed tuple (integers for the calls)."""
    from graphopt.eval.budgets import CALLS, SECONDS, format_budgets

    p.add_argument(
        "--curve-calls",
        default=format_budgets(CALLS),
        help="simulator-call budgets of --curve (integers >= 0)",
    )
    p.add_argument(
        "--curve-seconds", default=format_budgets(SECONDS), help="wall-clock budgets of --curve, s"
    )

    def check_curve_budgets(args: argparse.Namespace) -> None:
        from graphopt.eval.budgets import parse_budgets

        if isinstance(args.curve_calls, str):
            args.curve_calls = tuple(int(k) for k in parse_budgets(args.curve_calls, "calls"))
        if isinstance(args.curve_seconds, str):
            args.curve_seconds = parse_budgets(args.curve_seconds, "seconds")

    name_flags(p, check_curve_budgets, calls="--curve-calls", seconds="--curve-seconds")


def add_mode(p: Any, *, help: str, default: str = "greedy") -> None:
    """``--mode``: how a trained policy runs (greedy, sample:K, ...); checked without the run's
    task, which the command checks it against once the run is read."""
    p.add_argument("--mode", default=default, help=help)

    def check_mode(args: argparse.Namespace) -> None:
        from graphopt.modes import parse_mode

        parse_mode(args.mode)

    name_flags(p, check_mode, mode="--mode")
