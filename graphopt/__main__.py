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
"""

import sys

from graphopt.signals import ignore_until_exit, interrupted, interrupts, received


def run() -> int:
    """:func:`graphopt.cli.main`, imported under :func:`~graphopt.signals.interrupts`."""
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


if __name__ == "__main__":
    sys.exit(run())
