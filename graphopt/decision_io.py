"""Reading decisions from files: a placement, or a whole decision, for one graph.

Accepted JSON forms:

- a list of device indices, one per op in topological order: ``[0, 1, 1, 0]``;
- a mapping from op name to device index: ``{"encoder/matmul_0": 1, ...}`` (every op named);
- a decision object ``{"placement": [...], "priority": [...], "fusion": [...]}``, any array
  may be ``null`` or left out (see :meth:`graphopt.typing.Decision.to_dict`); extra descriptive keys
  ``graph``, ``cluster``, ``seed`` and ``step_time`` are allowed and checked against the graph when
  present (``graph`` must name it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from graphopt.graph import CompGraph
from graphopt.typing import Decision

_DESCRIPTIVE = {"graph", "cluster", "seed", "step_time", "graph_fingerprint"}


def load_decision(path: str | Path, graph: CompGraph) -> Decision:
    """Read a decision for ``graph`` from a JSON file (forms in the module docstring).

    Raises:
        ValueError: missing or unparsable file, a decision for another graph, wrong lengths, or
            op names that are not in the graph.
    """
    path = Path(path)
    if not path.exists():
        raise ValueError(f"decision file {str(path)!r} does not exist")
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not valid JSON: {e}") from e
    if isinstance(data, list):
        decision = Decision(placement=np.asarray(data))
    elif isinstance(data, dict) and set(data) & {"placement", "priority", "fusion"}:
        if "graph" in data and data["graph"] != graph.name:
            raise ValueError(
                f"{path}: the decision is for graph {data['graph']!r}, not {graph.name!r}"
            )
        decision = Decision.from_dict({k: v for k, v in data.items() if k not in _DESCRIPTIVE})
    elif isinstance(data, dict):
        missing = [name for name in graph.op_names if name not in data]
        unknown = [name for name in data if name not in graph.index]
        if unknown:
            raise ValueError(f"{path}: op {unknown[0]!r} is not in graph {graph.name!r}")
        if missing:
            raise ValueError(
                f"{path}: {len(missing)} ops of {graph.name!r} have no device, e.g. {missing[0]!r}"
            )
        decision = Decision(placement=np.array([data[name] for name in graph.op_names]))
    else:
        raise ValueError(f"{path}: expected a JSON list or object, got {type(data).__name__}")
    for name in ("placement", "priority", "fusion"):
        value = getattr(decision, name)
        if value is not None and len(value) != graph.num_ops:
            raise ValueError(
                f"{path}: {name} has {len(value)} entries but graph {graph.name!r} has "
                f"{graph.num_ops} ops"
            )
    return decision
