"""``python -m graphopt`` and the installed ``graphopt`` script (:func:`run`): the ``graphopt``
command (:func:`graphopt.cli.main`).

Ctrl-C or SIGTERM while the command's modules are still being imported ends it as during the
command: one line, exit status 130 (:func:`graphopt.signals.interrupted`), where Python would
print a traceback and die by the signal. The command runs inside the same
:func:`graphopt.signals.interrupts` block, whose handlers :func:`graphopt.cli.main` keeps, so no
signal falls between the two; nothing is imported for this besides :mod:`graphopt.signals`, which
the command imports anyway. Once the command has ended, both signals are ignored until the process
exits (:func:`graphopt.signals.ignore_until_exit`): one during the interpreter's shutdown would
otherwise end it silently with another status, its outputs already whole.

A command that was interrupted ends without the interpreter's teardown (:func:`_end_interrupted`):
the interrupt can land anywhere, between a C extension's calls included (torch's, numba's), and the
teardown of modules left so could abort the process ("Fatal Python error", status -6) after its
one line, its outputs already whole or removed.
"""

import atexit
import contextlib
import os
import sys

from graphopt.signals import INTERRUPTED, ignore_until_exit, interrupted, interrupts, received


def run() -> int:
    """:func:`graphopt.cli.main`, imported under :func:`~graphopt.signals.interrupts`; an
    interrupted command ends the process here (:func:`_end_interrupted`)."""
    status = _command()
    if status == INTERRUPTED:
        _end_interrupted()
    return status


def _command() -> int:
    with interrupts():
        try:
            try:
                from graphopt.cli import main
            except KeyboardInterrupt:
                return interrupted()
            except Exception:
                if received():  # a Ctrl-C that surfaced as another error of the import
                    return interrupted()
                raise
            try:
                return main()
            except KeyboardInterrupt:  # after the command's own handling: its last lines
                return interrupted()
        finally:
            ignore_until_exit()


def _end_interrupted() -> None:
    """End the process with :data:`~graphopt.signals.INTERRUPTED` once the exit handlers have run
    (Ray's shutdown, staged files' clean-up, multiprocessing's children) and the standard streams
    are flushed, skipping the interpreter's teardown of modules and threads."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more to say
            stream.flush()
    os._exit(INTERRUPTED)


if __name__ == "__main__":
    sys.exit(run())
