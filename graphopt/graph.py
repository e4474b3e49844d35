"""The computation graph: an immutable DAG of ops stored as arrays in topological order.

A :class:`CompGraph` is what every other part of graphopt reads: the simulator, the baselines, the
environments and the policies. Ops are indexed ``0..N-1`` in a topological order (every edge runs
from a lower to a higher index), so "topological index" is simply the op's index.

Per op (arrays of length ``N``):

========================  ===============================================================
``op_names``              unique name
``op_types``              op type, e.g. ``"MatMul"``, ``"Conv2DBackpropFilter"``
``op_classes``            op class (:mod:`graphopt.op_classes`: elementwise, reduction, contraction,
                          data_movement, opaque, source), used by the fusion rules; derived
                          from the op type when not given
``flops``                 floating-point operations of the op (FLOPs)
``bytes_accessed``        bytes the op's kernel reads plus writes (inputs, parameters, outputs)
``output_bytes``          bytes of the op's output (the activation it produces)
``param_bytes``           bytes of parameters attributed to (resident with) the op
``measured``              optional: ``{device_kind: seconds per op}``, ``NaN`` where not measured
``colocation``            colocation group name, ``""`` for none (a hint for placers)
``layer``                 module path / layer the op belongs to, ``""`` if unknown
``output_shapes``         optional: the op's output shapes, ``None`` where unknown
                          (:mod:`graphopt.shapes`)
``output_dtypes``         optional: one dtype per output, ``None`` where unknown
``input_shapes``          optional: the shapes of its tensor arguments, ``None`` where unknown
``allowed``               optional: the device kinds the op may run on (``Device.kind``), ``()``
                          for any; ``CompGraph.allowed`` is ``()`` when no op is restricted
                          (:mod:`graphopt.constraints` applies it)
========================  ===============================================================

Per edge (arrays of length ``E``, sorted by ``(src, dst)``): ``edge_src``, ``edge_dst`` (op indices)
and ``edge_bytes`` (bytes of the tensor carried from producer to consumer).

All costs are SI units: seconds, bytes, FLOPs.

File format (``graphopt-graph``, version 3), JSON, optionally gzip-compressed when the path ends
in ``.gz``; columnar so that large graphs load quickly::

    {
      "format": "graphopt-graph", "version": 3,
      "name": "gnmt-2", "metadata": {...},
      "ops": {"name": [...], "type": [...], "class": [...], "flops": [...], "bytes": [...],
              "output_bytes": [...], "param_bytes": [...], "layer": [...], "colocation": [...],
              "shapes": [[[8, 64], ...] or null, ...], "dtypes": [["float32", ...] or null, ...],
              "input_shapes": [[[8, 32], [32, 64]] or null, ...]},
      "measured": {"V100": [seconds or null, ...]},
      "edges": {"src": [op name, ...], "dst": [op name, ...], "bytes": [...]}
    }

``class``, ``layer``, ``colocation``, ``measured`` and ``metadata`` may be omitted (a missing class
is derived from the op type). So may ``shapes``, ``dtypes`` and ``input_shapes`` (version 3; missing
shapes are unknown, ``null`` marks one op's as unknown, and known output shapes and dtypes must add
up to the op's ``output_bytes``: :mod:`graphopt.shapes`); version 2 files have none. The optional ``ops.allowed`` column holds, per op, a list of the
device kinds it may run on (``[]``: any kind), e.g. ``[[], ["CPU"], []]``; it is written only when
some op is restricted, and files of versions 2 and later load with or without it. Version 1 files (no ``class`` column) still load. Ops may be listed in any
order (they are sorted topologically on load; files written by graphopt are already sorted); a
loaded graph keeps the file's order in ``file_order``, so that per-op lists written in that order
(a placement) are read right (:meth:`CompGraph.from_file_order`).
Floats are written with Python's shortest round-tripping repr, so save/load is lossless.
"""

from __future__ import annotations

import gzip
import hashlib
import heapq
import json
import math
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from graphopt.file_set import write_file
from graphopt.op_classes import check_class, classify
from graphopt.shapes import Shape, check_op_tensors, parse_dtypes, parse_shapes
from graphopt.typing import FloatArray, IntArray
from graphopt.weights import pickle_refusal

FORMAT_NAME = "graphopt-graph"
FORMAT_VERSION = 3
READ_VERSIONS = (1, 2, 3)
"""Graph file versions this graphopt reads (version 1 has no op classes: they are derived;
version 2 no shapes: they are unknown)."""


@dataclass(frozen=True)
class Op:
    """One op, as given to :meth:`CompGraph.build` (a convenience for hand-made graphs)."""

    name: str
    type: str
    flops: float = 0.0
    bytes_accessed: float = 0.0
    output_bytes: float = 0.0
    param_bytes: float = 0.0
    measured: Mapping[str, float] = field(default_factory=dict)
    colocation: str = ""
    layer: str = ""
    op_class: str = ""
    """Its class (:mod:`graphopt.op_classes`); empty: derived from ``type``."""
    output_shapes: tuple[Shape, ...] | None = None
    """Its output shapes (:mod:`graphopt.shapes`); ``None``: unknown."""
    output_dtypes: tuple[str, ...] | None = None
    input_shapes: tuple[Shape, ...] | None = None
    allowed: tuple[str, ...] = ()
    """The device kinds it may run on; empty: any."""


def _readonly(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


@dataclass(frozen=True, eq=False)
class CompGraph:
    """An immutable computation graph in topological order. Build it with :meth:`build` or
    :meth:`from_arrays`; both validate and sort. See the module docstring for the fields."""

    name: str
    op_names: tuple[str, ...]
    op_types: tuple[str, ...]
    flops: FloatArray
    bytes_accessed: FloatArray
    output_bytes: FloatArray
    param_bytes: FloatArray
    edge_src: IntArray
    edge_dst: IntArray
    edge_bytes: FloatArray
    measured: Mapping[str, FloatArray] = field(default_factory=dict)
    colocation: tuple[str, ...] = ()
    layer: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    op_classes: tuple[str, ...] = ()
    file_order: IntArray | None = None
    """The index of each op in the order its graph file lists them (``file_order[j]`` is the op
    listed ``j``-th); ``None`` when the graph was not read from a file (:meth:`from_json_dict`) or
    the file lists its ops in this order already. Not part of the content (:attr:`fingerprint`)."""
    output_shapes: tuple[tuple[Shape, ...] | None, ...] = ()
    """Per op, its output shapes or ``None`` (unknown); ``()``: no op's is known."""
    output_dtypes: tuple[tuple[str, ...] | None, ...] = ()
    """Per op, one dtype per output or ``None``; ``()``: no op's is known."""
    input_shapes: tuple[tuple[Shape, ...] | None, ...] = ()
    """Per op, the shapes of its tensor arguments or ``None``; ``()``: no op's is known."""
    allowed: tuple[tuple[str, ...], ...] = ()
    """Per op, the device kinds it may run on (``()``: any kind); ``()`` when no op is
    restricted (the module docstring; :mod:`graphopt.constraints` applies it)."""

    # ------------------------------------------------------------------ construction
    @classmethod
    def build(
        cls,
        name: str,
        ops: Sequence[Op],
        edges: Iterable[tuple[str, str, float]],
        metadata: Mapping[str, Any] | None = None,
    ) -> CompGraph:
        """Build a graph from :class:`Op` objects and ``(producer, consumer, bytes)`` edges.

        Raises:
            ValueError: duplicate op names, edges naming unknown ops, duplicate edges, a cycle,
                or a negative / NaN / infinite cost.
        """
        kinds = sorted({kind for op in ops for kind in op.measured})
        measured = {
            kind: np.array([op.measured.get(kind, math.nan) for op in ops], dtype=np.float64)
            for kind in kinds
        }
        edge_list = list(edges)
        return cls.from_arrays(
            name=name,
            op_names=[op.name for op in ops],
            op_types=[op.type for op in ops],
            flops=[op.flops for op in ops],
            bytes_accessed=[op.bytes_accessed for op in ops],
            output_bytes=[op.output_bytes for op in ops],
            param_bytes=[op.param_bytes for op in ops],
            edge_src=[e[0] for e in edge_list],
            edge_dst=[e[1] for e in edge_list],
            edge_bytes=[e[2] for e in edge_list],
            measured=measured,
            colocation=[op.colocation for op in ops],
            layer=[op.layer for op in ops],
            metadata=metadata,
            op_classes=[op.op_class for op in ops],
            output_shapes=[op.output_shapes for op in ops],
            output_dtypes=[op.output_dtypes for op in ops],
            input_shapes=[op.input_shapes for op in ops],
            allowed=[op.allowed for op in ops],
        )

    @classmethod
    def from_arrays(
        cls,
        name: str,
        op_names: Sequence[str],
        op_types: Sequence[str],
        flops: ArrayLike,
        bytes_accessed: ArrayLike,
        output_bytes: ArrayLike,
        param_bytes: ArrayLike,
        edge_src: ArrayLike,
        edge_dst: ArrayLike,
        edge_bytes: ArrayLike,
        measured: Mapping[str, ArrayLike] | None = None,
        colocation: Sequence[str] | None = None,
        layer: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        op_classes: Sequence[str] | None = None,
        output_shapes: Sequence[Any] | None = None,
        output_dtypes: Sequence[Any] | None = None,
        input_shapes: Sequence[Any] | None = None,
        allowed: Sequence[Sequence[str]] | None = None,
    ) -> CompGraph:
        """Validate columns, sort ops topologically (stable: input order wins among ready ops)
        and return the graph.

        ``edge_src``/``edge_dst`` hold either op indices (ints, into the given op order) or op names.
        ``op_classes``: one class per op, ``""`` (or no column) to derive it from the op type.
        ``output_shapes``, ``output_dtypes``, ``input_shapes``: one entry per op (lists of shapes,
        of dtype names; ``None`` where unknown), or no column (:mod:`graphopt.shapes`).
        ``allowed``: per op the device kinds it may run on, empty for any (or no column).

        Raises:
            ValueError: see :meth:`build`.
        """
        for column, values in (("op names", op_names), ("op types", op_types)):
            if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
                raise ValueError(
                    f"graph {name!r}: {column} must be a list of strings, got {type(values).__name__}"
                )
        names = [str(n) for n in op_names]
        n = len(names)
        index: dict[str, int] = {}
        for i, op_name in enumerate(names):
            if op_name in index:
                raise ValueError(
                    f"graph {name!r}: duplicate op name {op_name!r} (ops {index[op_name]} and {i}); "
                    "op names must be unique"
                )
            index[op_name] = i
        types = [str(t) for t in op_types]
        columns = {
            "flops": flops,
            "bytes_accessed": bytes_accessed,
            "output_bytes": output_bytes,
            "param_bytes": param_bytes,
        }
        arrays = {key: _cost_column(name, key, value, n, names) for key, value in columns.items()}
        if len(types) != n:
            raise ValueError(f"graph {name!r}: {len(types)} op types for {n} ops")
        given = [str(c) for c in op_classes] if op_classes is not None else [""] * n
        if len(given) != n:
            raise ValueError(f"graph {name!r}: {len(given)} op classes for {n} ops")
        classes = [
            check_class(c, f"graph {name!r}, op {names[i]!r}") if c else classify(types[i])
            for i, c in enumerate(given)
        ]
        meas = {
            str(kind): _cost_column(name, f"measured[{kind}]", value, n, names, allow_nan=True)
            for kind, value in (measured or {}).items()
        }
        coloc = [str(c) for c in colocation] if colocation is not None else [""] * n
        lay = [str(c) for c in layer] if layer is not None else [""] * n
        if len(coloc) != n or len(lay) != n:
            raise ValueError(f"graph {name!r}: colocation/layer columns must have {n} entries")
        tensors = _tensor_columns(
            name, names, arrays["output_bytes"], output_shapes, output_dtypes, input_shapes
        )
        kinds_allowed = _allowed_column(name, allowed, n, names)

        src = _edge_endpoints(name, edge_src, index, names, "producer")
        dst = _edge_endpoints(name, edge_dst, index, names, "consumer")
        if len(src) != len(dst):
            raise ValueError(f"graph {name!r}: {len(src)} edge producers but {len(dst)} consumers")
        ebytes = _cost_column(name, "edge bytes", edge_bytes, len(src), None)

        order = _topological_order(name, n, src, dst, names)
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n, dtype=np.int64)
        new_src, new_dst = rank[src], rank[dst]
        edge_order = np.lexsort((new_dst, new_src))
        new_src, new_dst, ebytes = new_src[edge_order], new_dst[edge_order], ebytes[edge_order]
        if len(new_src) > 1:
            dup = np.flatnonzero((new_src[1:] == new_src[:-1]) & (new_dst[1:] == new_dst[:-1]))
            if len(dup):
                a, b = order[new_src[dup[0]]], order[new_dst[dup[0]]]
                raise ValueError(
                    f"graph {name!r}: duplicate edge {names[a]!r} -> {names[b]!r}; "
                    "merge them into one edge carrying the summed bytes"
                )
        return cls(
            name=str(name),
            op_names=tuple(names[i] for i in order),
            op_types=tuple(types[i] for i in order),
            **{key: _readonly(value[order]) for key, value in arrays.items()},
            edge_src=_readonly(new_src.astype(np.int64)),
            edge_dst=_readonly(new_dst.astype(np.int64)),
            edge_bytes=_readonly(ebytes),
            measured={kind: _readonly(v[order]) for kind, v in sorted(meas.items())},
            colocation=tuple(coloc[i] for i in order),
            layer=tuple(lay[i] for i in order),
            metadata=dict(metadata or {}),
            op_classes=tuple(classes[i] for i in order),
            output_shapes=_ordered(tensors["output_shapes"], order),
            output_dtypes=_ordered(tensors["output_dtypes"], order),
            input_shapes=_ordered(tensors["input_shapes"], order),
            allowed=tuple(kinds_allowed[i] for i in order) if kinds_allowed else (),
        )

    # ------------------------------------------------------------------ basic views
    @property
    def num_ops(self) -> int:
        return len(self.op_names)

    @property
    def num_edges(self) -> int:
        return len(self.edge_src)

    def __len__(self) -> int:
        return self.num_ops

    def __repr__(self) -> str:
        return (
            f"CompGraph(name={self.name!r}, ops={self.num_ops}, edges={self.num_edges}, "
            f"gflops={self.flops.sum() / 1e9:.3g})"
        )

    @cached_property
    def index(self) -> dict[str, int]:
        """Op name -> topological index."""
        return {name: i for i, name in enumerate(self.op_names)}

    @cached_property
    def successors_csr(self) -> tuple[IntArray, IntArray]:
        """``(indptr, indices)``: the consumers of op ``i`` are ``indices[indptr[i]:indptr[i+1]]``
        (ascending). The edge ids are the positions themselves, since edges are sorted by source."""
        indptr = np.zeros(self.num_ops + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.edge_src, minlength=self.num_ops), out=indptr[1:])
        return _readonly(indptr), self.edge_dst

    @cached_property
    def predecessors_csr(self) -> tuple[IntArray, IntArray, IntArray]:
        """``(indptr, indices, edge_ids)``: producers of op ``i`` and the ids of those edges."""
        perm = np.lexsort((self.edge_src, self.edge_dst))
        indptr = np.zeros(self.num_ops + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.edge_dst, minlength=self.num_ops), out=indptr[1:])
        return _readonly(indptr), _readonly(self.edge_src[perm]), _readonly(perm.astype(np.int64))

    @cached_property
    def fingerprint(self) -> str:
        """A SHA-256 of the graph's content (names, types, costs, edges, placement constraints):
        equal graphs, equal hash. Shapes and dtypes are left out (:attr:`tensor_fingerprint`):
        they describe the same costs, so a graph that gained them (an import of a newer graphopt)
        keeps its hash and the decisions saved for it."""
        h = hashlib.sha256()
        h.update(self.name.encode())
        h.update("\0".join(self.op_names).encode())
        h.update("\0".join(self.op_types).encode())
        h.update("\0".join(self.op_classes).encode())
        for arr in (self.flops, self.bytes_accessed, self.output_bytes, self.param_bytes):
            h.update(arr.tobytes())
        for kind, arr in self.measured.items():
            h.update(kind.encode())
            h.update(arr.tobytes())
        for edge_column in (self.edge_src, self.edge_dst, self.edge_bytes):
            h.update(edge_column.tobytes())
        if self.allowed:  # an unrestricted graph hashes as before the column existed
            h.update(json.dumps(self.allowed).encode())
        return h.hexdigest()

    @cached_property
    def tensor_fingerprint(self) -> str:
        """A SHA-256 of the shapes and dtypes alone (empty string without any): what a cost model
        that reads them (``op_times: learned``) adds to :attr:`fingerprint`."""
        if not self.has_shapes:
            return ""
        tensors = (self.output_shapes, self.output_dtypes, self.input_shapes)
        return hashlib.sha256(repr(tensors).encode()).hexdigest()

    @property
    def has_shapes(self) -> bool:
        """Whether any op carries a shape or dtype (:mod:`graphopt.shapes`)."""
        return bool(self.output_shapes or self.output_dtypes or self.input_shapes)

    def summary(self) -> dict[str, Any]:
        """Counts and totals for display: ops, edges, FLOPs, bytes, op-type histogram."""
        types, counts = np.unique(np.array(self.op_types, dtype=object), return_counts=True)
        return {
            "name": self.name,
            "ops": self.num_ops,
            "edges": self.num_edges,
            "total_flops": float(self.flops.sum()),
            "total_bytes_accessed": float(self.bytes_accessed.sum()),
            "total_param_bytes": float(self.param_bytes.sum()),
            "total_edge_bytes": float(self.edge_bytes.sum()),
            "measured_kinds": list(self.measured),
            "op_types": {
                str(t): int(c)
                for t, c in sorted(zip(types, counts, strict=True), key=lambda x: -x[1])
            },
        }

    def from_file_order(self, values: ArrayLike) -> np.ndarray:
        """Per-op ``values`` listed in the graph file's op order, rearranged into the graph's
        (topological) op order; unchanged where the two agree (:attr:`file_order`).

        The file's order is what a user sees in the graph file (``graphopt graphs export`` writes
        the topological order, so an exported graph's file order is the graph's own).

        Raises:
            ValueError: ``values`` does not hold one entry per op.
        """
        values = np.asarray(values)
        if values.ndim != 1 or len(values) != self.num_ops:
            raise ValueError(
                f"graph {self.name!r} has {self.num_ops} ops, but {values.shape} values were "
                "given; give one value per op, in the graph file's op order"
            )
        if self.file_order is None:
            return values
        ordered = np.empty_like(values)
        ordered[self.file_order] = values
        return ordered

    # ------------------------------------------------------------------ file format
    def to_json_dict(self) -> dict[str, Any]:
        """The file-format dict (see the module docstring)."""
        return {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "name": self.name,
            "metadata": dict(self.metadata),
            "ops": {
                "name": list(self.op_names),
                "type": list(self.op_types),
                "class": list(self.op_classes),
                "flops": self.flops.tolist(),
                "bytes": self.bytes_accessed.tolist(),
                "output_bytes": self.output_bytes.tolist(),
                "param_bytes": self.param_bytes.tolist(),
                "layer": list(self.layer),
                "colocation": list(self.colocation),
                **{
                    key: [_listed(v) for v in column]
                    for key, column in (
                        ("shapes", self.output_shapes),
                        ("dtypes", self.output_dtypes),
                        ("input_shapes", self.input_shapes),
                    )
                    if column
                },
                **({"allowed": [list(a) for a in self.allowed]} if self.allowed else {}),
            },
            "measured": {
                kind: [None if math.isnan(v) else v for v in arr.tolist()]
                for kind, arr in self.measured.items()
            },
            "edges": {
                "src": [self.op_names[i] for i in self.edge_src.tolist()],
                "dst": [self.op_names[i] for i in self.edge_dst.tolist()],
                "bytes": self.edge_bytes.tolist(),
            },
        }

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any], source: str = "<dict>") -> CompGraph:
        """Parse the file-format dict.

        Raises:
            ValueError: wrong format or version, missing keys, or any graph error of :meth:`build`.
        """
        if not isinstance(data, Mapping) or data.get("format") != FORMAT_NAME:
            raise ValueError(
                f'{source}: not a graphopt graph file (expected "format": "{FORMAT_NAME}")'
            )
        version = data.get("version")
        if isinstance(version, bool) or version not in READ_VERSIONS:
            raise ValueError(
                f"{source}: graph file version {version!r} is not supported; this graphopt reads "
                f"versions {', '.join(map(str, READ_VERSIONS))} (re-export the graph with a "
                "matching graphopt)"
            )
        try:
            ops, edges = data["ops"], data["edges"]
            measured = {
                kind: [math.nan if v is None else v for v in values]
                for kind, values in data.get("measured", {}).items()
            }
            graph = cls.from_arrays(
                name=data["name"],
                op_names=ops["name"],
                op_types=ops["type"],
                flops=ops["flops"],
                bytes_accessed=ops["bytes"],
                output_bytes=ops["output_bytes"],
                param_bytes=ops["param_bytes"],
                edge_src=edges["src"],
                edge_dst=edges["dst"],
                edge_bytes=edges["bytes"],
                measured=measured,
                colocation=ops.get("colocation"),
                layer=ops.get("layer"),
                metadata=data.get("metadata", {}),
                op_classes=ops.get("class"),
                output_shapes=ops.get("shapes"),
                output_dtypes=ops.get("dtypes"),
                input_shapes=ops.get("input_shapes"),
                allowed=ops.get("allowed"),
            )
        except KeyError as e:
            raise ValueError(f"{source}: graph file is missing the key {e.args[0]!r}") from e
        except (TypeError, AttributeError) as e:
            raise ValueError(f"{source}: malformed graph file: {e}") from e
        except ValueError as e:  # a bad column or op: the file named first (<dict>: as it is)
            if source == "<dict>" or str(e).startswith(source):
                raise
            raise ValueError(f"{source}: {e}") from e
        file_order = np.array([graph.index[str(n)] for n in ops["name"]], dtype=np.int64)
        if np.array_equal(file_order, np.arange(graph.num_ops)):
            return graph
        return replace(graph, file_order=_readonly(file_order))

    def save(self, path: str | Path) -> Path:
        """Write the graph file (gzip when ``path`` ends in ``.gz``), whole or not at all
        (:func:`graphopt.file_set.write_file`); returns the path.

        Raises:
            ValueError: the file cannot be written (one line naming it).
        """
        path = Path(path)
        return write_file(path, self.file_content(gzipped=path.suffix == ".gz"))

    def file_content(self, gzipped: bool = False) -> str | bytes:
        """What :meth:`save` writes: the graph file's JSON text, or its gzip bytes."""
        text = json.dumps(self.to_json_dict(), separators=(",", ":"))
        return gzip.compress(text.encode("utf-8"), mtime=0) if gzipped else text

    @classmethod
    def load(cls, path: str | Path) -> CompGraph:
        """Read a graph file written by :meth:`save` (or by hand, following the format).

        Raises:
            ValueError: unreadable JSON, wrong format or version, or an invalid graph.
        """
        path = Path(path)
        if not path.exists():
            raise ValueError(f"graph file {str(path)!r} does not exist")
        try:
            if path.suffix == ".gz":
                with gzip.open(path, "rt", encoding="utf-8") as f:
                    data = json.load(f)
            else:
                data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError, OSError, EOFError, zlib.error) as e:
            pickled = pickle_refusal(path, "give a graph file (JSON, or JSON.gz)")
            if pickled is not None:
                raise ValueError(pickled) from None
            raise ValueError(f"{path}: cannot read graph file: {e}") from e
        except RecursionError:
            raise ValueError(f"{path}: not a graph file: JSON nested too deeply") from None
        return cls.from_json_dict(data, source=str(path))

    # ------------------------------------------------------------------ networkx
    def to_networkx(self) -> Any:
        """A ``networkx.DiGraph``: node attributes are the op columns, edges carry ``bytes``.

        A node's ``measured`` dict holds only the kinds measured for that op; the graph attribute
        ``measured_kinds`` lists every kind, so that a kind measured for no op survives the trip."""
        import networkx as nx

        g = nx.DiGraph(
            name=self.name, metadata=dict(self.metadata), measured_kinds=list(self.measured)
        )
        for i, op_name in enumerate(self.op_names):
            g.add_node(
                op_name,
                type=self.op_types[i],
                op_class=self.op_classes[i],
                flops=float(self.flops[i]),
                bytes=float(self.bytes_accessed[i]),
                output_bytes=float(self.output_bytes[i]),
                param_bytes=float(self.param_bytes[i]),
                measured={k: float(v[i]) for k, v in self.measured.items() if not math.isnan(v[i])},
                colocation=self.colocation[i],
                layer=self.layer[i],
                allowed=list(self.allowed[i]) if self.allowed else [],
                output_shapes=self.output_shapes[i] if self.output_shapes else None,
                output_dtypes=self.output_dtypes[i] if self.output_dtypes else None,
                input_shapes=self.input_shapes[i] if self.input_shapes else None,
            )
        for s, d, b in zip(
            self.edge_src.tolist(), self.edge_dst.tolist(), self.edge_bytes.tolist(), strict=True
        ):
            g.add_edge(self.op_names[s], self.op_names[d], bytes=b)
        return g

    @classmethod
    def from_networkx(cls, g: Any, name: str | None = None) -> CompGraph:
        """Inverse of :meth:`to_networkx`. Missing node attributes default to 0 / ``""``; the
        ``type`` attribute defaults to ``"Op"``, ``op_class`` to the type's class; missing edge ``bytes`` defaults to the producer's
        ``output_bytes``. Kinds named in the graph attribute ``measured_kinds`` but measured for
        no op become all-``NaN`` columns."""
        ops = []
        for node, attrs in g.nodes(data=True):
            ops.append(
                Op(
                    name=str(node),
                    type=str(attrs.get("type", "Op")),
                    flops=attrs.get("flops", 0.0),
                    bytes_accessed=attrs.get("bytes", 0.0),
                    output_bytes=attrs.get("output_bytes", 0.0),
                    param_bytes=attrs.get("param_bytes", 0.0),
                    measured=dict(attrs.get("measured", {})),
                    colocation=str(attrs.get("colocation", "")),
                    layer=str(attrs.get("layer", "")),
                    op_class=str(attrs.get("op_class", "")),
                    allowed=tuple(str(k) for k in attrs.get("allowed", ())),
                    output_shapes=attrs.get("output_shapes"),
                    output_dtypes=attrs.get("output_dtypes"),
                    input_shapes=attrs.get("input_shapes"),
                )
            )
        out_bytes = {op.name: op.output_bytes for op in ops}
        edges = [
            (str(u), str(v), attrs.get("bytes", out_bytes[str(u)]))
            for u, v, attrs in g.edges(data=True)
        ]
        graph_name = name if name is not None else str(g.graph.get("name") or "graph")
        unmeasured = set(g.graph.get("measured_kinds", ())) - {k for op in ops for k in op.measured}
        if unmeasured and ops:
            # build() derives the kinds from the ops; one NaN entry on the first op keeps the column.
            first = ops[0]
            nan_kinds = dict.fromkeys(sorted(unmeasured), math.nan)
            ops[0] = replace(first, measured={**first.measured, **nan_kinds})
        return cls.build(graph_name, ops, edges, metadata=g.graph.get("metadata"))


# ---------------------------------------------------------------------- validation helpers
def _cost_column(
    graph: str,
    key: str,
    values: ArrayLike,
    n: int,
    names: Sequence[str] | None,
    allow_nan: bool = False,
) -> FloatArray:
    if isinstance(values, (str, bytes)) or np.asarray(values).dtype.kind in "bOUS":
        kinds = sorted({type(v).__name__ for v in np.asarray(values, dtype=object).reshape(-1)})
        if kinds != ["float"] and kinds != ["int"] and kinds != ["float", "int"]:
            raise ValueError(
                f"graph {graph!r}: column {key!r} is not numeric: it holds {', '.join(kinds)}"
            )
    try:
        arr = np.array(values, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError, OverflowError) as e:
        raise ValueError(f"graph {graph!r}: column {key!r} is not numeric: {e}") from e
    if len(arr) != n:
        raise ValueError(f"graph {graph!r}: column {key!r} has {len(arr)} entries, expected {n}")
    nan = np.isnan(arr)
    bad = np.isinf(arr) | (arr < 0)
    if not allow_nan:
        bad |= nan
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        where = f"op {names[i]!r}" if names is not None else f"edge #{i}"
        raise ValueError(
            f"graph {graph!r}: {where} has {key} = {float(arr[i])!r}; costs must be finite and >= 0"
            + (" (NaN marks 'not measured')" if allow_nan else "")
        )
    # Canonical bits, so that equal graphs hash equal (fingerprint) before and after a save/load:
    # -0.0 becomes 0.0, and every NaN (0/0 gives a negative one on x86) the standard quiet NaN.
    arr += 0.0
    arr[nan] = np.nan
    return arr


def _allowed_column(
    graph: str, values: object, n: int, names: Sequence[str]
) -> list[tuple[str, ...]]:
    """The ``allowed`` column as one tuple of device kinds per op (sorted, unique), or ``[]`` when
    it is missing or restricts no op; ``ValueError`` naming the op for a bad entry."""
    if values is None:
        return []
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Sequence):
        raise ValueError(
            f"graph {graph!r}: column 'allowed' must be a list with one list of device kinds per "
            f"op, got {type(values).__name__}"
        )
    if len(values) != n:
        raise ValueError(
            f"graph {graph!r}: column 'allowed' has {len(values)} entries, expected {n} "
            "(one list of device kinds per op, [] for any kind)"
        )
    out = []
    for i, kinds in enumerate(values):
        if isinstance(kinds, (str, bytes, Mapping)) or not isinstance(kinds, Sequence):
            raise ValueError(
                f"graph {graph!r}: op {names[i]!r} has allowed = {kinds!r}; give a list of "
                'device kinds such as ["CPU"], or [] for any kind'
            )
        bad = [k for k in kinds if not isinstance(k, str) or not k]
        if bad:
            raise ValueError(
                f"graph {graph!r}: op {names[i]!r} has allowed kind {bad[0]!r}; device kinds are "
                'non-empty strings such as "CPU" or "V100"'
            )
        out.append(tuple(sorted(set(kinds))))
    return out if any(out) else []


def _ordered(column: list[Any], order: IntArray) -> tuple[Any, ...]:
    """A per-op column in topological order; ``()`` stays ``()`` (no op has a value)."""
    return tuple(column[i] for i in order) if column else ()


def _listed(value: Any) -> Any:
    """Tuples as lists (the JSON form of a shape column entry); ``None`` stays."""
    if isinstance(value, tuple):
        return [_listed(v) for v in value]
    return value


def _tensor_columns(
    graph: str,
    names: Sequence[str],
    output_bytes: FloatArray,
    output_shapes: Sequence[Any] | None,
    output_dtypes: Sequence[Any] | None,
    input_shapes: Sequence[Any] | None,
) -> dict[str, list[Any]]:
    """The shape and dtype columns parsed and checked (:mod:`graphopt.shapes`); a column that is
    missing or all ``None`` comes back empty."""
    n = len(names)
    columns = {
        "output_shapes": (output_shapes, parse_shapes, "shapes"),
        "output_dtypes": (output_dtypes, parse_dtypes, "dtypes"),
        "input_shapes": (input_shapes, parse_shapes, "input_shapes"),
    }
    out: dict[str, list[Any]] = {}
    for key, (values, parse, label) in columns.items():
        if values is None:
            out[key] = []
            continue
        if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Sequence):
            raise ValueError(
                f"graph {graph!r}: column {label!r} must be a list with one entry per op"
            )
        if len(values) != n:
            raise ValueError(
                f"graph {graph!r}: column {label!r} has {len(values)} entries, expected {n}"
            )
        try:
            parsed = [parse(v, "") for v in values]
        except ValueError:  # again, op by op, to name the op
            parsed = [parse(v, f"graph {graph!r}, op {names[i]!r}") for i, v in enumerate(values)]
        out[key] = parsed if any(p is not None for p in parsed) else []
    shapes, dtypes = out["output_shapes"], out["output_dtypes"]
    if shapes and dtypes:
        for i in range(n):
            check_op_tensors(
                shapes[i], dtypes[i], float(output_bytes[i]), f"graph {graph!r}, op {names[i]!r}"
            )
    return out


def _edge_endpoints(
    graph: str, values: Any, index: Mapping[str, int], names: Sequence[str], role: str
) -> IntArray:
    values = list(values)
    n = len(names)
    out = np.empty(len(values), dtype=np.int64)
    for k, v in enumerate(values):
        if isinstance(v, str):
            i = index.get(v)
            if i is None:
                raise ValueError(
                    f"graph {graph!r}: edge #{k} has unknown {role} op {v!r}; "
                    "every edge endpoint must be the name of an op in the graph"
                )
        elif isinstance(v, (int, np.integer)) and not isinstance(v, bool):
            i = int(v)
            if not 0 <= i < n:
                raise ValueError(
                    f"graph {graph!r}: edge #{k} has {role} index {i}, outside [0, {n})"
                )
        else:
            raise ValueError(
                f"graph {graph!r}: edge #{k} {role} {v!r} is neither a name nor an index"
            )
        out[k] = i
    return out


def _topological_order(
    graph: str, n: int, src: IntArray, dst: IntArray, names: Sequence[str]
) -> IntArray:
    """Kahn's algorithm, always taking the ready op with the smallest input index (so an input
    already in topological order is kept as is). Raises ``ValueError`` naming a cycle."""
    if len(src) == 0 or bool(np.all(src < dst)):
        return np.arange(n, dtype=np.int64)
    indeg = np.bincount(dst, minlength=n).astype(np.int64)
    order_e = np.argsort(src, kind="stable")
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=indptr[1:])
    succ = dst[order_e].tolist()
    ptr = indptr.tolist()
    deg = indeg.tolist()
    ready = [i for i in range(n) if deg[i] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        u = heapq.heappop(ready)
        order.append(u)
        for v in succ[ptr[u] : ptr[u + 1]]:
            deg[v] -= 1
            if deg[v] == 0:
                heapq.heappush(ready, v)
    if len(order) < n:
        raise ValueError(f"graph {graph!r}: {_describe_cycle(n, src, dst, deg, names)}")
    return np.array(order, dtype=np.int64)


def _describe_cycle(
    n: int, src: IntArray, dst: IntArray, deg: list[int], names: Sequence[str]
) -> str:
    """Every op left with in-degree > 0 after Kahn's algorithm has a predecessor also left over;
    walking predecessors from any of them must revisit an op, which lies on a cycle."""
    remaining = {i for i in range(n) if deg[i] > 0}
    pred: dict[int, int] = {}
    for s, d in zip(src.tolist(), dst.tolist(), strict=True):
        if s in remaining and d in remaining and d not in pred:
            pred[d] = s
    node = min(remaining)
    seen: dict[int, int] = {}
    walk: list[int] = []
    while node not in seen:
        seen[node] = len(walk)
        walk.append(node)
        node = pred[node]
    cycle = walk[seen[node] :][::-1]
    path = " -> ".join(repr(names[i]) for i in cycle + [cycle[0]])
    return f"the graph has a cycle through op {names[cycle[0]]!r}: {path}; a computation graph must be acyclic"
