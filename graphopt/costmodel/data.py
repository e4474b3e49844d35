"""Datasets of measured configurations: what the learned cost model trains and is scored on.

A dataset is a list of :class:`GraphSamples`, one per graph: the graph's static node features and
edges, and ``K`` configurations with their measured runtimes. A configuration sets features on the
graph's *configurable* nodes (``config_node_ids``):

- TpuGraphs layout files: 10-18 layout features on the few nodes whose layout is configurable
  (:class:`ArrayConfigs`, from :func:`from_layout`);
- graphopt decisions measured by the simulator: every op is configurable, its features are those
  of :class:`graphopt.costmodel.features.DecisionFeaturizer` (plus a few whole-decision summary
  features), computed on the fly from the stored integer decisions (:class:`DecisionConfigs`), so
  a dataset of 10,000-op graphs stays small.

On disk (:func:`save_samples` / :func:`load_samples`) a simulator dataset is a directory of one
``.npz`` per graph, self-contained: the graph and cluster as JSON, the decisions, the step times
and the simulator's status per decision. :func:`generate` writes one (seeded, with a progress bar),
measuring the graphs one at a time or as one Ray task each (:func:`measure_job`), with the same
files either way; the directory gets the whole dataset or nothing new
(:class:`graphopt.file_set.FileSet`: an error, Ctrl-C or SIGTERM leaves no file of it).
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from graphopt import strict_json
from graphopt.baselines.fusion import FUSERS
from graphopt.baselines.placement import PLACERS
from graphopt.baselines.scheduling import SCHEDULERS
from graphopt.costmodel.features import SUMMARY_FEATURES, DecisionFeaturizer, static_features
from graphopt.costmodel.tpugraphs import LayoutGraph, load_tpugraphs
from graphopt.distributed import check_workers, map_jobs, uses_ray
from graphopt.errors import check_integer
from graphopt.file_set import FileSet, write_file
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim import PreparedGraph
from graphopt.tasks import get_task
from graphopt.typing import Decision, IntArray

FORMAT = "graphopt-costmodel-samples"
VERSION = 1
MAX_SAMPLES = 100_000
"""The most decisions :func:`generate` samples per graph: they are held as three ``(K, N)``
int64 arrays, 5.8 GB at this bound for a 2,400-op graph."""


class ConfigSource(Protocol):
    """The configurations of one graph, featurised on request."""

    @property
    def num_features(self) -> int:
        """Features per configurable node."""
        ...

    @property
    def num_summary(self) -> int:
        """Whole-configuration summary features."""
        ...

    def features(self, index: IntArray) -> np.ndarray:
        """``(len(index), C, num_features)`` float32 features of the configurations ``index``."""
        ...

    def summary(self, index: IntArray) -> np.ndarray:
        """``(len(index), num_summary)`` float32 whole-configuration features."""
        ...


@dataclass(frozen=True)
class ArrayConfigs:
    """Configurations given as a ``(K, C, F)`` feature array (TpuGraphs)."""

    array: np.ndarray

    @property
    def num_features(self) -> int:
        return int(self.array.shape[2])

    @property
    def num_summary(self) -> int:
        return 0

    def features(self, index: IntArray) -> np.ndarray:
        return np.asarray(self.array[index], dtype=np.float32)

    def summary(self, index: IntArray) -> np.ndarray:
        return np.zeros((len(index), 0), dtype=np.float32)


@dataclass(frozen=True)
class DecisionConfigs:
    """Configurations given as graphopt decisions, ``(K, N)`` integer arrays each."""

    featurizer: DecisionFeaturizer
    placement: IntArray
    priority: IntArray
    fusion: IntArray

    @property
    def num_features(self) -> int:
        return self.featurizer.num_features

    @property
    def num_summary(self) -> int:
        return len(SUMMARY_FEATURES)

    def features(self, index: IntArray) -> np.ndarray:
        return self.featurizer(self.placement[index], self.priority[index], self.fusion[index])

    def summary(self, index: IntArray) -> np.ndarray:
        return self.featurizer.summary(self.placement[index])


@dataclass(frozen=True)
class GraphSamples:
    """One graph and its measured configurations.

    Attributes:
        name: the graph's name.
        node_feat: ``(N, F)`` float32 static node features.
        node_opcode: ``(N,)`` int64 op-type ids in ``[0, NUM_OPCODES)``.
        edges: ``(2, E)`` int64, row 0 the producer, row 1 the consumer.
        config_node_ids: ``(C,)`` int64 nodes a configuration sets features on.
        configs: the ``K`` configurations (see :class:`ConfigSource`).
        runtime: ``(K,)`` float64 measured runtimes (positive; any unit, one unit per graph).
        graph: the graphopt graph, when the samples come from one (``None`` for TpuGraphs).
        cluster: its cluster, likewise.
    """

    name: str
    node_feat: np.ndarray
    node_opcode: IntArray
    edges: IntArray
    config_node_ids: IntArray
    configs: ConfigSource
    runtime: np.ndarray
    graph: CompGraph | None = None
    cluster: Cluster | None = None

    @property
    def num_nodes(self) -> int:
        return int(self.node_feat.shape[0])

    @property
    def num_configs(self) -> int:
        return int(self.runtime.shape[0])

    def subset(self, index: IntArray) -> GraphSamples:
        """The same graph with only the configurations ``index``."""
        index = np.asarray(index, dtype=np.int64)
        configs: ConfigSource
        if isinstance(self.configs, ArrayConfigs):
            configs = ArrayConfigs(self.configs.array[index])
        elif isinstance(self.configs, DecisionConfigs):
            c = self.configs
            configs = DecisionConfigs(
                c.featurizer, c.placement[index], c.priority[index], c.fusion[index]
            )
        else:  # pragma: no cover - only the two sources above exist
            raise TypeError(f"cannot subset {type(self.configs).__name__}")
        return GraphSamples(
            self.name,
            self.node_feat,
            self.node_opcode,
            self.edges,
            self.config_node_ids,
            configs,
            self.runtime[index],
            self.graph,
            self.cluster,
        )


def signed_log(x: np.ndarray) -> np.ndarray:
    """``sign(x) * log1p(|x|)``: squashes TpuGraphs' raw node features (up to ~1e7)."""
    return (np.sign(x) * np.log1p(np.abs(x))).astype(np.float32)


def from_layout(layout: object) -> GraphSamples:
    """A TpuGraphs :class:`graphopt.costmodel.tpugraphs.LayoutGraph` as :class:`GraphSamples`.

    Node features go through :func:`signed_log`; opcodes are shifted by one (0 stays unused, as
    for graphopt op-type ids).
    """
    assert isinstance(layout, LayoutGraph)
    return GraphSamples(
        name=layout.name,
        node_feat=signed_log(layout.node_feat),
        node_opcode=np.asarray(layout.node_opcode, dtype=np.int64) + 1,
        edges=np.asarray(layout.edges, dtype=np.int64),
        config_node_ids=np.asarray(layout.config_node_ids, dtype=np.int64),
        configs=ArrayConfigs(np.asarray(layout.config_feat, dtype=np.float32)),
        runtime=np.asarray(layout.runtime, dtype=np.float64),
    )


def from_decisions(
    graph: CompGraph,
    cluster: Cluster,
    placement: IntArray,
    priority: IntArray,
    fusion: IntArray,
    runtime: np.ndarray,
) -> GraphSamples:
    """Simulator samples of ``graph`` on ``cluster``: ``(K, N)`` decisions and ``(K,)`` runtimes."""
    feat, opcode = static_features(graph, cluster)
    n = graph.num_ops
    return GraphSamples(
        name=graph.name,
        node_feat=feat,
        node_opcode=opcode,
        edges=np.stack([graph.edge_src, graph.edge_dst]).astype(np.int64),
        config_node_ids=np.arange(n, dtype=np.int64),
        configs=DecisionConfigs(DecisionFeaturizer(graph, cluster), placement, priority, fusion),
        runtime=np.asarray(runtime, dtype=np.float64),
        graph=graph,
        cluster=cluster,
    )


# ---------------------------------------------------------------------- sampling decisions
SAMPLED_TASKS = ("placement", "joint")
"""The tasks whose decisions :func:`sample_decisions` draws (of :data:`graphopt.tasks.TASKS`)."""


def sample_decisions(
    graph: CompGraph,
    cluster: Cluster,
    count: int,
    rng: np.random.Generator,
    task: str = "placement",
) -> tuple[IntArray, IntArray, IntArray]:
    """``count`` decisions spread from good to bad, as ``(K, N)`` placement, priority, fusion.

    A third are uniformly random placements, the rest are the placement heuristics' answers
    (:data:`graphopt.baselines.PLACERS`) with a random fraction (0-50%) of ops moved: single ops
    to random devices, or contiguous runs of ops to one device. For ``task="joint"`` priorities
    are random levels or the critical-path order and fusion bits random (rate 0-50%) or XLA's.
    ``task="placement"`` leaves priorities and fusion at zero.
    """
    get_task(task, SAMPLED_TASKS)
    n, d = graph.num_ops, cluster.num_devices
    starts = []
    for placer in PLACERS.values():
        try:
            starts.append(np.asarray(placer(graph, cluster), dtype=np.int64))
        except (ValueError, RuntimeError):  # a memory-aware placer that finds no fit
            continue
    place = np.empty((count, n), dtype=np.int64)
    for k in range(count):
        if k % 3 == 0 or not starts:
            place[k] = rng.integers(d, size=n)
            continue
        row = starts[int(rng.integers(len(starts)))].copy()
        frac = rng.uniform(0.0, 0.5)
        if rng.random() < 0.5:
            moved = rng.random(n) < frac
            row[moved] = rng.integers(d, size=int(moved.sum()))
        else:
            runs = max(1, int(rng.integers(1, 9)))
            length = max(1, int(frac * n / runs))
            for _ in range(runs):
                lo = int(rng.integers(n))
                row[lo : lo + length] = int(rng.integers(d))
        place[k] = row
    prio = np.zeros((count, n), dtype=np.int64)
    fuse = np.zeros((count, n), dtype=np.int64)
    if task == "joint":
        for k in range(count):
            decision = Decision(placement=place[k])
            if rng.random() < 0.5:
                prio[k] = rng.integers(8, size=n)
            else:
                prio[k] = SCHEDULERS["critical-path"](graph, cluster, place[k])
            if rng.random() < 0.5:
                fuse[k] = rng.random(n) < rng.uniform(0.0, 0.5)
            else:
                fuse[k] = FUSERS["xla"](graph, cluster, decision)
    return place, prio, fuse


Measured = tuple[IntArray, IntArray, IntArray, np.ndarray, IntArray]
"""One graph's ``(K, N)`` placement, priority and fusion, ``(K,)`` step times and statuses."""


def measure_graph(
    graph: CompGraph, cluster: Cluster, index: int, samples: int, seed: int, task: str
) -> Measured:
    """:func:`sample_decisions` of graph ``index`` of a dataset (its generator seeded from
    ``seed`` and ``index``), measured by the simulator."""
    rng = np.random.default_rng([seed, index])
    place, prio, fuse = sample_decisions(graph, cluster, samples, rng, task)
    result = PreparedGraph(graph, cluster).evaluate_batch(place, prio, fuse)
    return place, prio, fuse, result.step_time, result.status


def measure_job(job: dict[str, Any]) -> Measured:
    """:func:`measure_graph` as a Ray task of plain data: ``graph``
    (:meth:`CompGraph.to_json_dict`), ``cluster`` (:meth:`Cluster.to_dict`), ``index``,
    ``samples``, ``seed`` and ``task``."""
    graph = CompGraph.from_json_dict(job["graph"])
    cluster = Cluster.from_dict(job["cluster"])
    return measure_graph(graph, cluster, job["index"], job["samples"], job["seed"], job["task"])


def generate(
    graphs: list[CompGraph],
    cluster: Cluster,
    out_dir: str | Path,
    samples: int = 256,
    seed: int = 0,
    task: str = "placement",
    progress: bool = True,
    workers: int = 1,
    address: str | None = None,
) -> list[Path]:
    """Sample ``samples`` decisions per graph, measure them with the simulator, write the dataset.

    Each graph gets its own generator (seeded from ``seed`` and the graph's position), so a run is
    reproducible and a graph's samples do not depend on the others. Decisions the simulator cannot
    run (illegal fusion) are stored with runtime ``inf`` and status 2; out-of-memory ones with
    their step time and status 1 (see :func:`load_samples` for what is kept).

    Args:
        workers, address: with ``workers`` above 1 or a Ray ``address``, every graph is measured
            by one Ray task (:func:`graphopt.distributed.map_jobs`), at most ``workers`` at once,
            and the files are written here when all are done; the files are those of the serial
            run, byte for byte in their arrays.

    Returns:
        the ``.npz`` files written, one per graph, in ``out_dir``.

    Raises:
        ValueError: ``samples`` outside 1..:data:`MAX_SAMPLES`, ``workers`` below 1, a Ray
            ``address`` where nothing answers (nothing is written then);
            DependencyNotInstalled: Ray missing where work would go to it
            (:mod:`graphopt.distributed`).
    """
    from rich.progress import Progress

    check_integer(samples, "samples", 1, MAX_SAMPLES)
    check_workers(workers)
    out = Path(out_dir)
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "cluster": cluster.name,
        "samples": samples,
        "seed": seed,
        "task": task,
        "graphs": [g.name for g in graphs],
    }
    files = FileSet(out, "dataset directory")  # staged: the whole dataset, or nothing new

    def write(i: int, graph: CompGraph, measured: Measured) -> Path:
        name = f"{i:04d}-{_safe(graph.name)}.npz"
        files.write(name, samples_bytes(graph, cluster, *measured))
        return out / name

    if uses_ray(workers, address):
        settings = {"cluster": cluster.to_dict(), "samples": samples, "seed": seed, "task": task}
        jobs = [{**settings, "graph": g.to_json_dict(), "index": i} for i, g in enumerate(graphs)]
        measured = map_jobs(measure_job, jobs, workers=workers, address=address)
        paths = [write(i, g, m) for i, (g, m) in enumerate(zip(graphs, measured, strict=True))]
    else:
        paths = []
        with Progress(disable=not progress, transient=True) as bar:
            job = bar.add_task("measuring decisions", total=len(graphs) * samples)
            for i, graph in enumerate(graphs):
                measured_one = measure_graph(graph, cluster, i, samples, seed, task)
                paths.append(write(i, graph, measured_one))
                bar.advance(job, samples)
    files.write("meta.json", strict_json.dumps(meta, indent=2))
    files.commit(last=("meta.json",))
    return paths


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def save_samples(
    path: Path,
    graph: CompGraph,
    cluster: Cluster,
    placement: IntArray,
    priority: IntArray,
    fusion: IntArray,
    runtime: np.ndarray,
    status: IntArray,
) -> Path:
    """Write one graph's samples (see the module docstring), whole or not at all
    (:func:`graphopt.file_set.write_file`); returns ``path``."""
    return write_file(
        path, samples_bytes(graph, cluster, placement, priority, fusion, runtime, status)
    )


def samples_bytes(
    graph: CompGraph,
    cluster: Cluster,
    placement: IntArray,
    priority: IntArray,
    fusion: IntArray,
    runtime: np.ndarray,
    status: IntArray,
) -> bytes:
    """The ``.npz`` file of one graph's samples (:func:`save_samples`), as bytes."""
    arrays = {
        "format": np.array(f"{FORMAT} v{VERSION}"),
        "graph_json": np.array(json.dumps(graph.to_json_dict())),
        "cluster_json": np.array(json.dumps(cluster.to_dict())),
        "placement": placement.astype(np.int16),
        "priority": priority.astype(np.int16),
        "fusion": fusion.astype(np.int8),
        "runtime": np.asarray(runtime, dtype=np.float64),
        "status": np.asarray(status, dtype=np.int8),
    }
    with io.BytesIO() as buffer:
        np.savez_compressed(buffer, **arrays)  # type: ignore[arg-type]
        return buffer.getvalue()


_KEYS = (
    "format",
    "graph_json",
    "cluster_json",
    "placement",
    "priority",
    "fusion",
    "runtime",
    "status",
)


def load_samples(path: str | Path, include_oom: bool = False) -> GraphSamples:
    """Read one graph's samples written by :func:`save_samples`.

    Decisions that cannot run (infinite runtime) are dropped; out-of-memory ones too unless
    ``include_oom`` (their simulated time is real, but no device could hold them).

    Raises:
        ValueError: not such a file, or its arrays disagree (the message names the problem).
    """
    path = Path(path)
    try:
        data = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a readable .npz file ({e})") from e
    with data:
        missing = [k for k in _KEYS if k not in data.files]
        if missing:
            raise ValueError(
                f"{path}: missing key(s) {missing}; a graphopt sample file holds {list(_KEYS)} "
                "(write one with `graphopt costmodel dataset`)"
            )
        fmt = str(data["format"])
        if fmt != f"{FORMAT} v{VERSION}":
            raise ValueError(f"{path}: format {fmt!r}; this version reads {FORMAT} v{VERSION}")
        graph = CompGraph.from_json_dict(json.loads(str(data["graph_json"])), source=str(path))
        cluster = Cluster.from_dict(json.loads(str(data["cluster_json"])))
        arrays = {k: np.asarray(data[k]) for k in ("placement", "priority", "fusion")}
        runtime = np.asarray(data["runtime"], dtype=np.float64)
        status = np.asarray(data["status"], dtype=np.int64)
    k, n = runtime.shape[0], graph.num_ops
    for name, arr in arrays.items():
        if arr.shape != (k, n):
            raise ValueError(
                f"{path}: {name} has shape {arr.shape}; expected ({k}, {n}) "
                f"({k} runtimes, {n} ops in graph {graph.name!r})"
            )
    if status.shape != (k,):
        raise ValueError(f"{path}: status has shape {status.shape}; expected ({k},)")
    keep = np.isfinite(runtime) & (runtime > 0) & ((status == 0) | (include_oom & (status == 1)))
    return from_decisions(
        graph,
        cluster,
        arrays["placement"][keep].astype(np.int64),
        arrays["priority"][keep].astype(np.int64),
        arrays["fusion"][keep].astype(np.int64),
        runtime[keep],
    )


def load_dataset(source: str | Path, include_oom: bool = False) -> list[GraphSamples]:
    """A dataset directory written by :func:`generate`, one sample ``.npz``, or a TpuGraphs
    ``.npz`` (recognised by its ``node_config_feat`` key).

    Raises:
        ValueError: nothing to load at ``source``, or a malformed file.
    """
    path = Path(source)
    if path.is_dir():
        files = sorted(p for p in path.glob("*.npz") if not p.name.startswith("."))
        if not files:
            raise ValueError(
                f"{path}: no .npz files; create a dataset with `graphopt costmodel dataset`"
            )
        return [s for f in files for s in load_dataset(f, include_oom)]
    if not path.exists():
        raise ValueError(f"{path}: no such file or directory")
    try:
        with np.load(path, allow_pickle=False) as data:
            keys = set(data.files)
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a readable .npz file ({e})") from e
    if "node_config_feat" in keys:
        return [from_layout(load_tpugraphs(path))]
    return [load_samples(path, include_oom)]


def split_samples(
    samples: list[GraphSamples], test_fraction: float = 0.2, seed: int = 0
) -> tuple[list[GraphSamples], list[GraphSamples]]:
    """Split every graph's configurations at random into train and test (same graphs on both
    sides: the split TpuGraphs' single-graph benchmark uses)."""
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must lie in (0, 1), got {test_fraction}")
    rng = np.random.default_rng(seed)
    train, test = [], []
    for s in samples:
        perm = rng.permutation(s.num_configs)
        cut = s.num_configs - max(1, math.ceil(test_fraction * s.num_configs))
        train.append(s.subset(np.sort(perm[:cut])))
        test.append(s.subset(np.sort(perm[cut:])))
    return train, test
