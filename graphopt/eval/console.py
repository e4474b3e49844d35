"""The console every command prints through: full-width tables when the output is piped."""

from __future__ import annotations

from rich.console import Console

PIPE_WIDTH = 1000
"""Console width when stdout is not a terminal (a pipe, a CI log): wide enough that no table
column is ever cut; rich would otherwise assume 80 columns and truncate numbers (``1,297.…``)."""


def make_console() -> Console:
    """A rich console for command output: the terminal's width on a terminal, else
    :data:`PIPE_WIDTH` (``COLUMNS``, when set wider, wins)."""
    console = Console()
    if console.is_terminal:
        return console
    return Console(width=max(PIPE_WIDTH, console.width))
