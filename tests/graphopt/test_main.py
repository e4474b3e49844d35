"""``python -m graphopt`` (graphopt/__main__.py): Ctrl-C or SIGTERM while the command's modules
are imported is one line and exit status 130, as during the command, not a traceback and a death
by the signal (returncode -2 or -15)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(
    """
    import importlib.abc, os, runpy, sys

    class SignalOnImport(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name == {module!r}:
                os.kill(os.getpid(), {signum})
            return None

    sys.meta_path.insert(0, SignalOnImport())
    sys.argv = ["graphopt", "--help"]
    runpy.run_module("graphopt", run_name="__main__", alter_sys=True)
    """
)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("module", ["graphopt.cli.options", "graphopt.cli.sweep"])
def test_a_signal_during_the_imports_is_one_line_and_exit_130(signum, module):
    code = CHILD.format(module=module, signum=int(signum))
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert proc.returncode == 130 and proc.stderr == "graphopt: interrupted\n", proc.stderr
    assert proc.stdout == ""  # stopped before the help


def test_without_a_signal_the_command_runs():
    proc = subprocess.run(
        [sys.executable, "-m", "graphopt", "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 0 and "usage: graphopt" in proc.stdout and proc.stderr == ""


AT_EXIT = textwrap.dedent(
    """
    import atexit, os, runpy, signal, sys

    def at_exit():  # the interpreter's shutdown: a signal here changes nothing
        ignored = [signal.getsignal(s) is signal.SIG_IGN for s in (signal.SIGINT, signal.SIGTERM)]
        os.kill(os.getpid(), signal.SIGTERM)
        print("ignored" if all(ignored) else "default", file=sys.stderr)

    atexit.register(at_exit)
    sys.argv = ["graphopt", "--help"]
    runpy.run_module("graphopt", run_name="__main__", alter_sys=True)
    """
)


def test_a_signal_during_the_shutdown_after_the_command_is_ignored():
    """Once the command has ended (its outputs whole), the interpreter's shutdown takes a
    noticeable time; a signal then keeps the command's own status instead of ending the process
    silently with -15."""
    proc = subprocess.run(
        [sys.executable, "-c", AT_EXIT], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert proc.returncode == 0 and proc.stderr == "ignored\n", proc.stderr
    assert "usage: graphopt" in proc.stdout


LEFT_RUNNING = textwrap.dedent(
    """
    import atexit, os, runpy, signal, sys, threading

    atexit.register(lambda: print("exit handlers ran", file=sys.stderr))
    threading.Thread(target=threading.Event().wait).start()  # never ends: the teardown would wait
    sys.argv = ["graphopt", "--help"]

    import graphopt.cli

    def stopped():  # the command, stopped by SIGTERM
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("not reached: SIGTERM raises KeyboardInterrupt")
    graphopt.cli.main = stopped
    runpy.run_module("graphopt", run_name="__main__", alter_sys=True)
    """
)


def test_an_interrupted_command_ends_after_the_exit_handlers_without_the_teardown():
    """The exit handlers run (Ray's shutdown, staged files' clean-up) and the process ends with
    130 even where the teardown could not finish: here a thread that never ends."""
    proc = subprocess.run(
        [sys.executable, "-c", LEFT_RUNNING], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr == "graphopt: interrupted\nexit handlers ran\n", proc.stderr
