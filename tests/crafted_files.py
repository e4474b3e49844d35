"""Hostile model files for the security tests (a plain module: unique name, not a conftest).

Each file carries a pickled object whose ``__reduce__`` writes a marker file when it is unpickled:
a test that loads it through graphopt and then finds no marker proves that nothing in it ran.
:func:`assert_payload_runs` checks that the payload is live (it does write the marker when
unpickled the unsafe way), so an absent marker means something.
"""

from __future__ import annotations

import base64
import contextlib
import json
import pickle
import zipfile
from pathlib import Path
from typing import Any

import torch


class Payload:
    """Unpickling this runs ``exec`` of code that writes ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return exec, (f"open({self.marker!r}, 'w').write('code ran')",)


def crafted_sb3_zip(path: Path, marker: Path) -> Path:
    """A zip laid out like a Stable-Baselines3 model (``data`` JSON with base64 cloudpickle
    fields, ``policy.pth``, version file) whose pickled ``policy_class`` writes ``marker``."""
    payload = base64.b64encode(pickle.dumps(Payload(marker))).decode()
    data = {
        "policy_class": {":type:": "<class 'abc.ABCMeta'>", ":serialized:": payload},
        "num_timesteps": 16,
        "n_envs": 1,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("data", json.dumps(data))
        z.writestr("policy.pth", b"")
        z.writestr("pytorch_variables.pth", b"")
        z.writestr("_stable_baselines3_version", "2.9.2")
    return path


def crafted_pt(path: Path, marker: Path) -> Path:
    """A ``torch.save`` file shaped like a graphopt model file, one entry of which is a pickled
    object that writes ``marker`` when unpickled."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(
        {
            "format": "graphopt-ppo-weights",
            "version": 1,
            "policy": {"w": torch.zeros(2)},
            "optimizer": Payload(marker),
            "num_timesteps": 16,
            "n_updates": 1,
        },
        path,
    )
    return path


def crafted_pickle(path: Path, marker: Path) -> Path:
    """A plain pickle (not torch's zip format) of the payload."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(Payload(marker)))
    return path


def assert_payload_runs(tmp: Path) -> None:
    """The payloads are live: unpickled the unsafe way (SB3's zip loader, ``torch.load`` without
    ``weights_only``), each writes its marker."""
    from stable_baselines3.common.save_util import load_from_zip_file

    zip_marker = tmp / "zip-ran"
    with contextlib.suppress(Exception):  # the payload runs before anything else can fail
        load_from_zip_file(crafted_sb3_zip(tmp / "live.zip", zip_marker))
    assert zip_marker.exists()
    pt_marker = tmp / "pt-ran"
    torch.load(crafted_pt(tmp / "live.pt", pt_marker), weights_only=False)
    assert pt_marker.exists()


def crafted_run(
    root: Path, marker: Path, kind: str, status: str, timesteps: int, pt_files: tuple[str, ...]
) -> Path:
    """A placement run directory (``tests/tiny_runs.py`` config, ``state.json`` with ``status``
    and ``timesteps`` of 32) whose model files write ``marker`` when unpickled: SB3 zips in place
    of every model (a run as an older version wrote it), and for ``kind == "pt"`` also the
    graphopt-named ``pt_files``."""
    from tiny_runs import tiny_config

    from graphopt import rundir

    run = rundir.new_run_dir(root, "placement", kind)
    tiny_config().save(run / rundir.CONFIG_FILE)
    rundir.write_state(run, status=status, timesteps=timesteps, total_timesteps=32)
    for name in rundir.LEGACY_MODELS:
        crafted_sb3_zip(run / name, marker)
    if kind == "pt":
        for name in pt_files:
            crafted_pt(run / name, marker)
    return run
