"""Saving decisions: one decision file per (graph, cluster, method) in a directory, with an index.

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

Each file is a version-1 decision file (:mod:`graphopt.decisions.format`) named
``<graph>--<method>.json``, or ``<graph>--<cluster>--<method>.json`` when the directory already
holds that graph and method on another cluster (``--cluster each``); each run of characters other
than letters, digits and ``.+@_-`` is replaced by one ``_``, and a ``-2``, ``-3``... suffix is added
where two triples would still share a name. Saving into a directory that already has an index
keeps its entries; a (graph, cluster, method) saved again replaces its file and its entry.

A set of decisions is written whole or not at all (:class:`graphopt.file_set.FileSet`): the
files and the index are staged in a hidden directory and moved into ``DIR`` together by
:meth:`DecisionDir.write_index`, the index last, with Ctrl-C and SIGTERM held back; ``DIR`` is
created only then. A command that writes other files too (``--json``, plots) hands them to
:meth:`DecisionDir.write_index`, which moves them into place in the same set
(:func:`graphopt.file_set.write_together`). A command that fails or is interrupted before leaves
``DIR`` as it was (or absent), with no temporary file. Decision files are written by a thread of their own while the
next one is prepared.

An existing index is read as data, checked entry by entry (:func:`read_index`): a ``file`` that is
not a plain decision file name (``../x.json``, an absolute path) is refused, never written.

Typical use (``graphopt eval`` saving the rows of its table)::

    saved = DecisionDir(out_dir)
    for row in rows:
        name = saved.save(graph, cluster, row.method, row.decision, measurement, task=task)
    saved.write_index()
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from graphopt.decisions.format import (
    ARRAYS,
    in_file_order,
    kernel_names,
    names_in_file_order,
    record_of,
    to_json,
)
from graphopt.file_set import FileSet, write_file, write_together
from graphopt.typing import Decision

if TYPE_CHECKING:  # pragma: no cover
    from graphopt.graph import CompGraph
    from graphopt.hardware import Cluster
    from graphopt.typing import Measured

INDEX = "index.json"
"""The index's file name inside a decisions directory."""
INDEX_FORMAT = "graphopt-decision-index"
INDEX_VERSION = 1
_UNSAFE = re.compile(r"[^A-Za-z0-9.+@_-]+")
_ENCODER = json.JSONEncoder(allow_nan=False)
"""One encoder for every value (``json.dumps`` with an argument builds a new one per call)."""


class Raw(str):
    """JSON text that :func:`dumps` writes as it is."""


class GraphText:
    """What every decision file of one graph shares, encoded once (most of the time of saving a
    decision went into encoding the same op names again).

    - each op's line in a map (a line break, two spaces, its quoted name, ``: %d``), in the graph
      file's order, joined into one template: a per-op array is written with one ``%``
      formatting, a sixth of the time of encoding the map of names (475 ops: 34 against 213 us);
    - the ``kernels`` text of each fusion seen (searches and later stages share their start's).
    """

    def __init__(self, graph: CompGraph) -> None:
        self.graph = graph
        lines = ["\n  " + _ENCODER.encode(name) + ": " for name in names_in_file_order(graph)]
        self.template = "{" + ",".join(line.replace("%", "%%") + "%d" for line in lines) + "\n }"
        self._kernels: dict[bytes, Raw] = {}

    def op_map(self, values: np.ndarray) -> Raw:
        """The map text of ``values`` (int64, one per op in the graph file's order)."""
        return Raw(self.template % tuple(values.tolist()) if len(values) else "{}")

    def kernels(self, fusion: Any) -> Raw:
        """The ``kernels`` text of ``fusion`` (:func:`~graphopt.decisions.format.kernel_names`)."""
        key = b"" if fusion is None else np.asarray(fusion, dtype=np.int64).tobytes()
        text = self._kernels.get(key)
        if text is None:
            kernels = [list(k) for k in kernel_names(self.graph, fusion)]
            text = self._kernels[key] = Raw(_list_text(kernels))
        return text


def _list_text(value: list[Any]) -> str:
    """A list as :func:`dumps` writes it: a list of objects or lists an entry per line."""
    if value and isinstance(value[0], (dict, list)):
        return "[\n  " + ",\n  ".join(map(_ENCODER.encode, value)) + "\n ]"
    return _ENCODER.encode(value)


def dumps(data: dict[str, Any]) -> str:
    """``data`` as JSON text, one top-level key per line and, inside an object or list of them,
    one entry per line (an op per line in a decision's maps).

    Performance: ``json.dumps(..., indent=...)`` runs Python's pure-Python encoder, about 3 times
    slower than the C encoder used here on each value; the line breaks are put in afterwards.
    In an object they go before each ``, "``, which cannot occur inside a string (a ``"`` in a
    string is always escaped); a list of objects or lists is encoded entry by entry. A
    :class:`Raw` value is written as it is (:class:`GraphText`'s maps and kernels, the same text
    as the record's own: tests/graphopt/decisions/test_decision_files.py).
    """
    encode = _ENCODER.encode
    lines = []
    for key, value in data.items():
        if isinstance(value, Raw):
            text = str(value)
        elif isinstance(value, dict) and value:
            text = "{\n  " + encode(value)[1:-1].replace(', "', ',\n  "') + "\n }"
        elif isinstance(value, list):
            text = _list_text(value)
        else:
            text = encode(value)
        lines.append(f" {encode(key)}: {text}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def write_text_atomic(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file of the same directory renamed into
    place (:func:`graphopt.file_set.write_file`).

    Raises:
        ValueError: the file cannot be written (one line naming it and why); nothing is left.
    """
    return write_file(path, text)


def write_json_atomic(path: Path, data: dict[str, Any]) -> Path:
    """:func:`write_text_atomic` of :func:`dumps` of ``data``.

    Raises:
        ValueError: ``data`` holds a non-finite float, or the file cannot be written.
    """
    return write_text_atomic(path, dumps(data))


def file_name(graph: str, method: str, cluster: str | None = None) -> str:
    """The file name of a (graph, method) pair, with the cluster's name between them when given,
    before any collision suffix."""

    def safe(text: str) -> str:
        return _UNSAFE.sub("_", text).strip("._") or "_"

    middle = "" if cluster is None else f"{safe(cluster)}--"
    return f"{safe(graph)}--{middle}{safe(method)}.json"


_FILE = re.compile(r"[A-Za-z0-9+@_-][A-Za-z0-9.+@_-]*\.json")
"""What :func:`file_name` gives (a suffix included): the only file names an index may hold."""


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text} is out of range")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def read_index(path: str | Path) -> list[dict[str, Any]]:
    """The entries of the decision index ``path``, each checked as data: never a path to follow.

    Every entry is an object whose ``file`` is a file name :func:`file_name` could have given
    (letters, digits and ``.+@_-``, ending ``.json``, not the index): a name with a ``/``, a
    ``..`` or an absolute path could make a later save write outside the directory. ``graph``
    and ``method`` are strings, ``cluster`` a string or null.

    Raises:
        ValueError: one line naming the file and, for a bad entry, its position and key; the fix
            is to remove the index (or the entry) or to choose another directory.
    """
    path = Path(path)
    fix = "remove it or choose another directory"
    try:
        data = json.loads(
            path.read_text(encoding="utf-8"), parse_float=_finite, parse_constant=_no_constant
        )
    except (OSError, ValueError, RecursionError) as e:
        reason = (e.strerror or e) if isinstance(e, OSError) else e
        if isinstance(e, RecursionError):
            reason = "nested too deeply"
        raise ValueError(f"{path}: not a readable decision index ({reason}); {fix}") from None
    if not isinstance(data, dict) or data.get("format") != INDEX_FORMAT:
        raise ValueError(f"{path}: not a decision index (format {INDEX_FORMAT!r}); {fix}")
    entries = data.get("decisions", [])
    if not isinstance(entries, list):
        raise ValueError(
            f"{path}: 'decisions' must be a list of entries, got {type(entries).__name__}; {fix}"
        )
    for k, entry in enumerate(entries):
        where = f"{path}: entry {k} of 'decisions'"
        if not isinstance(entry, dict):
            raise ValueError(f"{where} must be an object, got {type(entry).__name__}; {fix}")
        name = entry.get("file")
        if not isinstance(name, str) or not _FILE.fullmatch(name) or name == INDEX:
            raise ValueError(
                f"{where}: 'file' {name!r} is not a decision file name inside the directory "
                f"(letters, digits and '.+@_-', ending .json; no folder); {fix}"
            )
        for key in ("graph", "method"):
            if not isinstance(entry.get(key), str):
                raise ValueError(
                    f"{where}: {key!r} must be a string, got {entry.get(key)!r}; {fix}"
                )
        if not isinstance(entry.get("cluster"), (str, type(None))):
            raise ValueError(
                f"{where}: 'cluster' must be a string, got {entry['cluster']!r}; {fix}"
            )
    return entries


class DecisionDir:
    """A directory of saved decisions and its index (module docstring).

    Nothing is created before :meth:`write_index`: the decisions are staged
    (:class:`graphopt.file_set.FileSet`) and moved into the directory together with the index,
    so a command that fails or is interrupted before leaves the directory as it was.

    Args:
        path: the directory; created (with its parents) by :meth:`write_index` if missing.
        what: how error messages name it (a command line gives its flag).

    Raises:
        ValueError: ``path`` is a file, cannot be created, is not writable, or holds an
            ``index.json`` that is not a decision index or has a bad entry (:func:`read_index`).
    """

    def __init__(self, path: str | Path, what: str = "decisions directory") -> None:
        self._set = FileSet(path, what, last=(INDEX,))
        self.path = self._set.path
        index = self.path / INDEX
        earlier = read_index(index) if os.path.lexists(index) else []
        self._entries = {e["file"]: e for e in earlier}
        self._files = {
            (e.get("graph"), e.get("cluster"), e.get("method")): f for f, e in self._entries.items()
        }
        self._texts: dict[str, GraphText] = {}

    @property
    def entries(self) -> list[dict[str, Any]]:
        """The index's entries: those read from an earlier run's index, then those saved."""
        return list(self._entries.values())

    def _name_for(self, graph: str, cluster: str, method: str) -> str:
        """The file of (graph, cluster, method): the one it already has, else a free name (the
        cluster's name in it when the pair is already saved for another cluster)."""
        name = self._files.get((graph, cluster, method))
        if name is not None:
            return name
        other_cluster = any(g == graph and m == method for g, _, m in self._files)
        name = base = file_name(graph, method, cluster if other_cluster else None)
        k = 1
        while name in self._entries or name == INDEX:
            k += 1
            name = f"{base.removesuffix('.json')}-{k}.json"
        self._files[graph, cluster, method] = name
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
        the index; returns its file name inside the directory. The file is staged: it is in the
        directory once :meth:`write_index` has moved the set there.

        The file is written by a thread of its own: a failure to write it is raised by a later
        :meth:`save`, or at the latest by :meth:`flush` / :meth:`write_index`.

        Raises:
            ValueError: the decision does not fit the graph, or an earlier file could not be
                written (the staged set is then given up).
        """
        record = record_of(  # what describes the decision; its arrays are written from `text`
            graph, cluster, Decision(), method=method, measurement=measurement, task=task, seed=seed
        )
        text = self._texts.get(graph.fingerprint)
        if text is None:
            text = self._texts[graph.fingerprint] = GraphText(graph)
        data: dict[str, Any] = to_json(record)
        for key in ARRAYS:
            values = getattr(decision, key)
            if values is not None:
                data[key] = text.op_map(in_file_order(graph, values, key, method))
        data["kernels"] = text.kernels(decision.fusion)
        name = self._name_for(graph.name, cluster.name, method)
        self._set.write(name, dumps(data))
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
        self._entries[name] = entry
        return name

    def flush(self) -> None:
        """Wait until every saved decision is written (staged, not yet in the directory).

        Raises:
            ValueError: a file could not be written (the first such); the set is given up.
        """
        self._set.flush()

    def write_index(self, with_files: Mapping[Path, str | bytes] | None = None) -> Path:
        """Write ``index.json`` (every entry, those of earlier runs included) and move it into
        the directory with every decision saved (:meth:`graphopt.file_set.FileSet.commit`, the
        index last); returns its path. ``with_files``: other files of the command (each path
        with its text or bytes, anywhere), moved into place in the same set, all of them and
        the decisions or nothing new (:func:`graphopt.file_set.write_together`).

        Raises:
            ValueError: a decision file, the index or one of ``with_files`` cannot be written,
                or one of ``with_files`` is a file of the set (the index, a decision); nothing
                new is left (see :func:`~graphopt.file_set.write_together` for a set whose
                moves fail in a later directory).
        """
        data = {"format": INDEX_FORMAT, "version": INDEX_VERSION, "decisions": self.entries}
        self._set.write(INDEX, dumps(data))
        if with_files:
            write_together(with_files, staged=(self._set,))
        else:
            self._set.commit()
        return self.path / INDEX

    def discard(self) -> None:
        """Give up every decision saved since the last :meth:`write_index`: none is written."""
        self._set.discard()


def write_outputs(files: Mapping[Path, str | bytes], saved: DecisionDir | None) -> Path | None:
    """Write a command's ``files`` (each path with its text or bytes) and, with ``saved``, the
    decisions staged in it and its index, as one set: all of them or nothing new
    (:meth:`DecisionDir.write_index`, :func:`graphopt.file_set.write_together`); returns the
    index's path, or ``None`` without ``saved``.

    Raises:
        ValueError: see :func:`graphopt.file_set.write_together`.
    """
    if saved is not None:
        return saved.write_index(with_files=files)
    write_together(files)
    return None


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
