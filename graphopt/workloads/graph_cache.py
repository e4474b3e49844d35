"""A disk cache of built graphs, so that a training distribution of hundreds of graphs loads in
seconds: :func:`load_graphs`.

Which graphs: ``gen:`` names (:mod:`graphopt.workloads.generated`) and ``torch:`` zoo names
(:mod:`graphopt.importers.zoo`); any other name (a built-in, ``pipedream:``, a graph file) is
resolved by :func:`~graphopt.workloads.registry.get_graph` as usual. A zoo graph missing here is
taken from the zoo's own cache (:func:`~graphopt.importers.zoo.load_zoo`, imported only there),
and kept here too, in the fast format below.

Where: ``cache_dir``, else ``$GRAPHOPT_CACHE_DIR/graphs``, else ``~/.cache/graphopt/graphs``
(:func:`graphopt.disk_cache.cache_root`); one file per graph, ``<family>-<digest>.npz``.

Key (its SHA-256 names the file, and the file holds it whole): the canonical name and

- for ``gen:`` names, :data:`GENERATOR_VERSION` and a digest of the builders' source
  (:data:`SOURCE_FILES`), so that an edited builder never serves a stale graph;
- for ``torch:`` names, the torch version (and transformers', for its models) and the zoo's
  :data:`~graphopt.importers.zoo.CACHE_VERSION`;
- the op-class table's digest (:data:`graphopt.op_classes.TABLE_DIGEST`) and :data:`CACHE_FORMAT`.

Format (a performance trick: JSON graph files parse and re-validate every op, ~30 ms for 1,000
ops): a compressed ``.npz`` of the graph's arrays, read with ``allow_pickle=False``; the strings as
one UTF-8 text with their lengths, shapes as flat integer arrays. A file is trusted only when its
key matches and the graph it decodes passes cheap structural checks (edges topological, sorted
and unique, costs finite and non-negative, classes known, names unique) and hashes to the
:attr:`~graphopt.graph.CompGraph.fingerprint` and
:attr:`~graphopt.graph.CompGraph.tensor_fingerprint` it was saved with. Anything else (a damaged,
truncated or foreign file) is rebuilt and rewritten, without a traceback. The slow twin is
:meth:`CompGraph.from_json_dict`: the tests check that both give equal graphs. Writes are atomic;
an unwritable folder gives one warning line and graphs built in memory
(:mod:`graphopt.disk_cache`).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import logging
import time
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from graphopt import disk_cache
from graphopt.graph import CompGraph
from graphopt.importers import zoo
from graphopt.op_classes import OP_CLASSES, TABLE_DIGEST
from graphopt.workloads import generated

GENERATOR_VERSION = 1
"""Bump when a ``gen:`` family builds different graphs for the same name without a source edit
(an edit is caught by the source digest)."""
CACHE_FORMAT = 1
"""Version of the file layout below."""
FORMAT_NAME = "graphopt-graph-cache"
FOLDER = "graphs"
SOURCE_FILES = ("graph.py", "workloads")
"""Paths under the ``graphopt`` package whose ``.py`` source is hashed into ``gen:`` keys (the
distribution, the registry and this cache build no graph and are left out)."""
_NOT_BUILDERS = {"distribution.py", "graph_cache.py", "registry.py", "__init__.py"}

Progress = Callable[[int, int, str], None]
"""``progress(done, total, name)``: called after each graph :func:`load_graphs` returns."""

_log = logging.getLogger("graphopt.cache")


# ---------------------------------------------------------------------------- the cache
def cache_dir_default() -> Path:
    """``$GRAPHOPT_CACHE_DIR/graphs`` if the variable is set, else ``~/.cache/graphopt/graphs``."""
    return disk_cache.cache_root(FOLDER)


def cache_key(name: str) -> str | None:
    """The cache key of a ``gen:`` or ``torch:`` name (see the module docstring); ``None`` for
    any other name, which is not cached.

    Raises:
        ValueError: a bad ``gen:`` or ``torch:`` name.
    """
    if generated.is_generated(name):
        parts = [
            generated.canonical_name(name),
            f"gen-v{GENERATOR_VERSION}",
            f"source={disk_cache.source_digest(SOURCE_FILES, _NOT_BUILDERS)}",
        ]
    elif name.startswith(zoo.PREFIX) and "mode=" not in name:
        entry, canonical = _zoo_canonical(name)
        parts = [
            canonical,
            "train",
            f"torch={_version('torch')}",
            f"transformers={_version('transformers')}" if entry.needs_transformers else "",
            f"zoo-v{zoo.CACHE_VERSION}",
        ]
    else:
        return None
    return "|".join([*parts, f"classes={TABLE_DIGEST}", f"format={CACHE_FORMAT}"])


def cache_path(name: str, cache_dir: str | Path | None = None) -> Path | None:
    """The file that holds (or will hold) the graph of ``name``; ``None`` when it is not cached.

    Raises:
        ValueError: a bad ``gen:`` or ``torch:`` name.
    """
    key = cache_key(name)
    if key is None:
        return None
    family = name.split(":", 1)[1].partition("?")[0]
    digest = hashlib.sha256(key.encode()).hexdigest()[:20]
    return disk_cache.cache_root(FOLDER, cache_dir) / f"{family}-{digest}.npz"


def load_graphs(
    specs: str | Sequence[str],
    cache_dir: str | Path | None = None,
    progress: Progress | None = None,
) -> list[CompGraph]:
    """The graphs named by ``specs``, read from the disk cache where they are there, else built
    (and zoo graphs imported) and written to it.

    Args:
        specs: graph names, or one string of them comma-separated; ``suite:<name>`` stands for
            the suite's graphs (:data:`~graphopt.workloads.registry.SUITES`). Only ``gen:`` and
            ``torch:`` names are cached; the others are resolved by
            :func:`~graphopt.workloads.registry.get_graph`.
        cache_dir: the cache folder (default :func:`cache_dir_default`).
        progress: called as ``progress(done, total, name)`` after each graph.

    Returns:
        One graph per name, in order (repeats kept). A ``gen:`` graph is named by its canonical
        name, a zoo graph ``<canonical name> (training)``.

    Raises:
        ValueError: an empty spec, an unknown suite or a bad name (the registry's message), or a
            failed build or import. A damaged cache file is rebuilt, and an unwritable cache folder gives one
            warning line, not an error.
    """
    names = _expand(specs)
    writable = True
    out: list[CompGraph] = []
    for done, name in enumerate(names, 1):
        path = cache_path(name, cache_dir)
        if path is None:
            from graphopt.workloads.registry import get_graph

            graph = get_graph(name)
        else:
            key = cache_key(name)
            assert key is not None
            cached = _read(path, key)
            graph = cached if cached is not None else _build(name)
            if cached is None and writable:
                try:
                    disk_cache.write_npz(path, encode_graph(graph, key))
                except OSError as e:
                    writable = False
                    disk_cache.warn_unwritable(
                        path.parent, e, "graphs are built in memory and not kept"
                    )
        out.append(graph)
        if progress is not None:
            progress(done, len(names), name)
    return out


def _read(path: Path, key: str) -> CompGraph | None:
    if not path.exists():
        return None
    try:
        return decode_graph(disk_cache.read_npz(path), key)
    except ValueError as e:
        _log.debug("rebuilding %s: %s", path, e)
        return None


def _build(name: str) -> CompGraph:
    if generated.is_generated(name):
        return generated.build_generated(name)
    return zoo.load_zoo(name, training=True)


def _expand(specs: str | Sequence[str]) -> list[str]:
    from graphopt.workloads.registry import split_spec, suite_names

    items = split_spec(specs) if isinstance(specs, str) else list(specs)
    names: list[str] = []
    for item in (s.strip() for s in items):
        if not item:
            continue
        if item.startswith("suite:"):
            names.extend(suite_names(item))
        else:
            names.append(item)
    if not names:
        raise ValueError(
            f"empty graph spec {specs!r}; give graph names or suite:<name>, comma-separated"
        )
    return names


def _zoo_canonical(name: str) -> tuple[zoo.ZooEntry, str]:
    """The zoo entry and canonical name of ``torch:NAME?...`` without :func:`zoo.parse_spec`,
    whose checks may import torch (a warm load must not pay for that); a name this light parse
    does not take goes to ``parse_spec`` for its error (or its canonical form)."""
    model, _, query = name[len(zoo.PREFIX) :].partition("?")
    entry = zoo.ZOO.get(model)
    args: dict[str, int] = {}
    for part in filter(None, query.split("&")):
        key, _, value = part.partition("=")
        if entry is None or key not in entry.defaults or key in args or not value.isdecimal():
            entry, parsed = zoo.parse_spec(name)
            return entry, zoo.canonical_spec(entry.name, parsed)
        args[key] = int(value)
    if entry is None or any(v < 1 for v in args.values()):
        entry, parsed = zoo.parse_spec(name)
        return entry, zoo.canonical_spec(entry.name, parsed)
    return entry, zoo.canonical_spec(entry.name, {**entry.defaults, **args})


@cache
def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "none"


# ---------------------------------------------------------------------------- the format
_COSTS = ("flops", "bytes_accessed", "output_bytes", "param_bytes")
"""The op cost columns, in the order of the file's ``floats``."""
_TABLED = ("op_types", "op_classes", "layer", "colocation")
_TABLED_TENSORS = ("output_shapes", "output_dtypes", "input_shapes", "allowed")
"""Columns stored as a table of their distinct values and one index per op: few distinct values
(op types, layers, shapes) repeat over thousands of ops, and a list comprehension over the indices
rebuilds the column far faster than parsing it op by op."""


def encode_graph(graph: CompGraph, key: str) -> dict[str, np.ndarray]:
    """The arrays of a cache file holding ``graph`` under ``key`` (the module docstring)."""
    n, e = graph.num_ops, graph.num_edges
    tables: dict[str, list[Any]] = {}
    ints = [graph.edge_src, graph.edge_dst]
    for column in _TABLED + _TABLED_TENSORS:
        values = getattr(graph, column)
        if not values:  # an empty tensor column: no op has one
            continue
        index: dict[Any, int] = {}
        ints.append(np.array([index.setdefault(v, len(index)) for v in values], dtype=np.int64))
        tables[column] = list(index)
    header = {
        "format": FORMAT_NAME,
        "version": CACHE_FORMAT,
        "key": key,
        "name": graph.name,
        "metadata": dict(graph.metadata),
        "num_ops": n,
        "num_edges": e,
        "measured": list(graph.measured),
        "fingerprint": graph.fingerprint,
        "op_names": list(graph.op_names),
        "tables": tables,
    }
    floats = [getattr(graph, c) for c in _COSTS] + list(graph.measured.values())
    return {
        "header": disk_cache.text_array(json.dumps(header, separators=(",", ":"))),
        "floats": np.concatenate([*floats, graph.edge_bytes]).astype(np.float64),
        "ints": np.concatenate(ints).astype(np.int64),
    }


def decode_graph(arrays: dict[str, np.ndarray], key: str) -> CompGraph:
    """The graph of a cache file's arrays, checked (the module docstring).

    Raises:
        ValueError: not a cache file of this format, another key, or a graph that fails a check.
    """
    try:
        header = json.loads(disk_cache.array_text(arrays["header"]))
        if header.get("format") != FORMAT_NAME or header.get("version") != CACHE_FORMAT:
            raise ValueError(f"not a {FORMAT_NAME} v{CACHE_FORMAT} file")
        if header.get("key") != key:
            raise ValueError("written for another key")
        graph = _decode(arrays, header)
    except (KeyError, TypeError, IndexError, AttributeError, UnicodeDecodeError) as e:
        raise ValueError(f"malformed cache file ({type(e).__name__}: {e})") from None
    if graph.fingerprint != header["fingerprint"]:
        raise ValueError("the graph does not match its fingerprint")
    return graph


def _decode(arrays: dict[str, np.ndarray], header: dict[str, Any]) -> CompGraph:
    n, e = int(header["num_ops"]), int(header["num_edges"])
    kinds = [str(k) for k in header["measured"]]
    tables: dict[str, list[Any]] = header["tables"]
    floats, ints = arrays["floats"], arrays["ints"]
    c = len(_COSTS) + len(kinds)
    if floats.dtype != np.float64 or floats.shape != (c * n + e,):
        raise ValueError(f"floats of {floats.dtype} {floats.shape}, expected ({c * n + e},)")
    if ints.dtype != np.int64 or ints.shape != (2 * e + len(tables) * n,):
        raise ValueError(f"ints of {ints.dtype} {ints.shape}")
    src, dst = ints[:e], ints[e : 2 * e]
    _check_edges(src, dst, n)
    costs, measured, edge_bytes = floats[: 4 * n], floats[4 * n : c * n], floats[c * n :]
    if not np.all(np.isfinite(costs) & (costs >= 0)):
        raise ValueError("a negative, NaN or infinite op cost")
    if not np.all(np.isnan(measured) | (np.isfinite(measured) & (measured >= 0))):
        raise ValueError("a negative or infinite measured time")
    if not np.all(np.isfinite(edge_bytes) & (edge_bytes >= 0)):
        raise ValueError("negative, NaN or infinite edge bytes")
    names = tuple(str(s) for s in header["op_names"])
    if len(names) != n or len(set(names)) != n:
        raise ValueError("op names missing or repeated")

    columns: dict[str, tuple[Any, ...]] = {}
    for k, (column, table) in enumerate(tables.items()):
        if column not in _TABLED + _TABLED_TENSORS:
            raise ValueError(f"unknown column {column!r}")
        index = ints[2 * e + k * n : 2 * e + (k + 1) * n]
        if n and (index.min() < 0 or index.max() >= len(table)):
            raise ValueError(f"{column}: an index out of its table")
        values = [_value(column, v) for v in table]
        columns[column] = tuple([values[i] for i in index.tolist()])
    if not set(columns["op_classes"]) <= set(OP_CLASSES):
        raise ValueError("an unknown op class")
    return CompGraph(
        name=str(header["name"]),
        op_names=names,
        op_types=columns["op_types"],
        flops=_readonly(costs[:n]),
        bytes_accessed=_readonly(costs[n : 2 * n]),
        output_bytes=_readonly(costs[2 * n : 3 * n]),
        param_bytes=_readonly(costs[3 * n :]),
        edge_src=_readonly(src),
        edge_dst=_readonly(dst),
        edge_bytes=_readonly(edge_bytes),
        measured={kind: _readonly(measured[k * n : (k + 1) * n]) for k, kind in enumerate(kinds)},
        colocation=columns["colocation"],
        layer=columns["layer"],
        metadata=dict(header["metadata"]),
        op_classes=columns["op_classes"],
        output_shapes=columns.get("output_shapes", ()),
        output_dtypes=columns.get("output_dtypes", ()),
        input_shapes=columns.get("input_shapes", ()),
        allowed=columns.get("allowed", ()),
    )


def _value(column: str, value: Any) -> Any:
    """One table entry as the graph holds it: a string, or (tensor columns) a tuple of shapes,
    of dtypes or of device kinds, or ``None``."""
    if column in _TABLED:
        if not isinstance(value, str):
            raise ValueError(f"{column}: {value!r} is not a string")
        return value
    if value is None:
        return None
    if column in ("output_shapes", "input_shapes"):
        return tuple(tuple(int(d) for d in shape) for shape in value)
    return tuple(str(v) for v in value)


def _readonly(array: np.ndarray) -> np.ndarray:
    array = np.array(array)  # its own buffer: a view would keep the file's whole array alive
    array.setflags(write=False)
    return array


def _check_edges(src: np.ndarray, dst: np.ndarray, n: int) -> None:
    """Edges as :meth:`CompGraph.from_arrays` leaves them: within range, each from a lower to a
    higher index, sorted by ``(src, dst)`` without repeats."""
    if len(src) and not (src.min() >= 0 and dst.max() < n and np.all(src < dst)):
        raise ValueError("an edge out of range or against the topological order")
    if len(src) > 1:
        ascending = (src[1:] > src[:-1]) | ((src[1:] == src[:-1]) & (dst[1:] > dst[:-1]))
        if not np.all(ascending):
            raise ValueError("edges not sorted or repeated")


# ---------------------------------------------------------------------------- command line
def main(argv: Sequence[str] | None = None) -> int:
    """``python -m graphopt.workloads.graph_cache [SPEC] [--cache-dir DIR]``: load (building what
    is missing) the graphs of SPEC (default ``suite:train-gen``) and print how long it took."""
    parser = argparse.ArgumentParser(
        prog="python -m graphopt.workloads.graph_cache", description=main.__doc__
    )
    parser.add_argument("spec", nargs="?", default="suite:train-gen")
    parser.add_argument("--cache-dir", default=None)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        graphs = load_graphs(args.spec, cache_dir=args.cache_dir)
    except ValueError as e:
        parser.exit(2, f"error: {e}\n")
    seconds = time.perf_counter() - start
    ops = np.array([g.num_ops for g in graphs])
    print(
        f"{len(graphs)} graphs in {seconds:.2f} s ({ops.min()}-{ops.max()} ops, median "
        f"{int(np.median(ops))}); cache {cache_dir_default() if args.cache_dir is None else args.cache_dir}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
