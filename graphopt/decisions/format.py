"""The decision file, version 1: one decision for one graph on one cluster, every array keyed by
op name (the user's guide is ``docs/decisions.md``).

A decision file is a JSON object::

    {
      "format": "graphopt-decision",
      "version": 1,
      "graph": "rnnlm-tiny",
      "graph_fingerprint": "3f2a...",      CompGraph.fingerprint (SHA-256 of the graph's content)
      "cluster": "v100-nvlink-4",
      "cluster_fingerprint": "9c41...",    Cluster.fingerprint
      "devices": ["gpu0", "gpu1", "gpu2", "gpu3"],
      "method": "annealing@256",
      "task": "joint",                     or null
      "seed": 0,                           or null
      "step_time": 0.0011574,              seconds, as measured when saved; null when not finite
      "valid": true,
      "reason": "",
      "placement": {"op name": 0, ...},    device index per op; null: every op on device 0
      "priority": {"op name": 3, ...},     level per op (lowest first); null: all 0
      "fusion": {"op name": 1, ...},       1 fuses the op into its consumers; null: no fusion
      "kernels": [["op a", "op b"], ...]   the fused kernels of 2+ ops, derived from fusion
    }

The maps list the ops in the graph file's order (:attr:`graphopt.graph.CompGraph.file_order`).
Reading a file for a graph (:func:`decision_of`) checks, in this order: the graph's and the
cluster's fingerprints (:func:`decision_by_names`: all but these), that every map names each op of
the graph exactly once and nothing else, the devices, the fusion rules a-d
(:mod:`graphopt.sim.fusion_rules`) and that ``kernels`` is what the fusion bits make. Every
error is one line that starts with the file's path.

Reading without a graph (:func:`read_record`: for ``graphopt decision diff`` and ``export``) checks
the structure only: keys, types, ranges and duplicate keys.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from graphopt.errors import InvalidArgument
from graphopt.graph import CompGraph
from graphopt.typing import Decision, DecisionRecord
from graphopt.weights import pickle_refusal

if TYPE_CHECKING:  # pragma: no cover
    from graphopt.hardware import Cluster
    from graphopt.typing import Measured

FORMAT = "graphopt-decision"
"""The ``format`` of a decision file."""
VERSION = 1
"""The version written and read."""
MAX_ENTRY = 2**31 - 1
"""The largest device, priority or fusion entry a decision file may hold (the simulator's int32
indices)."""

ARRAYS = ("placement", "priority", "fusion")
_REQUIRED = ("format", "version", "graph", "graph_fingerprint", "cluster", "cluster_fingerprint")
_OPTIONAL = ("devices", "method", "task", "seed", "step_time", "valid", "reason", "kernels")
_KEYS = _REQUIRED + _OPTIONAL + ARRAYS
_WHAT = {"placement": "device", "priority": "priority", "fusion": "fusion bit"}


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json``'s ``object_pairs_hook``: the object as a dict, refusing a key given twice (which
    ``json`` would otherwise resolve silently, keeping the last)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def read_json(path: str | Path) -> Any:
    """The JSON content of a decision file, refusing keys given twice in one object.

    Raises:
        ValueError: the file is missing, a directory, unreadable, not UTF-8, not valid JSON (a
            file that ends early is called truncated), nested too deeply, or holds a key twice;
            the message starts with the path.
    """
    path = Path(path)
    if not path.exists():
        raise ValueError(f"decision file {str(path)!r} does not exist")
    if not path.is_file():
        raise ValueError(f"decision file {str(path)!r} is not a file (a directory?)")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        pickled = pickle_refusal(path, "give a decision file (JSON)")
        if pickled is not None:
            raise ValueError(pickled) from None
        raise ValueError(f"{path}: not valid JSON: {e}") from e
    except OSError as e:
        raise ValueError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except _DuplicateKey as e:
        raise ValueError(
            f"{path}: key {e.key!r} is given twice in one object (a duplicate op?); keep one"
        ) from None
    except json.JSONDecodeError as e:
        at_end = e.pos >= len(text.rstrip()) or e.msg.startswith("Unterminated string")
        if at_end and _ends_early(text):
            raise ValueError(
                f"{path}: not valid JSON: the file ends early (truncated?): {e.msg} (line "
                f"{e.lineno}); write it again whole"
            ) from None
        raise ValueError(f"{path}: not valid JSON: {e}") from e
    except RecursionError:
        raise ValueError(f"{path}: not a decision: JSON nested too deeply") from None


def _ends_early(text: str) -> bool:
    """Whether ``text`` stops inside a string, an object or a list (a truncated JSON file)."""
    depth, in_string, escaped = 0, False, False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
    return in_string or depth > 0


def is_versioned(data: Any) -> bool:
    """Whether ``data`` (a file's JSON) claims to be a versioned decision file (it has a string
    ``format``; an op-name map has integer values only)."""
    return isinstance(data, dict) and isinstance(data.get("format"), str)


# ---------------------------------------------------------------------------- writing


def kernel_groups(graph: CompGraph, fusion: Any) -> list[tuple[int, ...]]:
    """The fused kernels of two or more ops that ``fusion`` makes (rule 1 of :mod:`graphopt.sim`:
    an op whose bit is 1 is merged with each of its consumers), each its op indices ascending,
    ordered by their last (root) op."""
    fused = np.asarray(fusion)[graph.edge_src] != 0
    src, dst = graph.edge_src[fused].tolist(), graph.edge_dst[fused].tolist()
    parent: dict[int, int] = {}

    def find(i: int) -> int:
        root = i
        while parent.setdefault(root, root) != root:
            root = parent[root]
        while parent[i] != root:  # path compression
            parent[i], i = root, parent[i]
        return root

    for s, d in zip(src, dst, strict=True):
        a, b = find(s), find(d)
        if a != b:
            parent[min(a, b)] = max(a, b)
    groups: dict[int, list[int]] = {}
    for i in parent:
        groups.setdefault(find(i), []).append(i)
    return [tuple(sorted(groups[root])) for root in sorted(groups) if len(groups[root]) > 1]


def names_in_file_order(graph: CompGraph) -> tuple[str, ...]:
    """The graph's op names in the order its file lists them (the order of a decision's maps)."""
    order = graph.file_order
    return graph.op_names if order is None else tuple(graph.op_names[i] for i in order.tolist())


def in_file_order(graph: CompGraph, values: Any, key: str, who: str = "") -> np.ndarray:
    """``values`` (one per op, graphopt's op order) as int64 in the graph file's op order.

    Raises:
        ValueError: ``values`` does not hold one entry per op (``key`` and ``who`` name it).
    """
    array = np.asarray(values, dtype=np.int64)
    if array.shape != (graph.num_ops,):
        raise ValueError(
            f"{who or 'decision'}: {key} has {array.size} entries but graph {graph.name!r} has "
            f"{graph.num_ops} ops"
        )
    return array if graph.file_order is None else array[graph.file_order]


def kernel_names(graph: CompGraph, fusion: Any) -> tuple[tuple[str, ...], ...]:
    """:func:`kernel_groups` by op name (empty without fusion)."""
    if fusion is None or not np.any(fusion):
        return ()
    names = graph.op_names
    return tuple(tuple(names[i] for i in group) for group in kernel_groups(graph, fusion))


def record_of(
    graph: CompGraph,
    cluster: Cluster,
    decision: Decision,
    *,
    method: str = "",
    measurement: Measured | None = None,
    task: str | None = None,
    seed: int | None = None,
) -> DecisionRecord:
    """``decision`` for ``graph`` on ``cluster`` as a :class:`DecisionRecord` (arrays keyed by op
    name; ``measurement`` gives its step time, validity and reason).

    Raises:
        ValueError: an array of ``decision`` does not hold one entry per op.
    """
    names = names_in_file_order(graph)

    def keyed(key: str, values: Any) -> dict[str, int] | None:
        if values is None:
            return None
        ordered = in_file_order(graph, values, key, method)
        return dict(zip(names, ordered.tolist(), strict=True))

    step = None if measurement is None else float(measurement.step_time)
    return DecisionRecord(
        graph=graph.name,
        graph_fingerprint=graph.fingerprint,
        cluster=cluster.name,
        cluster_fingerprint=cluster.fingerprint,
        devices=tuple(d.name for d in cluster.devices),
        op_names=names,
        placement=keyed("placement", decision.placement),
        priority=keyed("priority", decision.priority),
        fusion=keyed("fusion", decision.fusion),
        kernels=kernel_names(graph, decision.fusion),
        method=method,
        task=task,
        seed=seed,
        step_time=step if step is not None and math.isfinite(step) else None,
        valid=None if measurement is None else bool(measurement.valid),
        reason="" if measurement is None else measurement.reason,
    )


def to_json(record: DecisionRecord) -> dict[str, Any]:
    """The JSON object of a decision file (module docstring) for ``record``."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "graph": record.graph,
        "graph_fingerprint": record.graph_fingerprint,
        "cluster": record.cluster,
        "cluster_fingerprint": record.cluster_fingerprint,
        "devices": list(record.devices),
        "method": record.method,
        "task": record.task,
        "seed": record.seed,
        "step_time": record.step_time,
        "valid": record.valid,
        "reason": record.reason,
        "placement": None if record.placement is None else dict(record.placement),
        "priority": None if record.priority is None else dict(record.priority),
        "fusion": None if record.fusion is None else dict(record.fusion),
        "kernels": [list(k) for k in record.kernels],
    }


# ---------------------------------------------------------------------------- reading


def _entry(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_ENTRY


def _typed(path: Path, data: Mapping[str, Any], key: str, kinds: tuple[type, ...]) -> Any:
    """``data[key]`` (``None`` when absent) if it is of one of ``kinds`` (``type(None)`` allows
    null), else a ValueError naming the file and the key."""
    value = data.get(key)
    bad_bool = isinstance(value, bool) and bool not in kinds
    if not isinstance(value, kinds) or bad_bool:
        names = " or ".join("null" if k is type(None) else k.__name__ for k in kinds)
        raise ValueError(f"{path}: {key} must be {names}, got {json.dumps(value)[:60]}")
    return value


def _op_map(path: Path, key: str, value: Any, num_devices: int) -> dict[str, int] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError(
            f"{path}: {key} must map op names to integers (or be null), got {type(value).__name__}"
        )
    high = {"placement": num_devices - 1, "fusion": 1}.get(key, MAX_ENTRY)
    for name, v in value.items():
        if not _entry(v) or v > high:
            allowed = (
                f"the cluster has {num_devices} devices (0..{high})"
                if key == "placement"
                else f"{key} entries are integers in [0, {high}]"
            )
            raise ValueError(f"{path}: op {name!r} has {_WHAT[key]} {json.dumps(v)}; {allowed}")
    return value


def parse_record(path: str | Path, data: Any) -> DecisionRecord:
    """The :class:`DecisionRecord` of a decision file's JSON ``data``, its structure checked
    (keys, types, ranges; not yet against a graph: :func:`decision_of`).

    Raises:
        ValueError: another format or version, a missing or unknown key, a value of the wrong
            type, a device outside the file's ``devices``, a fusion bit not 0 or 1, or a kernel
            naming an op the maps do not have.
    """
    path = Path(path)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(data).__name__}")
    if data.get("format") != FORMAT:
        raise ValueError(
            f"{path}: format is {json.dumps(data.get('format'))}, not {FORMAT!r}; this is not a "
            "graphopt decision file"
        )
    version = data.get("version")
    if version != VERSION or isinstance(version, bool):
        raise ValueError(
            f"{path}: decision file version {json.dumps(version)}; this graphopt reads version "
            f"{VERSION} (a newer file needs a newer graphopt)"
        )
    unknown = [k for k in data if k not in _KEYS]
    if unknown:
        close = difflib.get_close_matches(unknown[0], _KEYS, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(
            f"{path}: unknown key {unknown[0]!r}{hint} (a version-{VERSION} decision file has "
            f"{', '.join(_KEYS)})"
        )
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise ValueError(
            f"{path}: missing key {missing[0]!r} (a decision file names its graph and cluster, "
            "each with its fingerprint)"
        )
    text = (str,)
    for key in ("graph", "graph_fingerprint", "cluster", "cluster_fingerprint"):
        _typed(path, data, key, text)
    devices = _typed(path, data, "devices", (list,))
    if not devices or not all(isinstance(d, str) for d in devices):
        raise ValueError(f"{path}: devices must be a non-empty list of device names")
    maps = {key: _op_map(path, key, data.get(key), len(devices)) for key in ARRAYS}
    names: dict[str, None] = {}
    for m in maps.values():
        names.update(dict.fromkeys(m or ()))
    kernels = _typed(path, data, "kernels", (list, type(None))) or []
    for k, kernel in enumerate(kernels):
        if not isinstance(kernel, list) or len(kernel) < 2:
            raise ValueError(f"{path}: kernels[{k}] must list the names of two or more ops")
        stray = [n for n in kernel if not isinstance(n, str) or n not in names]
        if stray:
            raise ValueError(
                f"{path}: kernels[{k}] names {json.dumps(stray[0])}, which is not an op of the "
                "decision"
            )
    if kernels and maps["fusion"] is None:
        raise ValueError(
            f"{path}: kernels lists {len(kernels)} fused kernel(s), but fusion is null (no op "
            "fused); the kernels disagree with the fusion bits (kernels are derived from fusion: "
            "fix or drop them)"
        )
    seed = _typed(path, data, "seed", (int, type(None)))
    step = _typed(path, data, "step_time", (int, float, type(None)))
    if step is not None and not (math.isfinite(step) and step >= 0):
        raise ValueError(
            f"{path}: step_time must be a finite number of seconds >= 0 or null (an invalid "
            f"decision), got {step!r}"
        )
    return DecisionRecord(
        graph=data["graph"],
        graph_fingerprint=data["graph_fingerprint"],
        cluster=data["cluster"],
        cluster_fingerprint=data["cluster_fingerprint"],
        devices=tuple(devices),
        op_names=tuple(names),
        placement=maps["placement"],
        priority=maps["priority"],
        fusion=maps["fusion"],
        kernels=tuple(tuple(k) for k in kernels),
        method=_typed(path, data, "method", (str, type(None))) or "",
        task=_typed(path, data, "task", (str, type(None))),
        seed=seed,
        step_time=None if step is None else float(step),
        valid=_typed(path, data, "valid", (bool, type(None))),
        reason=_typed(path, data, "reason", (str, type(None))) or "",
    )


def read_record(path: str | Path) -> DecisionRecord:
    """:func:`parse_record` of the file at ``path`` (:func:`read_json`)."""
    return parse_record(path, read_json(path))


def _short(fingerprint: str) -> str:
    return fingerprint[:12]


def check_graph(path: str | Path, record: DecisionRecord, graph: CompGraph) -> None:
    """Refuse a record saved for another graph (one line naming both and their fingerprints)."""
    if record.graph_fingerprint != graph.fingerprint:
        raise ValueError(
            f"{path}: the decision is for graph {record.graph!r} (fingerprint "
            f"{_short(record.graph_fingerprint)}), not graph {graph.name!r} (fingerprint "
            f"{_short(graph.fingerprint)}); replay it on the graph it was saved for"
        )


def check_cluster(path: str | Path, record: DecisionRecord, cluster: Cluster) -> None:
    """Refuse a record saved for another cluster (one line naming both and their fingerprints)."""
    if record.cluster_fingerprint != cluster.fingerprint:
        raise InvalidArgument(
            "{path}: the decision is for cluster {saved!r} (fingerprint {saved_print}), not "
            "cluster {name!r} (fingerprint {print}); give {cluster} {saved} or the cluster file "
            "it was saved for",
            path=path,
            saved=record.cluster,
            saved_print=_short(record.cluster_fingerprint),
            name=cluster.name,
            print=_short(cluster.fingerprint),
        )


def _array(path: Path, key: str, values: Mapping[str, int], graph: CompGraph) -> np.ndarray:
    """The per-op array of one map, in the graph's op order."""
    unknown = [name for name in values if name not in graph.index]
    if unknown:
        more = f" ({len(unknown)} unknown ops)" if len(unknown) > 1 else ""
        raise ValueError(
            f"{path}: {key} names op {unknown[0]!r}, which graph {graph.name!r} does not have{more}"
        )
    if len(values) != graph.num_ops:
        missing = [n for n in graph.op_names if n not in values]
        raise ValueError(
            f"{path}: {key} gives no {_WHAT[key]} for {len(missing)} of the {graph.num_ops} ops of "
            f"graph {graph.name!r}, e.g. {missing[0]!r}; name every op"
        )
    out = np.empty(graph.num_ops, dtype=np.int64)
    out[[graph.index[name] for name in values]] = list(values.values())
    return out


MIN_NAMED = 0.5
"""The share of a graph's ops that a decision of another version of the model must name
(:func:`placement_by_names`): below it, the file is more likely another model's."""


def placement_by_names(
    path: str | Path, devices: Mapping[str, int], graph: CompGraph, num_devices: int
) -> tuple[np.ndarray, int]:
    """A placement saved for another version of the model (more or fewer layers, steps or
    blocks), applied to ``graph`` by op name: each op the map names takes its device, every other
    op ``-1`` (for the caller to fill, e.g. with the best heuristic's device); names ``graph``
    does not have are skipped. Returns the placement and how many ops were named.

    Raises:
        ValueError: one line starting with ``path``: fewer than :data:`MIN_NAMED` of the graph's
            ops named, or a device outside ``0..num_devices - 1``.
    """
    index = graph.index
    found = [(name, int(device)) for name, device in devices.items() if name in index]
    if len(found) < MIN_NAMED * graph.num_ops:
        raise ValueError(
            f"{path}: names {len(found):,} of the {graph.num_ops:,} ops of graph {graph.name!r} "
            f"(at least {MIN_NAMED:.0%} needed to start from it); is it a decision for another "
            "model?"
        )
    out = np.full(graph.num_ops, -1, dtype=np.int64)
    for name, device in found:
        if not 0 <= device < num_devices:
            raise ValueError(
                f"{path}: op {name!r} has device {device}, but the cluster has {num_devices} "
                f"devices (0..{num_devices - 1})"
            )
        out[index[name]] = device
    return out, len(found)


def decision_of(
    path: str | Path, record: DecisionRecord, graph: CompGraph, cluster: Cluster | None = None
) -> Decision:
    """The :class:`Decision` a record holds for ``graph``, every check of the module docstring
    made (the cluster's only when ``cluster`` is given).

    Raises:
        ValueError: one line starting with ``path``: a record for another graph or cluster, an
            op the graph does not have, an op without an entry, a device the cluster does not
            have, a fusion that breaks the rules, or kernels that the fusion bits do not make.
    """
    path = Path(path)
    check_graph(path, record, graph)
    if cluster is not None:
        check_cluster(path, record, cluster)
    return decision_by_names(path, record, graph, cluster)


def decision_by_names(
    path: str | Path, record: DecisionRecord, graph: CompGraph, cluster: Cluster | None = None
) -> Decision:
    """The :class:`Decision` a record holds, applied to ``graph`` by op name: every check of
    :func:`decision_of` but the fingerprints. For a decision saved for another version of the
    same model (another batch size, another profile of its ops), e.g. as the start of a search
    (``graphopt optimize --start``); ``cluster`` only bounds the devices.

    Raises:
        ValueError: one line starting with ``path``: an op the graph does not have, an op
            without an entry, a device the cluster does not have, a fusion that breaks the rules,
            or kernels that the fusion bits do not make.
    """
    path = Path(path)
    arrays = {
        key: None if values is None else _array(path, key, values, graph)
        for key, values in (
            ("placement", record.placement),
            ("priority", record.priority),
            ("fusion", record.fusion),
        )
    }
    decision = Decision(**arrays)
    placement, fusion = decision.placement, decision.fusion
    num_devices = len(record.devices) if cluster is None else cluster.num_devices
    if placement is not None and len(placement) and placement.max() >= num_devices:
        i = int(placement.argmax())
        raise ValueError(
            f"{path}: op {graph.op_names[i]!r} has device {int(placement[i])}, but the cluster "
            f"has {num_devices} devices (0..{num_devices - 1})"
        )
    derived: list[tuple[int, ...]] = []
    if fusion is not None and fusion.any():
        from graphopt.sim.fusion_rules import RULE_OK, FusionRules

        rules = FusionRules(graph)
        where = placement if placement is not None else np.zeros(graph.num_ops, dtype=np.int64)
        rule, a, b = rules.violation(where, fusion)
        if rule != RULE_OK:
            raise ValueError(f"{path}: {rules.describe(rule, a, b)}")
        derived = kernel_groups(graph, fusion)
    made = {frozenset(graph.op_names[i] for i in group) for group in derived}
    listed = {frozenset(kernel) for kernel in record.kernels}
    if made != listed:
        odd = sorted(sorted(k) for k in listed ^ made)[0]
        side = "lists" if frozenset(odd) in listed else "omits"
        raise ValueError(
            f"{path}: kernels {side} the kernel {odd[:4]}{' ...' if len(odd) > 4 else ''}, which "
            "disagrees with the fusion bits (kernels are derived from fusion: fix or drop them)"
        )
    return decision
