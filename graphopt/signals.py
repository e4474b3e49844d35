"""Ctrl-C and SIGTERM around writes: SIGTERM as Ctrl-C, and blocks that finish before either is
handled.

A command that writes files must end, when stopped, with its output either complete or unchanged.
SIGTERM's default action (``kill``, a batch scheduler's preemption, ``docker stop``) ends the
process at once, without the ``finally`` blocks that remove a half-written set; inside
:func:`interrupts` it raises ``KeyboardInterrupt`` as Ctrl-C does, so the same clean-up runs for
both (``graphopt`` runs every command inside it, :func:`graphopt.cli.main`), and
:func:`received` tells an interrupt that surfaced as another error. The few
renames that put a finished set into place run inside :func:`held`, so neither signal stops them
half-way: it is handled once they are done.

Signals are handled in the main thread only: elsewhere both functions run the block as it is.
Standard library only (any layer may use it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

INTERRUPTED = 130
"""Exit status after Ctrl-C or SIGTERM (128 + SIGINT, as shells report a Ctrl-C)."""
HELD = (signal.SIGINT, signal.SIGTERM)
"""The signals :func:`held` holds back."""


_RECEIVED: list[int] = []
"""The signals :func:`interrupts` turned into ``KeyboardInterrupt`` since its block began."""


def _interrupt(signum: int, frame: Any) -> None:
    _RECEIVED.append(signum)
    raise KeyboardInterrupt


_interrupt.graceful_stop = True  # type: ignore[attr-defined]
""":func:`graphopt.rundir.graceful_stop` takes SIGTERM over from this handler (a stop request
instead of an exception) as it does from the default action."""


@contextlib.contextmanager
def interrupts() -> Iterator[None]:
    """Run the block with SIGTERM raising ``KeyboardInterrupt`` as Ctrl-C does, both remembered
    (:func:`received`), then put the previous handlers back (a handler the block set for good,
    such as :func:`ignore_until_exit`'s, stays). A SIGTERM that is ignored or has a handler of
    its own, and a Ctrl-C that is not Python's default, are left alone."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _RECEIVED.clear()
    previous: dict[int, Any] = {}
    try:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            previous[signal.SIGINT] = signal.signal(signal.SIGINT, _interrupt)
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            previous[signal.SIGTERM] = signal.signal(signal.SIGTERM, _interrupt)
        yield
    finally:
        for signum, handler in previous.items():
            if signal.getsignal(signum) is _interrupt:
                signal.signal(signum, handler)


def ignore_until_exit() -> None:
    """From here to the process's exit, ignore Ctrl-C and SIGTERM: the command has ended and its
    outputs are whole, and the interpreter's shutdown takes a noticeable time (a fraction of a
    second after torch), during which either signal's default action would end the process with
    no message and a status other than the command's. Main thread only (elsewhere nothing)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in HELD:
        signal.signal(signum, signal.SIG_IGN)


def interrupted(prog: str = "graphopt") -> int:
    """The end of a command stopped by Ctrl-C or SIGTERM: one line on stderr,
    :data:`INTERRUPTED`."""
    print(f"{prog}: interrupted", file=sys.stderr)
    return INTERRUPTED


def received() -> bool:
    """Whether a Ctrl-C or SIGTERM came inside the current (or last) :func:`interrupts` block:
    a ``KeyboardInterrupt`` raised during an import or inside a C extension can surface as
    another error (an ``ImportError``, numba's ``SystemError``) that does not name it."""
    return bool(_RECEIVED)


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Hold Ctrl-C (SIGINT) and SIGTERM back until the block is done, then hand each one that
    came to the handler that was in place: a Python handler is called (the default one raises
    ``KeyboardInterrupt``), SIGTERM's default action ends the process, an ignored signal stays
    ignored. Keep the block short: a user's Ctrl-C waits for it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous: dict[int, Any] = {}
    try:
        for signum in HELD:
            handler = signal.getsignal(signum)
            if callable(handler) or (signum == signal.SIGTERM and handler == signal.SIG_DFL):
                previous[signum] = signal.signal(signum, lambda s, frame: caught.append(s))
        yield
    finally:  # a signal that came is handed on even when the block failed: none is lost
        for held_signal, handler in previous.items():
            signal.signal(held_signal, handler)
        for came in dict.fromkeys(caught):  # each once, in the order they came
            handler = previous[came]
            if callable(handler):
                handler(came, None)
            elif handler == signal.SIG_DFL:  # SIGTERM's default: end the process as it would
                os.kill(os.getpid(), came)
