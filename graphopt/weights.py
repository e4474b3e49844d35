"""Reading a ``.pt`` file with ``torch.load(weights_only=True)``: tensors and plain data only.

``weights_only`` refuses any pickled object without running it; torch's own refusal is eight
lines that suggest loading without ``weights_only`` (advice not to pass on), and a file pickled
with another protocol makes torch warn first. :func:`load_pt` says why in a few words
(:func:`refusal`), in one line naming the file, and keeps torch's warning out of the output.
torch is imported when a file is read.

graphopt never unpickles a file (unpickling runs code): :func:`pickle_refusal` tells a pickle
file by its first bytes, so that a reader of ``.pt``, JSON or YAML files says so in one line
instead of the decoder's error (``Unsupported operand 149``, ``can't decode byte 0x80``).
"""

from __future__ import annotations

import pickle
import re
import warnings
from pathlib import Path
from typing import Any

TORCH_LEGACY = b"\x80\x02\x8a\nl\xfc\x9cF\xf9 j\xa8P\x19"
"""How a ``.pt`` file of torch's legacy (non-zip) format begins: a pickle, protocol 2, of
torch's magic number; ``weights_only`` reads such a file without unpickling objects."""


def pickle_protocol(path: str | Path) -> int | None:
    """The pickle protocol (2 to 5) of the file at ``path`` (its first bytes are pickle's PROTO
    opcode and the protocol), or ``None``: not a pickle, unreadable, or a legacy torch file
    (:data:`TORCH_LEGACY`)."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(TORCH_LEGACY))
    except OSError:
        return None
    if len(head) < 2 or head[:1] != pickle.PROTO or not 2 <= head[1] <= 5:
        return None
    return None if head == TORCH_LEGACY else head[1]


def pickle_refusal(path: str | Path, hint: str) -> str | None:
    """One line saying the file at ``path`` is a pickle, which graphopt never loads, then
    ``hint``, what to give instead (``"give a graph file (JSON)"``); ``None`` when it is not a
    pickle (:func:`pickle_protocol`)."""
    protocol = pickle_protocol(path)
    if protocol is None:
        return None
    return (
        f"{path} is a pickle file (protocol {protocol}), which graphopt never loads (unpickling "
        f"can run code; nothing in it was run); {hint}"
    )


def refusal(error: Exception) -> str:
    """What ``torch.load(weights_only=True)``'s ``error`` says about the file, in a few words."""
    found = re.search(r"Unsupported (global: GLOBAL [\w.]+|operand \d+)", str(error))
    if found:
        return f"it holds a pickled object: {found.group(0)}"
    if isinstance(error, pickle.UnpicklingError):
        return "it holds a pickled object"
    return "not a file written by torch.save"


def load_pt(path: str | Path, hint: str) -> Any:
    """The contents of ``path`` as ``torch.load(path, map_location="cpu", weights_only=True)``
    reads them (on the CPU).

    Raises:
        ValueError: torch refused the file (one line naming it, why, and ``hint``: what the
            caller reads instead); nothing in it was run.
    """
    import torch

    try:
        with warnings.catch_warnings():  # "Detected pickle protocol 4 ...": the refusal says it
            warnings.simplefilter("ignore", UserWarning)
            return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - torch raises many kinds on a bad or hostile file
        pickled = pickle_refusal(path, hint)
        if pickled is not None:  # nothing was run: torch refused it before any object was built
            raise ValueError(pickled) from None
        raise ValueError(
            f"{path} is not a plain weights file ({refusal(e)}); torch.load with weights_only "
            f"refused it, nothing in it was run: {hint}"
        ) from None
