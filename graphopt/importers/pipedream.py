"""PipeDream layer profiles: real per-layer timings of 14 PyTorch models, as :class:`CompGraph` s.

PipeDream (Narayanan et al., "PipeDream: Generalized Pipeline Parallelism for DNN Training",
SOSP 2019) profiles a model layer by layer on one GPU and writes the layer graph as text
(``profiler/*/profiles/<model>/graph.txt`` in msr-fiddle/pipedream). One line per node, then one
tab-indented line per edge (producer first)::

    node4 -- Embedding(32320, 1024) -- forward_compute_time=0.073, backward_compute_time=6.949, activation_size=6291456.0, parameter_size=132382720.000
    \tnode4 -- node5

Times are milliseconds; ``activation_size`` is the bytes of the node's output, a bracketed list
``[a; b; c]`` when it has several outputs; ``parameter_size`` is the bytes of its weights.

Device kind. The files do not say which GPU measured them. The paper's clusters had V100s
(clusters A and B) and Titan X GPUs (cluster C); we assume **V100**, so the times are stored as
``measured["V100"]`` and apply to the ``V100`` devices of the cluster presets. Pass ``kind=``
to :func:`load_pipedream` to file them under another kind.

Forward graph: one op per node, named ``f"{model}/node{id}"``, ``layer`` = that name (the
node is the layer: a profile has no module path, and a module repr such as ``ReLU(inplace)`` is
shared by unrelated layers, which would merge them into one colour class), type =
the module's class name (``Input0`` and ``hidden`` become ``Input``, ``__getitem__`` ``GetItem``),
``measured = forward ms / 1e3``, ``output_bytes`` = the summed activation sizes, ``param_bytes`` =
``parameter_size``, ``bytes_accessed`` = input edge bytes + ``output_bytes`` + ``param_bytes``.
An ``Input`` node's time is what the profiler recorded for it (data loading, 636 ms in
``alexnet``): it is kept, so summed op times equal the file's sums.

Edge bytes (multi-output nodes): an edge carries one output of its producer. A consumer
``__getitem__(k)`` takes output ``k``; otherwise, when the producer has as many outputs as
consumers, the ``i``-th consumer in file order takes output ``i``; otherwise the largest output.

FLOPs (:func:`estimate_forward_flops`), fp32 (4 bytes per element), ``out`` = output elements
(the first output of a multi-output node), so the batch size is already inside ``out``:

=========================================  ====================================================
``ConvNd(C_in, C_out, kernel_size=k,       ``2 * out * (C_in / groups) * prod(k)`` (bias ignored;
groups=g)``                                a scalar ``k`` means ``k`` in each of the N dims)
``Linear(in_features=i, ...)``             ``2 * out * i``
``LSTM`` / ``GRU`` / ``RNN``               ``tokens = out / (hidden * dirs)``; per token, layer
(``input, hidden, num_layers,              and direction ``2 * gates * hidden * (in_l + hidden)``
bidirectional``)                           with 4 / 3 / 1 gates (``8 h (i + h)`` for an LSTM),
                                           ``in_l = input`` for layer 0, ``hidden * dirs`` after
``MaxPoolNd`` / ``AvgPoolNd``              ``out * prod(kernel_size)``
``BatchNormNd`` / ``LayerNorm``            ``6 * out`` (statistics 2, normalise 2, affine 2)
``Softmax`` / ``LogSoftmax``               ``5 * out``; ``Sigmoid`` / ``Tanh`` ``4 * out``
``Dropout`` 2, ``ReLU`` (and variants) 1   per output element
``Add`` / ``Mul``                          ``max(1, inputs - 1) * out``
data movement (``Input``, ``View``,        0
``Concat``, ``Size``, ``GetItem``,
``Embedding`` (a gather), ...)
a container with exactly one compute       that module's rule, with the container's output
module (GNMT's ``Classifier``)
anything else (``EmuBidirLSTM``,           ``forward seconds * FALLBACK_FLOPS_PER_SECOND``
``RecurrentAttention``)
=========================================  ====================================================

``FALLBACK_FLOPS_PER_SECOND`` is 10 TFLOP/s, about the rate the rules above give for GNMT's
measured LSTM and Linear layers (10-18 TFLOP/s) and two thirds of a V100's FP32 peak. The FLOPs
matter only on devices of another kind (for instance a CPU), which get the roofline.

Training graph (``training=True``; PipeDream profiles training): one more op per node,
``f"{model}/node{id}/backward"`` of type ``f"{type}Backward"``, ``measured = backward ms / 1e3``,
FLOPs twice the forward's for a node with weights (input and weight gradients), else equal;
output = the gradient w.r.t. the node's inputs (``output_bytes`` = summed input edge bytes);
``param_bytes`` = ``parameter_size`` (the weight gradient it writes); ``bytes_accessed`` = twice
the forward's (reads the output gradient, the stashed input and output, the weights; writes the
input and weight gradients). Edges: every forward edge ``u -> v`` gives ``backward(v) ->
backward(u)`` with the same bytes, and every node ``forward(i) -> backward(i)`` carries its stashed
output (``output_bytes``); for the last forward nodes that edge is the loss gradient. Forward and
backward op of a node share the colocation group ``f"{model}/node{id}"``. The forward ops come
first in graph order, ``metadata["forward_ops"]`` of them (as the torch importer records it).
"""

from __future__ import annotations

import ast
import math
import os
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from graphopt.data import PIPEDREAM_DIR
from graphopt.graph import CompGraph, Op

BYTES_PER_ELEMENT = 4
"""Activations are taken as fp32 to turn activation bytes into element counts."""

FALLBACK_FLOPS_PER_SECOND = 10e12
"""Assumed throughput for layers without a FLOP rule: FLOPs = forward seconds * this."""

DEFAULT_KIND = "V100"
"""Device kind the measured times are filed under (an assumption; see the module docstring)."""

ENV_VAR = "GRAPHOPT_PIPEDREAM_DIR"
"""Environment variable naming a folder of profiles; overrides :func:`default_profile_dir`."""

_FIELDS = ("forward_compute_time", "backward_compute_time", "activation_size", "parameter_size")
_UNITS = dict(zip(_FIELDS, ("ms", "ms", "bytes", "bytes"), strict=True))
_NODE_LINE = (
    "'node<N> -- <module repr> -- forward_compute_time=<ms>, backward_compute_time=<ms>, "
    "activation_size=<bytes or [b1; b2; ...]>, parameter_size=<bytes>'"
)
_NODE_ID = re.compile(r"node(\d+)\Z")
_KEY = re.compile(r"\s*([A-Za-z_]\w*)\s*=\s*")
_CLASS = re.compile(r"\s*([A-Za-z_]\w*)")
_COMPUTE = re.compile(r"(?<![\w.])(Conv[123]d|Linear|LSTM|GRU|RNN)\(")

_TYPE_ALIASES = {"__getitem__": "GetItem", "hidden": "Input"}
_RNN_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
_PER_ELEMENT = {
    **dict.fromkeys(("BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LayerNorm"), 6.0),
    **dict.fromkeys(("Softmax", "LogSoftmax"), 5.0),
    **dict.fromkeys(("Sigmoid", "Tanh"), 4.0),
    "Dropout": 2.0,
    **dict.fromkeys(("ReLU", "ReLU6", "LeakyReLU", "Hardtanh", "ELU"), 1.0),
}
_DATA_MOVEMENT = frozenset(
    (
        "Input",
        "GetItem",
        "Size",
        "View",
        "Reshape",
        "Flatten",
        "Concat",
        "Cat",
        "Embedding",
        "Identity",
        "Transpose",
        "Permute",
        "Contiguous",
    )
)


@dataclass(frozen=True)
class PipeDreamLayer:
    """One node of a profile.

    Attributes:
        id: the ``N`` of ``nodeN``.
        module: the PyTorch module repr (the middle field).
        forward_ms: measured forward time, milliseconds.
        backward_ms: measured backward time, milliseconds.
        activation_sizes: bytes of each output (one entry unless the file gave a list).
        parameter_bytes: bytes of the layer's weights.
        line: 1-based line number of the node in the text.
    """

    id: int
    module: str
    forward_ms: float
    backward_ms: float
    activation_sizes: tuple[float, ...]
    parameter_bytes: float
    line: int = 0

    @property
    def output_bytes(self) -> float:
        """Summed bytes of all outputs."""
        return math.fsum(self.activation_sizes)


@dataclass(frozen=True)
class PipeDreamProfile:
    """A parsed profile: layers in file order and ``(producer id, consumer id)`` edges in file order."""

    name: str
    layers: tuple[PipeDreamLayer, ...]
    edges: tuple[tuple[int, int], ...]
    source: str = "<text>"

    @property
    def total_forward_ms(self) -> float:
        return math.fsum(layer.forward_ms for layer in self.layers)

    @property
    def total_backward_ms(self) -> float:
        return math.fsum(layer.backward_ms for layer in self.layers)


class _Malformed(Exception):
    """A line-local parse error; :func:`parse_profile` adds the source and line number."""


# ---------------------------------------------------------------------------------- parsing
def parse_profile(text: str, name: str, source: str = "<text>") -> PipeDreamProfile:
    """Parse the text of a PipeDream ``graph.txt`` (format in the module docstring).

    Blank lines are skipped; node and edge lines may come in any order.

    Raises:
        ValueError: ``f"{source}:{line}: ..."`` for a line that is not a node or edge line, a
            missing or repeated field, a value that is not a finite non-negative number, a bracket
            list that does not close, a duplicate node id, an edge naming an unknown node, a
            duplicate edge, or a cycle; a text without any node line. An error on the last
            line of a text without a final newline also asks whether the file is truncated.
    """
    lines = text.splitlines()
    last = max((i for i, line in enumerate(lines, 1) if line.strip()), default=0)
    unterminated = not text.endswith(("\n", "\r"))

    def error(line_no: int, message: str) -> ValueError:
        hint = ""
        if line_no == last and unterminated:
            hint = " (this is the last line and the text does not end with a newline: is it truncated?)"
        return ValueError(f"{source}:{line_no}: {message}{hint}")

    layers: dict[int, PipeDreamLayer] = {}
    edges: dict[tuple[int, int], int] = {}  # (src, dst) -> line
    for line_no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            parts = line.strip().split(" -- ")
            if line[0].isspace() or (len(parts) == 2 and _NODE_ID.match(parts[1].strip())):
                src, dst = _parse_edge(parts)
                if (src, dst) in edges:
                    raise _Malformed(
                        f"duplicate edge node{src} -- node{dst} (first on line {edges[src, dst]}); "
                        "list each edge once"
                    )
                edges[src, dst] = line_no
            else:
                layer = _parse_node(parts, line_no)
                if layer.id in layers:
                    raise _Malformed(
                        f"duplicate node id node{layer.id} (first defined on line "
                        f"{layers[layer.id].line}); node ids must be unique"
                    )
                layers[layer.id] = layer
        except _Malformed as e:
            raise error(line_no, str(e)) from e
    if not layers:
        raise ValueError(
            f"{source}: no node lines (expected lines like {_NODE_LINE}); is it a PipeDream "
            "graph.txt?"
        )

    for (src, dst), line_no in edges.items():
        for node in (src, dst):
            if node not in layers:
                raise error(
                    line_no,
                    f"edge node{src} -- node{dst} names node{node}, which no node line defines "
                    f"(expected one of the {len(layers)} nodes defined as {_NODE_LINE})",
                )
    cycle = _find_cycle(list(layers), list(edges))
    if cycle:
        closing = max(cycle, key=lambda edge: edges[edge])
        path = " -> ".join(f"node{src}" for src, _ in cycle) + f" -> node{cycle[0][0]}"
        raise error(
            edges[closing],
            f"edge node{closing[0]} -- node{closing[1]} closes the cycle {path}; "
            "a layer graph must be acyclic",
        )
    return PipeDreamProfile(
        name=name, layers=tuple(layers.values()), edges=tuple(edges), source=source
    )


def _node_id(text: str, what: str) -> int:
    match = _NODE_ID.match(text.strip())
    if not match:
        raise _Malformed(f"{what} {text.strip()!r} is not a node id; expected 'node<N>'")
    return int(match.group(1))


def _parse_edge(parts: list[str]) -> tuple[int, int]:
    if len(parts) != 2:
        raise _Malformed(
            f"expected an edge line '<TAB>node<A> -- node<B>' (producer -- consumer), "
            f"got {' -- '.join(parts)!r}"
        )
    return _node_id(parts[0], "edge producer"), _node_id(parts[1], "edge consumer")


def _parse_node(parts: list[str], line_no: int) -> PipeDreamLayer:
    shown = " -- ".join(parts)
    if len(parts) < 3:
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        raise _Malformed(f"expected a node line {_NODE_LINE}, got {shown!r}")
    node = _node_id(parts[0], "node")
    module = " -- ".join(parts[1:-1]).strip()
    if not module:
        raise _Malformed(f"node{node} has an empty module repr; expected {_NODE_LINE}")
    fields = _parse_fields(parts[-1])
    missing = [key for key in _FIELDS if key not in fields]
    if missing:
        raise _Malformed(f"node{node} lacks {', '.join(missing)}; a node line is {_NODE_LINE}")
    raw_sizes = fields["activation_size"]
    if raw_sizes.startswith("["):
        if not raw_sizes[1:-1].strip():
            raise _Malformed("activation_size=[] is empty; expected at least one size in bytes")
        sizes = tuple(
            _number("activation_size", item) for item in re.split(r"[;,]", raw_sizes[1:-1])
        )
    else:
        sizes = (_number("activation_size", raw_sizes),)
    return PipeDreamLayer(
        id=node,
        module=module,
        forward_ms=_number("forward_compute_time", fields["forward_compute_time"]),
        backward_ms=_number("backward_compute_time", fields["backward_compute_time"]),
        activation_sizes=sizes,
        parameter_bytes=_number("parameter_size", fields["parameter_size"]),
        line=line_no,
    )


def _parse_fields(text: str) -> dict[str, str]:
    """``key=value, key=[a; b], ...`` -> ``{key: raw value}``."""
    values: dict[str, str] = {}
    pos, end = 0, len(text)
    while pos < end:
        match = _KEY.match(text, pos)
        if not match:
            raise _Malformed(f"expected 'key=value' in the fields, got {text[pos:].strip()!r}")
        key, pos = match.group(1), match.end()
        if text.startswith("[", pos):
            close = text.find("]", pos)
            if close < 0:
                raise _Malformed(
                    f"the bracket list of {key} does not close: expected ']' after "
                    f"{text[pos:].strip()!r}"
                )
            raw, pos = text[pos : close + 1], close + 1
            rest = text[pos:].lstrip()
            if rest and not rest.startswith(","):
                raise _Malformed(f"expected ',' after {key}={raw}, got {rest!r}")
        else:
            comma = text.find(",", pos)
            raw, pos = text[pos : end if comma < 0 else comma], end if comma < 0 else comma
        if key in values:
            raise _Malformed(f"field {key} is given twice")
        values[key] = raw.strip()
        comma = text.find(",", pos)
        pos = end if comma < 0 else comma + 1
    return values


def _number(key: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise _Malformed(
            f"{key}={raw.strip()!r} is not a number; expected a finite non-negative decimal "
            f"in {_UNITS[key]}"
        ) from None
    if not (math.isfinite(value) and value >= 0):
        raise _Malformed(f"{key}={raw.strip()} must be finite and non-negative ({_UNITS[key]})")
    return value


def _find_cycle(nodes: list[int], edges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The edges of one cycle in order, or ``[]`` when the graph is acyclic (Kahn's algorithm)."""
    indegree = dict.fromkeys(nodes, 0)
    consumers: dict[int, list[int]] = defaultdict(list)
    for src, dst in edges:
        indegree[dst] += 1
        consumers[src].append(dst)
    ready = [node for node, deg in indegree.items() if deg == 0]
    while ready:
        node = ready.pop()
        for dst in consumers[node]:
            indegree[dst] -= 1
            if indegree[dst] == 0:
                ready.append(dst)
    remaining = {node for node, deg in indegree.items() if deg > 0}
    if not remaining:
        return []
    # every remaining node has a remaining producer; walking producers must revisit a node
    producer = {dst: src for src, dst in edges if src in remaining and dst in remaining}
    node, walk = min(remaining), []
    while node not in walk:
        walk.append(node)
        node = producer[node]
    cycle = walk[walk.index(node) :][::-1]
    return [(a, b) for a, b in zip(cycle, cycle[1:] + cycle[:1], strict=True)]


# ---------------------------------------------------------------------------------- FLOPs
def op_type(module: str) -> str:
    """Op type of a module repr: its class name, with ``Input<k>``/``hidden`` -> ``Input`` and
    ``__getitem__`` -> ``GetItem``."""
    match = _CLASS.match(module)
    name = match.group(1) if match else "Unknown"
    if re.fullmatch(r"Input\d*", name):
        return "Input"
    return _TYPE_ALIASES.get(name, name)


def _call_args(module: str) -> tuple[list[object], dict[str, object]]:
    """Positional and keyword arguments of a repr ``Name(a, b, key=value)``; values are Python
    literals where they parse (``(3, 3)``, ``True``), else strings (``inplace``)."""
    start, stop = module.find("("), module.rfind(")")
    if start < 0 or stop < start:
        return [], {}
    pieces, depth, begin = [], 0, start + 1
    for i in range(start + 1, stop):
        char = module[i]
        depth += (char in "([") - (char in ")]")
        if char == "," and depth == 0:
            pieces.append(module[begin:i])
            begin = i + 1
    pieces.append(module[begin:stop])
    args: list[object] = []
    kwargs: dict[str, object] = {}
    for piece in (p.strip() for p in pieces if p.strip()):
        key, sep, value = piece.partition("=")
        if sep and key.strip().isidentifier():
            kwargs[key.strip()] = _literal(value)
        else:
            args.append(_literal(piece))
    return args, kwargs


def _literal(text: str) -> object:
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, RecursionError):
        return text.strip()


def _product(value: object, dims: int = 1) -> float:
    """Product of a size tuple; a scalar ``k`` stands for ``k`` in each of ``dims`` dimensions."""
    if isinstance(value, int | float):
        return float(value) ** dims
    if isinstance(value, tuple) and value and all(isinstance(v, int | float) for v in value):
        return float(math.prod(value))
    raise ValueError(f"not a size: {value!r}")


def _compute_rule(kind: str, module: str, out: float) -> float:
    """FLOPs of a Conv/Linear/RNN module repr with ``out`` output elements (first output)."""
    args, kwargs = _call_args(module)
    if kind.startswith("Conv"):
        c_in = _product(kwargs.get("in_channels", args[0]))
        kernel = _product(
            kwargs.get("kernel_size", args[2] if len(args) > 2 else None), int(kind[4])
        )
        groups = _product(kwargs.get("groups", 1))
        return 2.0 * out * (c_in / groups) * kernel
    if kind == "Linear":
        return 2.0 * out * _product(kwargs.get("in_features", args[0] if args else None))
    inputs = _product(kwargs.get("input_size", args[0]))
    hidden = _product(kwargs.get("hidden_size", args[1]))
    num_layers = int(_product(kwargs.get("num_layers", args[2] if len(args) > 2 else 1)))
    dirs = 2.0 if kwargs.get("bidirectional", False) is True else 1.0
    tokens = out / (hidden * dirs)
    gates = _RNN_GATES[kind]
    per_token = sum(
        dirs * 2.0 * gates * hidden * ((inputs if layer == 0 else hidden * dirs) + hidden)
        for layer in range(num_layers)
    )
    return tokens * per_token


def estimate_forward_flops(
    module: str, activation_sizes: Sequence[float], num_inputs: int = 1
) -> float | None:
    """Forward FLOPs of a layer by the rules in the module docstring, or ``None`` when no rule
    applies (the caller then uses the measured time; see ``FALLBACK_FLOPS_PER_SECOND``).

    Args:
        module: the module repr, e.g. ``"Conv2d(3, 64, kernel_size=(3, 3), stride=(1, 1))"``.
        activation_sizes: bytes of each output (fp32).
        num_inputs: number of input edges (for ``Add``/``Mul``).
    """
    kind = op_type(module)
    first = activation_sizes[0] / BYTES_PER_ELEMENT if activation_sizes else 0.0
    total = math.fsum(activation_sizes) / BYTES_PER_ELEMENT
    if kind in _DATA_MOVEMENT:
        return 0.0
    if kind in _PER_ELEMENT:
        return _PER_ELEMENT[kind] * total
    if kind in ("Add", "Mul"):
        return max(1, num_inputs - 1) * total
    if re.fullmatch(r"(Max|Avg)Pool[123]d", kind):
        args, kwargs = _call_args(module)
        try:
            kernel = kwargs.get("kernel_size", args[0] if args else None)
            return total * _product(kernel, int(kind[-2]))
        except ValueError:
            return None
    compute = list(_COMPUTE.finditer(module))
    if len(compute) != 1 or (compute[0].start() != 0 and "): " not in module):
        return None
    match = compute[0]
    depth, stop = 0, len(module)
    for i in range(match.end() - 1, len(module)):
        depth += {"(": 1, ")": -1}.get(module[i], 0)
        if depth == 0:
            stop = i + 1
            break
    try:
        return _compute_rule(match.group(1), module[match.start() : stop], first)
    except (ValueError, IndexError, TypeError, ZeroDivisionError):
        return None


# ---------------------------------------------------------------------------------- graphs
def _edge_bytes(profile: PipeDreamProfile) -> list[float]:
    """Bytes of each edge (file order), by the multi-output rule of the module docstring."""
    layers = {layer.id: layer for layer in profile.layers}
    consumers: dict[int, list[int]] = defaultdict(list)
    for src, dst in profile.edges:
        consumers[src].append(dst)
    result = []
    for src, dst in profile.edges:
        sizes = layers[src].activation_sizes
        size = max(sizes)
        if len(sizes) > 1:
            getitem = re.fullmatch(r"\s*__getitem__\((\d+)\)\s*", layers[dst].module)
            if getitem and int(getitem.group(1)) < len(sizes):
                size = sizes[int(getitem.group(1))]
            elif len(consumers[src]) == len(sizes):
                size = sizes[consumers[src].index(dst)]
        result.append(size)
    return result


def profile_to_graph(
    profile: PipeDreamProfile, *, training: bool = True, kind: str = DEFAULT_KIND
) -> CompGraph:
    """The :class:`CompGraph` of a parsed profile (rules in the module docstring)."""
    name = profile.name
    edge_bytes = _edge_bytes(profile)
    in_bytes: dict[int, float] = defaultdict(float)
    in_count: dict[int, int] = defaultdict(int)
    for (_, dst), nbytes in zip(profile.edges, edge_bytes, strict=True):
        in_bytes[dst] += nbytes
        in_count[dst] += 1
    forward, backward = [], []
    for layer in profile.layers:
        node = f"{name}/node{layer.id}"
        flops = estimate_forward_flops(layer.module, layer.activation_sizes, in_count[layer.id])
        if flops is None:
            flops = layer.forward_ms / 1e3 * FALLBACK_FLOPS_PER_SECOND
        out, params = layer.output_bytes, layer.parameter_bytes
        fwd_bytes = in_bytes[layer.id] + out + params
        kind_type = op_type(layer.module)
        forward.append(
            Op(
                name=node,
                type=kind_type,
                flops=flops,
                bytes_accessed=fwd_bytes,
                output_bytes=out,
                param_bytes=params,
                measured={kind: layer.forward_ms / 1e3},
                colocation=node if training else "",
                layer=node,
            )
        )
        backward.append(
            Op(
                name=f"{node}/backward",
                type=f"{kind_type}Backward",
                flops=flops * (2.0 if params > 0 else 1.0),
                bytes_accessed=2.0 * fwd_bytes,
                output_bytes=in_bytes[layer.id],
                param_bytes=params,
                measured={kind: layer.backward_ms / 1e3},
                colocation=node,
                layer=node,
            )
        )
    edges = [
        (f"{name}/node{src}", f"{name}/node{dst}", nbytes)
        for (src, dst), nbytes in zip(profile.edges, edge_bytes, strict=True)
    ]
    ops = forward
    if training:
        ops = forward + backward
        edges += [
            (f"{name}/node{dst}/backward", f"{name}/node{src}/backward", nbytes)
            for (src, dst), nbytes in zip(profile.edges, edge_bytes, strict=True)
        ]
        edges += [(f.name, b.name, f.output_bytes) for f, b in zip(forward, backward, strict=True)]
    metadata = {"source": "pipedream", "model": name, "kind": kind, "training": training}
    if training:  # the forward ops come first (graph order keeps a topological input order)
        metadata["forward_ops"] = len(forward)
    return CompGraph.build(name, ops, edges, metadata=metadata)


def load_pipedream(
    path: str | os.PathLike[str],
    *,
    training: bool = True,
    kind: str = DEFAULT_KIND,
    name: str | None = None,
) -> CompGraph:
    """Load a PipeDream profile as a :class:`CompGraph` (rules in the module docstring).

    Args:
        path: a ``graph.txt`` file, or the name of a profile in :func:`list_profiles`
            (``"resnet50"``).
        training: add the backward pass (the profiles are of training); ``False`` gives the
            forward graph only.
        kind: device kind the measured times are filed under. Default ``"V100"``: an assumption,
            since the files do not name the GPU (PipeDream's paper used V100s and Titan Xs).
        name: model name, prefix of the op names; default the file stem (the folder name for
            PipeDream's ``<model>/graph.txt`` layout).

    Raises:
        FileNotFoundError: no such file and no profile of that name.
        ValueError: a malformed file (``"<path>:<line>: ..."``, see :func:`parse_profile`).
    """
    file = Path(path)
    if not file.is_file():
        known = list_profiles()
        if str(path) not in known:
            names = ", ".join(known) or f"none in {default_profile_dir()}"
            raise FileNotFoundError(
                f"no PipeDream profile at {str(path)!r}; pass a path to a graph.txt file or the "
                f"name of a known profile: {names}"
            )
        file = known[str(path)]
    if name is None:
        name = file.parent.name if file.stem == "graph" else file.stem
    profile = parse_profile(file.read_text(encoding="utf-8"), name, source=str(file))
    return profile_to_graph(profile, training=training, kind=kind)


# ---------------------------------------------------------------------------------- files
def default_profile_dir() -> Path:
    """The folder of PipeDream profiles: ``$GRAPHOPT_PIPEDREAM_DIR`` when set, else the 14
    profiles shipped with graphopt (:data:`graphopt.data.PIPEDREAM_DIR`).

    Raises:
        ValueError: ``$GRAPHOPT_PIPEDREAM_DIR`` is set but is not a folder.
    """
    env = os.environ.get(ENV_VAR, "").strip()
    if not env:
        return PIPEDREAM_DIR
    folder = Path(env).expanduser()
    if not folder.is_dir():
        raise ValueError(
            f"{ENV_VAR}={env!r} is not a folder; point it at a folder of PipeDream profiles "
            "or unset it to use the profiles shipped with graphopt"
        )
    return folder


def list_profiles(directory: str | os.PathLike[str] | None = None) -> dict[str, Path]:
    """``{model name: file}`` for the profiles in ``directory`` (default
    :func:`default_profile_dir`), sorted by name: every ``<model>.txt`` but licence and readme
    files, and every ``<model>/graph.txt`` (PipeDream's own layout).
    """
    folder = Path(directory) if directory is not None else default_profile_dir()
    found = {
        file.stem: file
        for file in folder.glob("*.txt")
        if file.stem.upper() not in ("LICENSE", "README")
    }
    found.update({file.parent.name: file for file in folder.glob("*/graph.txt")})
    return dict(sorted(found.items()))
