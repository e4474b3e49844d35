"""A saved decision applied to a PyTorch model: its placement as the devices of FX nodes.

The ops of a graph imported from PyTorch (:func:`graphopt.importers.torch.from_torch`, forward
graphs) are named after the FX nodes of the model's exported program, so a decision file
(:mod:`graphopt.decisions.format`) keyed by op name is keyed by FX node name too:

1. :func:`export_torch` turns a decision record into what a PyTorch user applies (``graphopt
   decision export FILE --format torch`` writes it): ``placement``, a ``{fx node name: torch
   device}`` map, and ``fusion``, the fused kernels as lists of FX node names;
2. :func:`traced_module` traces the model the way the importer did, giving a ``GraphModule``
   whose nodes carry those names;
3. :func:`apply_placement` moves its nodes onto their devices and inserts the transfers.

Example::

    graph = from_torch(model, (x,), name="mlp")
    ...                                               # a decision saved for graph and cluster
    placement = export_torch(read_record("mlp--heft.json"), ["cuda:0", "cuda:1"])["placement"]
    gm = apply_placement(traced_module(model, (x,)), placement)
    y = gm(x)                                         # the model's output, computed across devices

Training graphs (``from_torch(training=True)``) hold the backward ops of AOTAutograd's joint
graph, which a ``GraphModule`` of the forward does not have: their placement is for a training
loop built from that joint graph, and :func:`apply_placement` refuses the names it cannot find.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from graphopt.typing import DecisionRecord

TORCH_FORMAT = "graphopt-torch-decision"
"""The ``format`` of an exported decision (:func:`export_torch`)."""
TRANSFER = "graphopt_transfer"
"""The ``meta`` key set on every transfer node :func:`apply_placement` inserts."""


TORCH_DEVICE_TYPES = ("cpu", "cuda", "mps", "xpu", "xla", "hpu", "mtia", "meta", "privateuseone")
"""The device types a torch device string may name (``TYPE`` or ``TYPE:N``)."""
_TORCH_DEVICE = re.compile(rf"({'|'.join(TORCH_DEVICE_TYPES)})(:\d+)?")


def default_devices(count: int) -> list[str]:
    """``cuda:0`` ... ``cuda:{count - 1}``: the torch device of each cluster device by default."""
    return [f"cuda:{d}" for d in range(count)]


def export_torch(record: DecisionRecord, devices: Sequence[str] | None = None) -> dict[str, Any]:
    """What a PyTorch user applies of ``record``: a JSON-ready object with ``graph``,
    ``graph_fingerprint``, ``cluster``, ``method``, ``devices`` (the torch device of each cluster
    device), ``placement`` (``{fx node name: torch device}``, ``null`` when the record has no
    placement) and ``fusion`` (the fused kernels, each a list of FX node names).

    Args:
        record: a decision read from a decision file (:func:`graphopt.decisions.format.read_record`).
        devices: the torch device of each of the record's devices, in order (default
            :func:`default_devices`).

    Raises:
        ValueError: ``devices`` does not give one torch device per cluster device, or names
            something that is not a torch device (:data:`TORCH_DEVICE_TYPES`).
    """
    devices = list(default_devices(len(record.devices)) if devices is None else devices)
    if len(devices) != len(record.devices) or not all(devices):
        raise ValueError(
            f"give one torch device per device of cluster {record.cluster!r} "
            f"({', '.join(record.devices)}): {len(record.devices)} in all, got {devices}"
        )
    unknown = [d for d in devices if not _TORCH_DEVICE.fullmatch(d)]
    if unknown:
        raise ValueError(
            f"{unknown[0]!r} is not a torch device: give TYPE or TYPE:N with TYPE one of "
            f"{', '.join(TORCH_DEVICE_TYPES)} (e.g. cuda:0)"
        )
    placement = None
    if record.placement is not None:
        placement = {name: devices[d] for name, d in record.placement.items()}
    return {
        "format": TORCH_FORMAT,
        "version": 1,
        "graph": record.graph,
        "graph_fingerprint": record.graph_fingerprint,
        "cluster": record.cluster,
        "method": record.method,
        "devices": devices,
        "placement": placement,
        "fusion": [list(k) for k in record.kernels],
    }


def traced_module(
    model: torch.nn.Module,
    example_inputs: Any = (),
    example_kwargs: Mapping[str, Any] | None = None,
) -> torch.fx.GraphModule:
    """``model`` traced as the importer traces forward graphs (``torch.export`` lowered to core
    ATen, oneDNN off and attention on its math backend): a ``GraphModule`` whose call nodes carry
    the names of the imported graph's ops; runnable as the model (parameters included).

    Raises:
        ValueError: ``torch.export`` cannot capture the model.
    """
    import torch

    from graphopt.importers.torch import _as_tuple, _export, _generic_kernels, _quiet_torch

    with _generic_kernels(), _quiet_torch():
        ep = _export(model.eval(), _as_tuple(example_inputs), dict(example_kwargs or {}), "model")
        module = ep.run_decompositions().module()
    assert isinstance(module, torch.fx.GraphModule)
    return module


def _is_tensor(node: Any) -> bool:
    """Whether an FX node's value is a tensor (unknown values count as tensors)."""
    import torch

    value = node.meta.get("val", node.meta.get("example_value"))
    return value is None or isinstance(value, torch.Tensor)


def apply_placement(
    gm: torch.fx.GraphModule,
    placement: Mapping[str, str | torch.device],
    *,
    output_device: str | torch.device | None = None,
) -> torch.fx.GraphModule:
    """Run each node of ``gm`` named in ``placement`` on its device, inserting the transfers.

    Rules, node by node in graph order:

    - a node named in ``placement`` runs on that device; each tensor it reads from another device
      (or from an input, whose device is not known) is copied there first by a transfer node
      (``Tensor.to``, one per tensor and device, tagged ``node.meta["graphopt_transfer"]``); a
      ``device=`` argument (``full``, ``arange``) is set to the device;
    - a node not named (a view, a ``getitem``, an assertion) follows the device of its first
      input that has one, without a transfer: the importer folded these into their producer;
    - a parameter, buffer or constant (``get_attr``) is moved, once, to the device of its first
      named reader (reading it directly or through views); readers on other devices get a
      transfer;
    - the outputs stay where they are computed, or are copied to ``output_device``.

    ``gm`` is changed in place (its graph and parameters) and recompiled; it is returned.

    Args:
        gm: the model as a ``GraphModule`` (:func:`traced_module`).
        placement: torch device per FX node name (``export_torch(...)["placement"]``).
        output_device: where the outputs go (default: where they are computed).

    Raises:
        ValueError: ``placement`` names a node ``gm`` does not have.
    """
    import torch

    graph = gm.graph
    nodes = list(graph.nodes)
    names = {node.name for node in nodes}
    unknown = [name for name in placement if name not in names]
    if unknown:
        raise ValueError(
            f"the placement names node {unknown[0]!r} ({len(unknown)} in all), which the "
            "GraphModule does not have; trace the model with traced_module() as it was imported"
        )
    device_of: dict[Any, torch.device] = {}
    copies: dict[tuple[Any, torch.device], Any] = {}

    def on(value: Any, device: torch.device, before: Any) -> Any:
        """``value`` (a node) on ``device``: itself, or its transfer there."""
        if device_of.get(value) == device or not _is_tensor(value):
            return value
        key = (value, device)
        if key not in copies:
            with graph.inserting_before(before):
                copy = graph.call_method("to", (value, device))
            copy.meta[TRANSFER] = True
            device_of[copy] = device
            copies[key] = copy
        return copies[key]

    order = {node: i for i, node in enumerate(nodes)}
    for node in nodes:  # state goes where it is first read, through views (before any transfer)
        if node.op == "get_attr" and _is_tensor(node):
            readers = _placed_readers(node, placement)
            if readers:
                first = min(readers, key=order.__getitem__)
                device_of[node] = torch.device(placement[first.name])
                _move_state(gm, str(node.target), device_of[node])
    for node in nodes:
        if node.op in ("placeholder", "get_attr"):
            continue
        if node.op == "output":
            if output_device is not None:
                device = torch.device(output_device)
                for value in node.all_input_nodes:
                    node.replace_input_with(value, on(value, device, node))
            continue
        target = placement.get(node.name)
        if target is None:  # follows its input, as the importer folded it into its producer
            found = next((device_of[a] for a in node.all_input_nodes if a in device_of), None)
            if found is not None:
                device_of[node] = found
            continue
        device = torch.device(target)
        device_of[node] = device
        if "device" in node.kwargs:
            node.update_kwarg("device", device)
        for value in node.all_input_nodes:
            moved = on(value, device, node)
            if moved is not value:
                node.replace_input_with(value, moved)
    graph.lint()
    gm.recompile()
    return gm


def _placed_readers(node: Any, placement: Mapping[str, Any]) -> list[Any]:
    """The nodes named in ``placement`` that read ``node``, directly or through nodes that are
    not named (views of it)."""
    found, stack, seen = [], list(node.users), set()
    while stack:
        user = stack.pop()
        if user in seen:
            continue
        seen.add(user)
        if user.name in placement:
            found.append(user)
        elif user.op == "call_function":
            stack.extend(user.users)
    return found


def _move_state(gm: torch.fx.GraphModule, target: str, device: torch.device) -> None:
    """Move the parameter, buffer or constant tensor ``target`` of ``gm`` to ``device``."""
    import torch

    owner_path, _, attr = target.rpartition(".")
    owner = gm.get_submodule(owner_path) if owner_path else gm
    value = getattr(owner, attr)
    if not isinstance(value, torch.Tensor):
        return
    with torch.no_grad():
        moved = value.to(device)
    if isinstance(value, torch.nn.Parameter):
        value.data = moved
    elif attr in getattr(owner, "_buffers", {}):
        owner._buffers[attr] = moved
    else:
        setattr(owner, attr, moved)
