"""TpuGraphs layout graphs: one XLA graph and the measured runtime of each layout configuration.

TpuGraphs (Phothilimthana et al., "TpuGraphs: A Performance Prediction Dataset on Large Tensor
Computational Graphs", NeurIPS 2023) stores one graph per ``.npz`` file. The layout collection
pairs the graph with ``K`` configurations of its ``C`` configurable nodes and the runtime of the
whole graph under each. The task is to rank the configurations by runtime.

Keys read by :func:`load_tpugraphs` (``N`` nodes, ``E`` edges, ``F`` node features, ``Fc``
configuration features; ``F`` and ``Fc`` are not fixed: the original files have 140 and 18,
cleaned copies drop constant columns):

====================  ==============  =====================================================
key                   shape           meaning
====================  ==============  =====================================================
``node_feat``         ``(N, F)``      per-node features
``node_opcode``       ``(N,)``        XLA HLO opcode id (a non-negative integer)
``edge_index``        ``(E, 2)``      ``[u, v]``: node ``u`` consumes ``v``'s output
``node_config_ids``   ``(C,)``        the configurable nodes, distinct, in ``[0, N)``
``node_config_feat``  ``(K, C, Fc)``  per configuration and configurable node (-1 pads)
``config_runtime``    ``(K,)``        runtime of the graph under each configuration, > 0
====================  ==============  =====================================================

``node_splits`` (where each HLO computation starts) may be present; it is ignored.

Duplicates. A layout file may list the same configuration many times (the XLA alexnet sample has
47,712 configurations but 29,905 distinct feature rows; see :func:`duplicate_configs`). A
random split of the configurations (:func:`split_configs`) then puts identical configurations
on both sides, so test scores measure partly recall of seen configurations.
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

REQUIRED_KEYS = (
    "node_feat",
    "node_opcode",
    "edge_index",
    "node_config_ids",
    "node_config_feat",
    "config_runtime",
)


@dataclass(frozen=True)
class LayoutGraph:
    """One TpuGraphs layout graph with its configurations and their runtimes.

    Edges run with the data flow, **producer to consumer**: TpuGraphs' ``edge_index`` row
    ``[u, v]`` (``u`` consumes ``v``) becomes column ``[v, u]`` of :attr:`edges`.

    Attributes:
        name: the graph's name (the file stem for :func:`load_tpugraphs`).
        node_feat: per-node features.
        node_opcode: XLA HLO opcode id per node.
        edges: ``edges[0]`` the producer, ``edges[1]`` the consumer of each edge.
        config_node_ids: the configurable nodes, indices into the node arrays.
        config_feat: ``config_feat[k, c]`` are the features of node ``config_node_ids[c]`` under
            configuration ``k`` (-1 pads unused entries).
        runtime: measured runtime of the whole graph under each configuration (positive; the
            file's units).

    Shapes:
        - node_feat: ``(N, F)`` float32
        - node_opcode: ``(N,)`` int64
        - edges: ``(2, E)`` int64
        - config_node_ids: ``(C,)`` int64
        - config_feat: ``(K, C, Fc)`` float32
        - runtime: ``(K,)`` float64
    """

    name: str
    node_feat: npt.NDArray[np.float32]
    node_opcode: npt.NDArray[np.int64]
    edges: npt.NDArray[np.int64]
    config_node_ids: npt.NDArray[np.int64]
    config_feat: npt.NDArray[np.float32]
    runtime: npt.NDArray[np.float64]

    @property
    def num_nodes(self) -> int:
        """``N``, the number of nodes."""
        return int(self.node_feat.shape[0])

    @property
    def num_configs(self) -> int:
        """``K``, the number of configurations."""
        return int(self.config_feat.shape[0])


def load_tpugraphs(path: str | os.PathLike[str], name: str | None = None) -> LayoutGraph:
    """Read and check one TpuGraphs layout ``.npz`` file.

    Args:
        path: the ``.npz`` file (keys in the module docstring; feature column counts are free).
        name: the graph's name; default the file stem (``layout_xla_alexnet``).

    Returns:
        The graph, its edges flipped to producer -> consumer (see :class:`LayoutGraph`).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: the file is not an ``.npz`` archive, lacks a required key, has arrays whose
            shapes disagree, indices out of range, non-finite features, or runtimes that are not
            finite and positive. The message names the file, the problem and the fix.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"TpuGraphs file {path} not found; pass the path of a layout .npz file "
            "(TpuGraphs keeps them under npz/layout/<source>/<search>/<split>/<graph>.npz)"
        )
    raw = _read_npz(path)

    def fail(problem: str, fix: str) -> ValueError:
        return ValueError(f"{path}: {problem}; {fix}")

    regenerate = "re-export the graph from the TpuGraphs dataset"
    node_feat = raw["node_feat"]
    opcode = raw["node_opcode"]
    edge_index = raw["edge_index"]
    config_ids = raw["node_config_ids"]
    config_feat = raw["node_config_feat"]
    runtime = raw["config_runtime"]

    # Shapes and dtypes.
    for key, ndim, what in (
        ("node_feat", 2, "(N, F)"),
        ("node_opcode", 1, "(N,)"),
        ("node_config_ids", 1, "(C,)"),
        ("node_config_feat", 3, "(K, C, Fc)"),
        ("config_runtime", 1, "(K,)"),
    ):
        if raw[key].ndim != ndim:
            raise fail(f"{key} has shape {raw[key].shape}, expected {what}", regenerate)
    for key in ("node_feat", "node_config_feat", "config_runtime"):
        if not (np.issubdtype(raw[key].dtype, np.number) and raw[key].dtype.kind != "c"):
            raise fail(f"{key} has dtype {raw[key].dtype}, expected real numbers", regenerate)
    for key in ("node_opcode", "edge_index", "node_config_ids"):
        if not np.issubdtype(raw[key].dtype, np.integer):
            raise fail(f"{key} has dtype {raw[key].dtype}, expected integers", regenerate)
    n = node_feat.shape[0]
    if n == 0:
        raise fail("node_feat has no rows (a graph without nodes)", regenerate)
    if opcode.shape[0] != n:
        raise fail(
            f"node_opcode has {opcode.shape[0]} entries but node_feat has {n} rows",
            "give one opcode per node, in node_feat's order",
        )
    if opcode.size and opcode.min() < 0:
        raise fail(f"node_opcode holds a negative id ({opcode.min()})", "opcode ids are >= 0")

    # Edges.
    if edge_index.ndim != 2 or edge_index.shape[1] != 2:
        raise fail(
            f"edge_index has shape {edge_index.shape}, expected (E, 2) with rows [consumer, "
            "producer]",
            "store one edge per row (transpose a (2, E) array)",
        )
    bad = (edge_index < 0) | (edge_index >= n)
    if bad.any():
        row = int(np.flatnonzero(bad.any(axis=1))[0])
        raise fail(
            f"edge_index row {row} is {edge_index[row].tolist()}, outside the {n} nodes [0, {n})",
            "edge endpoints must index node_feat's rows",
        )

    # Configurations.
    k, c = config_feat.shape[:2]
    if k == 0:
        raise fail("node_config_feat holds no configurations", regenerate)
    if config_ids.shape[0] != c:
        raise fail(
            f"node_config_ids has {config_ids.shape[0]} entries but node_config_feat has {c} "
            f"configurable nodes (shape {config_feat.shape})",
            "node_config_feat[:, i] must describe node node_config_ids[i]",
        )
    if c and (config_ids.min() < 0 or config_ids.max() >= n):
        bad_id = int(config_ids[(config_ids < 0) | (config_ids >= n)][0])
        raise fail(
            f"node_config_ids holds {bad_id}, outside the {n} nodes [0, {n})",
            "configurable node ids must index node_feat's rows",
        )
    if np.unique(config_ids).size != c:
        raise fail("node_config_ids lists a node twice", "list each configurable node once")
    if runtime.shape[0] != k:
        raise fail(
            f"config_runtime has {runtime.shape[0]} entries but node_config_feat has {k} "
            "configurations",
            "give one runtime per configuration, in node_config_feat's order",
        )

    # Values.
    for key in ("node_feat", "node_config_feat"):
        finite = np.isfinite(raw[key])
        if not finite.all():
            where = tuple(int(i) for i in np.argwhere(~finite)[0])
            raise fail(
                f"{key} holds a non-finite value ({raw[key][where]} at index {where})",
                "replace NaN/inf features with finite values (-1 pads configuration features)",
            )
    bad_runtime = ~(np.isfinite(runtime) & (runtime > 0))
    if bad_runtime.any():
        i = int(np.flatnonzero(bad_runtime)[0])
        raise fail(
            f"config_runtime[{i}] is {runtime[i]}; runtimes must be finite and positive "
            f"({int(bad_runtime.sum())} of {k} are not)",
            "drop the configurations whose measurement failed",
        )

    return LayoutGraph(
        name=path.stem if name is None else name,
        node_feat=node_feat.astype(np.float32),
        node_opcode=opcode.astype(np.int64),
        edges=np.ascontiguousarray(edge_index[:, ::-1].T, dtype=np.int64),
        config_node_ids=config_ids.astype(np.int64),
        config_feat=config_feat.astype(np.float32),
        runtime=runtime.astype(np.float64),
    )


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    """The required arrays of ``path``, read into memory."""
    unreadable = "pass a TpuGraphs layout file written by numpy.savez or numpy.savez_compressed"
    try:
        archive = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise ValueError(f"{path}: not a readable .npz archive ({e}); {unreadable}") from e
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ValueError(
            f"{path}: holds a single array, not an .npz archive of named arrays; {unreadable}"
        )
    with archive:
        missing = [key for key in REQUIRED_KEYS if key not in archive.files]
        if missing:
            raise ValueError(
                f"{path}: missing key(s) {', '.join(missing)} (the file has: "
                f"{', '.join(archive.files) or 'none'}); a TpuGraphs layout file needs "
                f"{', '.join(REQUIRED_KEYS)}"
            )
        try:
            return {key: archive[key] for key in REQUIRED_KEYS}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
            raise ValueError(f"{path}: an array cannot be read ({e}); {unreadable}") from e


def split_configs(
    num_configs: int, test_fraction: float = 0.2, seed: int = 0
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """A seeded random split of configuration indices ``0 .. num_configs - 1``.

    The test side holds ``round(test_fraction * num_configs)`` indices (at least one, and at
    least one is left for training). Identical configurations may fall on both sides (see
    :func:`duplicate_configs`).

    Args:
        num_configs: ``K``, at least 2.
        test_fraction: share of configurations held out, in ``(0, 1)``.
        seed: seed of the permutation; the same seed gives the same split.

    Returns:
        ``(train, test)``: sorted, disjoint int64 index arrays that together cover ``range(K)``.

    Raises:
        ValueError: ``num_configs < 2`` or ``test_fraction`` outside ``(0, 1)``.
    """
    if int(num_configs) != num_configs or num_configs < 2:
        raise ValueError(
            f"num_configs must be an integer >= 2 to split into train and test, got {num_configs!r}"
        )
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must lie in (0, 1), got {test_fraction!r}")
    num_configs = int(num_configs)
    num_test = min(max(round(test_fraction * num_configs), 1), num_configs - 1)
    order = np.random.default_rng(seed).permutation(num_configs)
    return np.sort(order[num_test:]).astype(np.int64), np.sort(order[:num_test]).astype(np.int64)


def duplicate_configs(layout: LayoutGraph) -> int:
    """How many configurations repeat the exact features of an earlier configuration.

    Two configurations are duplicates when their ``config_feat[k]`` arrays are equal element by
    element; their runtimes may still differ (repeated measurements). ``num_configs`` minus this
    count is the number of distinct configurations (29,905 of 47,712 in the XLA alexnet sample).
    """
    # Hashing the raw bytes of each row is ~30x faster than np.unique(axis=0). Adding 0.0 turns
    # -0.0 into 0.0, so bytes are equal exactly when values are (features are finite: no NaN).
    rows = np.ascontiguousarray(layout.config_feat.reshape(layout.num_configs, -1) + np.float32(0))
    return layout.num_configs - len({row.tobytes() for row in rows})
