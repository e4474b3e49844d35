"""Tarnawski et al.'s operator graphs: measured op and transfer costs, with their own cluster.

Tarnawski, Phanishayee, Devanur, Mahajan and Nina Paravecino, "Efficient Algorithms for Device
Placement of DNN Graph Operators" (NeurIPS 2020) release their inputs as JSON in
msr-fiddle/dnn-partitioning (``latency-inputs/OperatorGraphs/*.json``); the operator graphs
shipped with graphopt are in :data:`graphopt.data.TARNAWSKI_DIR` (origin and format in its
``SOURCE.md``). A file is one object::

    {"maxSizePerFPGA": 629145600.0, "maxFPGAs": 4, "maxCPUs": 8,
     "nodes": [{"id": 63, "name": "Shape1", "supportedOnFpga": true, "cpuLatency": 1.0e-05,
                "fpgaLatency": 4.4e-07, "isBackwardNode": false, "colorClass": 16, "size": 16.0}],
     "edges": [{"sourceId": 63, "destId": 64, "cost": 7.5e-06, "size": 16.0}]}

("FPGA" is the authors' word for any accelerator.) The mapping to a :class:`CompGraph`:

==================  =========================================================================
file                graph
==================  =========================================================================
node ``id``,        op ``f"{model}/{id}:{name}"`` (``name`` is optional, default ``"n{id}"``);
``name``            the ops keep the file's node order before the topological sort
``fpgaLatency``     ``measured["ACC"]`` (seconds: the file's milliseconds / 1e3)
``cpuLatency``      ``measured["CPU"]`` (seconds)
``name``            type: its leading letters (``MatMul7`` -> ``MatMul``), ``Weight`` for a
                    weight, ``Op`` without a name
``supportedOnFpga`` false: ``allowed = ("CPU",)``
``colorClass``      colocation group ``f"{model}/color{c}"`` (ops that must share a device);
                    no class: no group, and no layer either, so the op is a block of its own
``size``            a *weight* (no input edge, both latencies 0): ``param_bytes``; any other
                    node: ``output_bytes`` (its output tensor)
``isBackwardNode``  ``metadata["backward_ops"]`` (the names of the backward ops)
edge ``cost``       ``edge_bytes = cost / 1e3 * LINK_BANDWIDTH``, so that a link of
                    :data:`LINK_BANDWIDTH` and no latency moves it in exactly ``cost``
==================  =========================================================================

Units. The README of the release gives bytes for ``size`` and ``maxSizePerFPGA`` but no unit
for the latencies and costs. They are milliseconds: every edge's ``cost`` is its ``size`` at
2 GiB/s read as milliseconds (1,572,864 bytes cost 0.732421875), and BERT's operators take
tenths of a millisecond on the accelerator. :data:`LINK_BANDWIDTH` is that 2 GiB/s, so the
edge bytes equal the files' edge sizes.

The cluster (:func:`tarnawski_cluster`) is the paper's model as graphopt's options: ``maxCPUs``
devices ``cpu0..`` of kind ``CPU`` (the CPU cores) and ``maxFPGAs`` devices ``acc0..`` of kind
``ACC`` with ``maxSizePerFPGA`` bytes of memory; every link :data:`LINK_BANDWIDTH` and no
latency; ``route: via-host`` through ``cpu0`` (an accelerator writes its output to host memory
and another reads it back: the cost is paid on each hop), ``copies: free`` (the memory limit
counts the ops placed on a device), ``colocation: enforce`` (a colour class is never split).
Roofline figures (every op has measured times for both kinds, so they price nothing): the CPU
cores are DEVICE_SPECS' ``Xeon-8180-2S``, the accelerators ``V100-PCIe-16GB`` (the layer graphs
of the release were profiled on GPUs), both with no launch overhead (the measured times are
the whole cost). The paper's memory limit sums ``size`` over every node on an accelerator; the
simulator counts weights for the whole step and an activation while it is live, so its peak is
at most the paper's sum.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from graphopt.data import TARNAWSKI_DIR
from graphopt.graph import CompGraph, Op
from graphopt.hardware import DEVICE_SPECS, Cluster

ACC_KIND = "ACC"
"""Device kind of the accelerators (the files' "FPGA")."""

CPU_KIND = "CPU"
"""Device kind of the CPU cores."""

LINK_BANDWIDTH = float(2**31)
"""Bytes per second of every link: the rate at which the files' edge costs move their sizes."""

MS = 1e-3
"""Seconds per unit of the files' latencies and costs (milliseconds; module docstring)."""

_TOP_KEYS = ("maxSizePerFPGA", "maxFPGAs", "maxCPUs", "nodes", "edges")
_NODE_KEYS = ("id", "supportedOnFpga", "cpuLatency", "fpgaLatency", "isBackwardNode", "size")
_EDGE_KEYS = ("sourceId", "destId", "cost")


def list_graphs(directory: str | os.PathLike[str] | None = None) -> dict[str, Path]:
    """``{name: file}`` of the operator graphs in ``directory`` (default the ones shipped with
    graphopt): every ``NAME_inference.json`` or ``NAME.json`` (gzipped or not), sorted by name;
    the name drops ``_inference``."""
    folder = Path(directory) if directory is not None else TARNAWSKI_DIR
    found = {}
    for file in folder.iterdir():
        stem = file.name.removesuffix(".gz")
        if stem.endswith(".json"):
            found[stem.removesuffix(".json").removesuffix("_inference")] = file
    return dict(sorted(found.items()))


def read_tarnawski(name_or_path: str | os.PathLike[str]) -> tuple[str, dict[str, Any], str]:
    """``(model name, parsed JSON, source)`` of a shipped graph's name or a file's path.

    Raises:
        ValueError: no such graph or file, or a file that is not JSON.
    """
    file = Path(name_or_path)
    known = list_graphs()
    if str(name_or_path) in known:
        file = known[str(name_or_path)]
    elif not file.is_file():
        raise ValueError(
            f"no Tarnawski operator graph {str(name_or_path)!r}; pass a path to a JSON file of "
            f"the dnn-partitioning format or one of: {', '.join(known)}"
        )
    try:
        raw = gzip.decompress(file.read_bytes()) if file.suffix == ".gz" else file.read_bytes()
        data = json.loads(raw)
    except (OSError, ValueError) as e:
        raise ValueError(
            f"{file}: cannot read it as JSON ({e}); is it a dnn-partitioning input?"
        ) from None
    stem = file.name.removesuffix(".gz").removesuffix(".json").removesuffix("_inference")
    return stem, data, str(file)


def _number(source: str, where: str, key: str, value: Any, *, integer: bool = False) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if ok and integer and value != int(value):
        ok = False
    if not ok or value < 0:
        kind = "a non-negative integer" if integer else "a finite non-negative number"
        raise ValueError(f"{source}: {where}: {key} must be {kind}, got {value!r}")
    return float(value)


def _flag(source: str, where: str, key: str, value: Any) -> bool:
    if value in (True, False, 0, 1) and not isinstance(value, float):
        return bool(value)
    raise ValueError(f"{source}: {where}: {key} must be true, false, 0 or 1, got {value!r}")


def _require(source: str, where: str, item: Any, keys: tuple[str, ...]) -> Mapping[str, Any]:
    if not isinstance(item, Mapping):
        raise ValueError(f"{source}: {where} must be an object, got {type(item).__name__}")
    missing = [key for key in keys if key not in item]
    if missing:
        raise ValueError(
            f"{source}: {where} lacks the key {', '.join(map(repr, missing))} "
            f"(required: {', '.join(keys)})"
        )
    return item


def _op_type(name: Any) -> str:
    """The leading letters of a node's name (``MatMul7`` -> ``MatMul``), else ``"Op"``."""
    match = re.match(r"[A-Za-z]+", str(name).rsplit("/", 1)[-1]) if name is not None else None
    return match.group() if match else "Op"


def tarnawski_to_graph(data: Mapping[str, Any], model: str, source: str = "<json>") -> CompGraph:
    """The :class:`CompGraph` of a parsed dnn-partitioning input (rules in the module docstring).

    Raises:
        ValueError: ``"<source>: <where>: ..."`` for a missing key, a value of the wrong type, a
            duplicate node id, an edge naming an unknown node, a duplicate edge, or a cycle.
    """
    _require(source, "the top level", data, _TOP_KEYS)
    nodes, edges = data["nodes"], data["edges"]
    for key, value in (("nodes", nodes), ("edges", edges)):
        if not isinstance(value, list):
            raise ValueError(f"{source}: {key} must be a list, got {type(value).__name__}")
    names: dict[int, str] = {}
    has_input: set[int] = set()
    for j, edge in enumerate(edges):
        where = f"edges[{j}]"
        _require(source, where, edge, _EDGE_KEYS)
        has_input.add(int(_number(source, where, "destId", edge["destId"], integer=True)))
    ops, backward = [], []
    for j, node in enumerate(nodes):
        where = f"nodes[{j}]"
        _require(source, where, node, _NODE_KEYS)
        nid = int(_number(source, where, "id", node["id"], integer=True))
        if nid in names:
            raise ValueError(f"{source}: {where}: duplicate node id {nid}; node ids must be unique")
        label = str(node.get("name", f"n{nid}"))
        names[nid] = name = f"{model}/{nid}:{label}"
        cpu = _number(source, where, "cpuLatency", node["cpuLatency"])
        acc = _number(source, where, "fpgaLatency", node["fpgaLatency"])
        size = _number(source, where, "size", node["size"])
        weight = cpu == 0 and acc == 0 and nid not in has_input
        on_acc = _flag(source, where, "supportedOnFpga", node["supportedOnFpga"])
        if _flag(source, where, "isBackwardNode", node["isBackwardNode"]):
            backward.append(name)
        color = node.get("colorClass")
        if color is not None:
            color = int(_number(source, where, "colorClass", color, integer=True))
        op_type = "Weight" if weight else _op_type(node.get("name"))
        ops.append(
            Op(
                name=name,
                type=op_type,
                output_bytes=0.0 if weight else size,
                param_bytes=size if weight else 0.0,
                bytes_accessed=size,
                measured={ACC_KIND: acc * MS, CPU_KIND: cpu * MS},
                colocation=f"{model}/color{color}" if color is not None else "",
                allowed=() if on_acc else (CPU_KIND,),
            )
        )
    edge_list, seen = [], set()
    for j, edge in enumerate(edges):
        where = f"edges[{j}]"
        src = int(_number(source, where, "sourceId", edge["sourceId"], integer=True))
        dst = int(_number(source, where, "destId", edge["destId"], integer=True))
        cost = _number(source, where, "cost", edge["cost"])
        for key, nid in (("sourceId", src), ("destId", dst)):
            if nid not in names:
                raise ValueError(f"{source}: {where}: {key} {nid} names no node of the file")
        if (src, dst) in seen:
            raise ValueError(f"{source}: {where}: duplicate edge {src} -> {dst}; list each once")
        seen.add((src, dst))
        edge_list.append((names[src], names[dst], cost * MS * LINK_BANDWIDTH))
    metadata = {"source": "tarnawski", "model": model, "training": bool(backward)}
    if backward:
        metadata["backward_ops"] = backward
    try:
        return CompGraph.build(model, ops, edge_list, metadata=metadata)
    except ValueError as e:
        raise ValueError(f"{source}: edges: {e}") from None


def tarnawski_cluster(data: Mapping[str, Any], source: str = "<json>", name: str = "") -> Cluster:
    """The cluster a dnn-partitioning input describes (module docstring).

    Raises:
        ValueError: a missing or bad ``maxSizePerFPGA``, ``maxFPGAs`` or ``maxCPUs``, or no
            CPU (``maxCPUs`` 0: ``via-host`` needs a host).
    """
    _require(source, "the top level", data, _TOP_KEYS[:3])
    memory = _number(source, "the top level", "maxSizePerFPGA", data["maxSizePerFPGA"])
    accs = int(_number(source, "the top level", "maxFPGAs", data["maxFPGAs"], integer=True))
    cpus = int(_number(source, "the top level", "maxCPUs", data["maxCPUs"], integer=True))
    if cpus < 1:
        raise ValueError(f"{source}: the top level: maxCPUs must be at least 1 (the host), got 0")
    cpu = {**DEVICE_SPECS["Xeon-8180-2S"], "kind": CPU_KIND, "launch_overhead": 0.0}
    acc = {**DEVICE_SPECS["V100-PCIe-16GB"], "kind": ACC_KIND, "launch_overhead": 0.0}
    devices = [{"name": "cpu", "count": cpus, **cpu}] if cpus > 1 else [{"name": "cpu0", **cpu}]
    if accs:
        acc["memory"] = memory
        devices.append(
            {"name": "acc", "count": accs, **acc} if accs > 1 else {"name": "acc0", **acc}
        )
    return Cluster.from_dict(
        {
            "name": name or f"tarnawski-{accs}acc-{cpus}cpu",
            "description": f"dnn-partitioning setting of {Path(source).name}: {accs} accelerators of "
            f"{memory:g} bytes, {cpus} CPU cores, transfers through host memory",
            "devices": devices,
            "links": {"default": {"bandwidth": LINK_BANDWIDTH, "latency": 0.0}},
            "route": "via-host",
            "host": "cpu0",
            "copies": "free",
            "colocation": "enforce",
        }
    )


def load_tarnawski(name_or_path: str | os.PathLike[str]) -> tuple[CompGraph, Cluster]:
    """Load an operator graph and its cluster (rules in the module docstring).

    Args:
        name_or_path: a shipped graph (:func:`list_graphs`: ``"bert_l-3"``, ``"bert_l-6"``,
            ``"bert_l-12"``, ``"resnet50"``) or the path of a JSON file (``.json.gz`` too).

    Returns:
        ``(graph, cluster)``; the graph is named after the file (``bert_l-3``).

    Raises:
        ValueError: an unknown name, a file that cannot be read, or a malformed file (one line
            naming the file and the key).
    """
    model, data, source = read_tarnawski(name_or_path)
    graph = tarnawski_to_graph(data, model, source)
    return graph, tarnawski_cluster(data, source, name=f"tarnawski-{model}")
