"""Reading decisions from files: a placement, or a whole decision, for one graph.

Accepted JSON forms:

- a versioned decision file (:mod:`graphopt.decisions.format`, ``docs/decisions.md``): every
  array keyed by op name, with the graph's and the cluster's fingerprints; what ``graphopt
  baselines --save-decisions`` and ``graphopt simulate --save-decisions`` write;
- a list of device indices, one per op in the graph file's op order (the order of its
  ``ops.name``, which ``graphopt graphs export`` writes): ``[0, 1, 1, 0]``;
- a mapping from op name to device index: ``{"encoder/matmul_0": 1, ...}`` (every op named);
- a decision object ``{"placement": [...], "priority": [...], "fusion": [...]}``, any array
  may be ``null`` or left out (see :meth:`graphopt.typing.Decision.to_dict`); extra descriptive keys
  ``graph``, ``cluster``, ``seed`` and ``step_time`` are allowed and checked against the graph when
  present (``graph`` must name it, ``graph_fingerprint`` must be its fingerprint). Its arrays are in graphopt's op order (topological), the order
  graphopt writes them in (``save_episode``); for a graph file that lists its ops in another order,
  give a placement as a plain list or a name-keyed map instead.

Every error names the file and the key or op at fault. An object that gives a key twice (an op
named twice) is refused in every form.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from graphopt.decisions.format import MAX_ENTRY, decision_of, is_versioned, parse_record, read_json
from graphopt.graph import CompGraph
from graphopt.typing import Decision

if TYPE_CHECKING:  # pragma: no cover
    from graphopt.hardware import Cluster

_ARRAYS = ("placement", "priority", "fusion")
_DESCRIPTIVE = ("graph", "cluster", "seed", "step_time", "graph_fingerprint")


def _unknown_key(path: Path, key: str) -> ValueError:
    """The error for a top-level key that is neither a decision array nor descriptive."""
    close = difflib.get_close_matches(key, _ARRAYS + _DESCRIPTIVE, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return ValueError(
        f"{path}: unknown top-level key {key!r}{hint} (a decision object has "
        f"{', '.join(_ARRAYS)} and optionally {', '.join(_DESCRIPTIVE)})"
    )


def _int_array(path: Path, key: str, value: Any, labels: list[str] | None = None) -> np.ndarray:
    """``value`` (a JSON list) as int64, or a ValueError naming the file, the key and the first
    entry that is not a non-negative integer (``labels`` name the entries, e.g. op names)."""
    if not isinstance(value, list):
        raise ValueError(
            f"{path}: {key} must be a list of integers (or null), got {type(value).__name__}"
        )
    for i, v in enumerate(value):
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_ENTRY:
            where = f"op {labels[i]!r}" if labels else f"{key}[{i}]"
            raise ValueError(
                f"{path}: {where} is {json.dumps(v)}; {key} entries must be integers in "
                f"[0, {MAX_ENTRY}]"
            )
    return np.asarray(value, dtype=np.int64)


def load_decision(
    path: str | Path,
    graph: CompGraph,
    num_devices: int | None = None,
    *,
    cluster: Cluster | None = None,
) -> Decision:
    """Read a decision for ``graph`` from a JSON file (forms in the module docstring).

    Args:
        path: the JSON file.
        graph: the graph the decision is for (lengths and op names are checked against it).
        num_devices: when given, device indices must be below it (the cluster's device count).
        cluster: when given, the cluster the decision is for: a versioned file's cluster
            fingerprint must be its, and ``num_devices`` defaults to its device count.

    Raises:
        ValueError: missing, truncated or unparsable file, a key given twice, a decision for
            another graph or cluster, an unknown key, entries that are not non-negative integers,
            wrong lengths, op names that are not in the graph, ops left out, devices the cluster
            does not have, or (versioned files) a fusion that breaks the rules; the message names
            the file.
    """
    path = Path(path)
    if cluster is not None and num_devices is None:
        num_devices = cluster.num_devices
    data: Any = read_json(path)
    if is_versioned(data):
        decision = decision_of(path, parse_record(path, data), graph, cluster)
    elif isinstance(data, list):
        if len(data) != graph.num_ops:
            raise ValueError(
                f"{path}: placement has {len(data)} entries but graph {graph.name!r} has "
                f"{graph.num_ops} ops; give one device per op, in the graph file's op order"
            )
        decision = Decision(placement=graph.from_file_order(_int_array(path, "placement", data)))
    elif isinstance(data, dict) and set(data) & set(_ARRAYS):
        unknown = [k for k in data if k not in _ARRAYS and k not in _DESCRIPTIVE]
        if unknown:
            raise _unknown_key(path, unknown[0])
        if "graph" in data and data["graph"] != graph.name:
            raise ValueError(
                f"{path}: the decision is for graph {data['graph']!r}, not {graph.name!r}"
            )
        fingerprint = data.get("graph_fingerprint")
        if fingerprint is not None and fingerprint != graph.fingerprint:
            raise ValueError(
                f"{path}: the decision is for graph {data.get('graph', graph.name)!r} with "
                f"fingerprint {str(fingerprint)[:12]}, not graph {graph.name!r} (fingerprint "
                f"{graph.fingerprint[:12]}): the graph has changed since it was saved"
            )
        arrays = {k: None if data.get(k) is None else _int_array(path, k, data[k]) for k in _ARRAYS}
        decision = Decision(**arrays)
    elif isinstance(data, dict):
        unknown = [name for name in data if name not in graph.index]
        if unknown and len(unknown) == len(data):  # no op named: a misspelt decision object?
            typos = [
                k
                for k in unknown
                if k not in _DESCRIPTIVE and difflib.get_close_matches(k, _ARRAYS, n=1)
            ]
            if typos:
                raise _unknown_key(path, typos[0])
        if unknown:
            raise ValueError(
                f"{path}: op {unknown[0]!r} is not in graph {graph.name!r} (an op-name map must "
                f"name ops of the graph; a decision object has keys {', '.join(_ARRAYS)})"
            )
        missing = [name for name in graph.op_names if name not in data]
        if missing:
            raise ValueError(
                f"{path}: {len(missing)} ops of {graph.name!r} have no device, e.g. {missing[0]!r}"
            )
        names = list(graph.op_names)
        decision = Decision(
            placement=_int_array(path, "placement", [data[n] for n in names], labels=names)
        )
    else:
        raise ValueError(f"{path}: expected a JSON list or object, got {type(data).__name__}")
    for name in _ARRAYS:
        value = getattr(decision, name)
        if value is not None and len(value) != graph.num_ops:
            raise ValueError(
                f"{path}: {name} has {len(value)} entries but graph {graph.name!r} has "
                f"{graph.num_ops} ops"
            )
    placement = decision.placement
    if num_devices is not None and placement is not None and len(placement):
        i = int(placement.argmax())
        if placement[i] >= num_devices:
            entry = i  # the op's position in the file: its index, or its place in the file's order
            if isinstance(data, list) and graph.file_order is not None:
                entry = int(np.flatnonzero(graph.file_order == i)[0])
            raise ValueError(
                f"{path}: placement of op {graph.op_names[i]!r} (entry {entry}) is device "
                f"{int(placement[i])}, but the cluster has {num_devices} devices (0..{num_devices - 1})"
            )
    return decision
