"""SIGTERM as Ctrl-C, and blocks that hold both back until they are done (graphopt.signals)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from graphopt.signals import held, ignore_until_exit, interrupts, received


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_either_signal_raises_keyboard_interrupt_inside_the_block_and_is_remembered(signum):
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    assert before == (signal.SIG_DFL, signal.default_int_handler)  # the test process's own
    with pytest.raises(KeyboardInterrupt), interrupts():
        assert not received()
        os.kill(os.getpid(), signum)
        signal.pause()  # pragma: no cover - the handler raises first
    assert received()
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_handlers_set_for_good_inside_the_block_stay():
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    try:
        with interrupts():
            ignore_until_exit()
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, before[0])
        signal.signal(signal.SIGINT, before[1])


def test_a_sigterm_handler_of_its_own_is_left_alone():
    seen = []
    previous = signal.signal(signal.SIGTERM, lambda s, f: seen.append(s))
    try:
        with interrupts():
            os.kill(os.getpid(), signal.SIGTERM)
        assert seen == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_held_signals_are_handed_on_once_the_block_is_done(signum):
    done = []
    with pytest.raises(KeyboardInterrupt), interrupts():
        with held():
            os.kill(os.getpid(), signum)
            os.kill(os.getpid(), signum)  # twice: handed on once
            done.append("block")
        done.append("after")  # pragma: no cover - the handed-on signal raised
    assert done == ["block"]
    assert signal.getsignal(signal.SIGINT) == signal.default_int_handler


def test_a_signal_held_during_a_failing_block_is_not_lost():
    with pytest.raises(KeyboardInterrupt) as info, held():
        os.kill(os.getpid(), signal.SIGINT)
        raise ValueError("failed")
    assert isinstance(info.value.__context__, ValueError)


def test_sigterm_held_under_its_default_action_ends_the_process_after_the_block():
    code = (
        "import os, signal\n"
        "from graphopt.signals import held\n"
        "with held():\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    print('block done', flush=True)\n"
        "print('never')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGTERM and proc.stdout == "block done\n"
