"""Saving decisions: one decision file per (graph, method) in a directory, with an index.

``DIR/index.json`` lists what the directory holds::

    {
      "format": "graphopt-decision-index",
      "version": 1,
      "decisions": [
        {"graph": "rnnlm-tiny", "method": "heft", "file": "rnnlm-tiny--heft.json",
         "step_time": 0.0011574, "valid": true, "task": "placement", "seed": 0,
         "graph_fingerprint": "3f2a...", "cluster": "v100-nvlink-4", "cluster_fingerprint": "9c41..."},
        ...
      ]
    }

Each file is a version-1 decision file (:mod:`graphopt.decision_format`) named
``<graph>--<method>.json`` (characters other than letters, digits and ``.+@_-`` replaced by
``_``; a ``-2``, ``-3``... suffix where two pairs would share a name). Saving into a directory that
already has an index keeps its entries; a pair saved again replaces its file and its entry.

Every file, the index included, is written whole to a temporary file in the same directory and
renamed into place (``os.replace``, atomic on POSIX): a reader sees the old file or the new one,
and an error leaves no partial file behind.

Typical use (``graphopt eval`` saving the rows of its table)::

    saved = DecisionDir(out_dir)
    for row in rows:
        name = saved.save(graph, cluster, row.method, row.decision, measurement, task=task)
    saved.write_index()
"""

from __future__ import annotations

import json
import os
import re
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphopt.decision_format import record_of, to_json

if TYPE_CHECKING:  # pragma: no cover
    from graphopt.graph import CompGraph
    from graphopt.hardware import Cluster
    from graphopt.typing import Decision, Measured

INDEX = "index.json"
"""The index's file name inside a decisions directory."""
INDEX_FORMAT = "graphopt-decision-index"
INDEX_VERSION = 1
_UNSAFE = re.compile(r"[^A-Za-z0-9.+@_-]+")


def write_json_atomic(path: Path, data: Any) -> Path:
    """Write ``data`` as JSON to ``path`` through a temporary file of the same directory renamed
    into place (module docstring).

    Raises:
        ValueError: the file cannot be written (one line naming it and why); nothing is left.
    """
    text = json.dumps(data, indent=1, allow_nan=False)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise ValueError(f"cannot write {str(path)!r}: {e.strerror or e}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def file_name(graph: str, method: str) -> str:
    """The file name of a (graph, method) pair, before any collision suffix."""

    def safe(text: str) -> str:
        return _UNSAFE.sub("_", text).strip("._") or "_"

    return f"{safe(graph)}--{safe(method)}.json"


class DecisionDir:
    """A directory of saved decisions and its index (module docstring).

    Args:
        path: the directory; created (with its parents) if missing.
        what: how error messages name it (a command-line flag).

    Raises:
        ValueError: ``path`` is a file, cannot be created, is not writable, or holds an
            ``index.json`` that is not a decision index.
    """

    def __init__(self, path: str | Path, what: str = "--save-decisions") -> None:
        self.path = Path(path)
        shown = f"{what} {str(self.path)!r}"
        if self.path.exists() and not self.path.is_dir():
            raise ValueError(f"{shown} is a file, not a directory; give a directory")
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ValueError(f"{shown}: cannot create the directory: {e.strerror or e}") from None
        probe = self.path / f".probe.{uuid.uuid4().hex[:8]}.tmp"
        try:  # what can be created here (os.access answers yes to root on read-only mounts)
            with open(probe, "x"):
                pass
            probe.unlink()
        except OSError as e:
            raise ValueError(
                f"{shown}: the directory is not writable ({e.strerror or e}); give another "
                "directory"
            ) from None
        self.entries: list[dict[str, Any]] = self._read_index()

    def _read_index(self) -> list[dict[str, Any]]:
        index = self.path / INDEX
        if not index.exists():
            return []
        try:
            data = json.loads(index.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ValueError(
                f"{index}: not a readable decision index ({e}); remove it or choose another "
                "directory"
            ) from None
        if not isinstance(data, dict) or data.get("format") != INDEX_FORMAT:
            raise ValueError(
                f"{index}: not a decision index (format {INDEX_FORMAT!r}); remove it or choose "
                "another directory"
            )
        return [e for e in data.get("decisions", []) if isinstance(e, dict)]

    def _name_for(self, graph: str, method: str) -> str:
        """The file of (graph, method): the one it already has, else a free name."""
        for e in self.entries:
            if e.get("graph") == graph and e.get("method") == method:
                return str(e["file"])
        taken = {e.get("file") for e in self.entries} | {INDEX}
        name = base = file_name(graph, method)
        k = 1
        while name in taken:
            k += 1
            name = f"{base.removesuffix('.json')}-{k}.json"
        return name

    def save(
        self,
        graph: CompGraph,
        cluster: Cluster,
        method: str,
        decision: Decision,
        measurement: Measured | None = None,
        *,
        task: str | None = None,
        seed: int | None = None,
    ) -> str:
        """Save ``decision`` (``method``'s on ``graph``, measured as ``measurement``) and add it to
        the index (written by :meth:`write_index`); returns its file name inside the directory.

        Raises:
            ValueError: the file cannot be written.
        """
        record = record_of(
            graph, cluster, decision, method=method, measurement=measurement, task=task, seed=seed
        )
        name = self._name_for(graph.name, method)
        write_json_atomic(self.path / name, to_json(record))
        entry = {
            "graph": graph.name,
            "method": method,
            "file": name,
            "step_time": record.step_time,
            "valid": record.valid,
            "task": task,
            "seed": seed,
            "graph_fingerprint": record.graph_fingerprint,
            "cluster": record.cluster,
            "cluster_fingerprint": record.cluster_fingerprint,
        }
        self.entries = [e for e in self.entries if e.get("file") != name] + [entry]
        return name

    def write_index(self) -> Path:
        """Write ``index.json`` (every entry, those of earlier runs included); returns its path.

        Raises:
            ValueError: it cannot be written.
        """
        data = {"format": INDEX_FORMAT, "version": INDEX_VERSION, "decisions": self.entries}
        return write_json_atomic(self.path / INDEX, data)


def save_decision(
    out_dir: str | Path,
    graph: CompGraph,
    cluster: Cluster,
    method: str,
    decision: Decision,
    measurement: Measured | None = None,
    *,
    task: str | None = None,
    seed: int | None = None,
) -> Path:
    """Save one decision into ``out_dir`` and update its index; returns the decision file's path.
    (For many decisions, one :class:`DecisionDir` writes the index once.)

    Raises:
        ValueError: see :class:`DecisionDir` and :meth:`DecisionDir.save`.
    """
    saved = DecisionDir(out_dir)
    name = saved.save(graph, cluster, method, decision, measurement, task=task, seed=seed)
    saved.write_index()
    return saved.path / name
