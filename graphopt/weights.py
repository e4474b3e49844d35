"""Reading a ``.pt`` file with ``torch.load(weights_only=True)``: tensors and plain data only.

``weights_only`` refuses any pickled object without running it; torch's own refusal is eight
lines that suggest loading without ``weights_only`` (advice not to pass on), and a file pickled
with another protocol makes torch warn first. :func:`load_pt` says why in a few words
(:func:`refusal`), in one line naming the file, and keeps torch's warning out of the output.
torch is imported when a file is read.
"""

from __future__ import annotations

import pickle
import re
import warnings
from pathlib import Path
from typing import Any


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
        raise ValueError(
            f"{path} is not a plain weights file ({refusal(e)}); torch.load with weights_only "
            f"refused it, nothing in it was run: {hint}"
        ) from None
