"""Where torch computes: ``device`` ``auto|cpu|cuda[:N]``, one setting for training,
evaluation and the cost model.

:func:`resolve_device` turns the setting into a torch device name: ``auto`` is ``cuda`` when
torch sees a CUDA device, else ``cpu``; ``cpu`` is always there; ``cuda`` / ``cuda:N`` are
refused on a machine without that device, with a one-line error naming the fix
(:class:`~graphopt.errors.InvalidArgument`: ``device``, or the flag that gave it). torch is
imported only when the setting needs it (``auto`` or ``cuda``).
"""

from __future__ import annotations

import re

from graphopt.errors import InvalidArgument

DEVICES = ("auto", "cpu", "cuda")
_PATTERN = re.compile(r"auto|cpu|cuda(:[0-9]+)?")


def check_device_name(name: object) -> str:
    """``name`` if it is ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.

    Raises:
        ValueError: anything else (one line).
    """
    if not isinstance(name, str) or not _PATTERN.fullmatch(name):
        raise InvalidArgument(
            "{device} {got!r} is unknown; use auto, cpu, cuda or cuda:N", got=name
        )
    return name


def resolve_device(name: str) -> str:
    """The torch device ``name`` stands for on this machine (module docstring).

    Raises:
        ValueError: an unknown name, or a CUDA device this machine does not have.
    """
    check_device_name(name)
    if name == "cpu":
        return "cpu"
    import torch

    available = torch.cuda.is_available()
    if name == "auto":
        return "cuda" if available else "cpu"
    count = torch.cuda.device_count() if available else 0
    index = int(name.split(":")[1]) if ":" in name else 0
    if index >= count:
        why = (
            f"this machine has {count} CUDA device(s)"
            if available
            else f"torch {torch.__version__} sees no CUDA device here"
        )
        raise InvalidArgument(
            "{device} {got}: {why}; use {device} cpu (or auto)", got=name, why=why
        )
    return name
