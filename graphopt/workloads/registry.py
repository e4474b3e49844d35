"""Named workloads and suites: ``get_graph("gnmt-8")``, ``resolve_graphs("suite:train,g.json")``.

Built-in graphs (GO's workloads, Zhou et al. 2020, plus reduced variants for tests and CPU-sized
runs) are built on first use and cached (:func:`get_graph` keeps them in a ``functools.lru_cache``;
graphs are immutable, so sharing them is safe). Random graphs are addressable by name for any size and
seed: ``random-layered-<n>-s<seed>`` and ``random-sp-<n>-s<seed>``
(:mod:`graphopt.workloads.random_dags`).

Suites (:data:`SUITES`):

===================  ==============================================================================
``tiny``             a few graphs under 500 ops, for fast tests
``default``          tiny variants and random DAGs of 200-1000 ops: what a 10-minute CPU run trains on
``train``            GO-style training set: RNNLM, GNMT and Transformer-XL with 2 and 4 layers,
                     Inception-v3, random DAGs
``heldout``          families absent from ``train``: AmoebaNet, WaveNet (2 and 4 stacks)
``heldout-small``    reduced held-out families (and ``wavenet-2``) for CPU-sized evaluation
``large``            the 8-layer variants of the training families (unseen sizes)
``go``               the 13 graphs of GO's evaluation
``train-gen``        the training distribution: 524 configurations of twelve families, ``gen:`` and
                     ``torch:`` names (:mod:`graphopt.workloads.distribution`)
``train-gen-small``  24 of them, none of 1,000 ops or more and no zoo graph: tests and demos
``family-test``      51 unseen configurations (architectures, larger sizes) of the training families
``cross-family``     families absent from ``train-gen``: WaveNet, AmoebaNet, PipeDream, zoo
                     Inception and LSTM
===================  ==============================================================================

Parameterised built-in graphs are named ``gen:FAMILY?ARG=INT&...``
(:mod:`graphopt.workloads.generated`); :func:`graphopt.workloads.graph_cache.load_graphs` keeps
built graphs on disk.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache, partial
from pathlib import Path

from graphopt.graph import CompGraph
from graphopt.importers.sources import is_source, load_source, source_file
from graphopt.workloads import distribution
from graphopt.workloads.amoebanet import amoebanet
from graphopt.workloads.gnmt import gnmt
from graphopt.workloads.inception import inception_v3
from graphopt.workloads.random_dags import layered_dag, series_parallel_dag
from graphopt.workloads.rnnlm import rnnlm
from graphopt.workloads.transformer_xl import transformer_xl
from graphopt.workloads.wavenet import wavenet

MAX_RANDOM_OPS = 200_000
"""Largest random graph buildable by name."""

_BUILTIN: dict[str, tuple[str, Callable[[], CompGraph]]] = {
    "rnnlm-2": ("RNNLM, 2 LSTM layers of 2048, batch 64, 40 steps, vocab 40k", partial(rnnlm, 2)),
    "rnnlm-4": ("RNNLM, 4 LSTM layers of 2048, batch 64, 40 steps, vocab 40k", partial(rnnlm, 4)),
    "rnnlm-8": ("RNNLM, 8 LSTM layers of 2048, batch 64, 40 steps, vocab 40k", partial(rnnlm, 8)),
    "gnmt-2": (
        "GNMT, 2+2 LSTM layers of 1024, attention, batch 64, 128 steps, 32k wordpieces",
        partial(gnmt, 2),
    ),
    "gnmt-4": (
        "GNMT, 4+4 LSTM layers of 1024, attention, batch 64, 128 steps, 32k wordpieces",
        partial(gnmt, 4),
    ),
    "gnmt-8": (
        "GNMT, 8+8 LSTM layers of 1024, attention, batch 64, 128 steps, 32k wordpieces",
        partial(gnmt, 8),
    ),
    "txl-2": (
        "Transformer-XL, 2 layers, d 512, 8 heads, segment 512 + mem 512, batch 4, 2 segments",
        partial(transformer_xl, 2),
    ),
    "txl-4": (
        "Transformer-XL, 4 layers, d 512, 8 heads, segment 512 + mem 512, batch 4, 2 segments",
        partial(transformer_xl, 4),
    ),
    "txl-8": (
        "Transformer-XL, 8 layers, d 512, 8 heads, segment 512 + mem 512, batch 4, 2 segments",
        partial(transformer_xl, 8),
    ),
    "inception-v3": ("Inception-v3, batch 32, 299x299, auxiliary head", inception_v3),
    "amoebanet": ("AmoebaNet-A (N=6, F=190), batch 16, 331x331", amoebanet),
    "wavenet-2": (
        "WaveNet, 2 stacks x 10 dilated layers, batch 1, 100k samples",
        partial(wavenet, 2),
    ),
    "wavenet-4": (
        "WaveNet, 4 stacks x 10 dilated layers, batch 1, 100k samples",
        partial(wavenet, 4),
    ),
    "rnnlm-tiny": (
        "RNNLM reduced: 2 layers of 256, batch 16, 4 steps, vocab 1000",
        partial(rnnlm, 2, hidden=256, batch=16, vocab=1000, num_steps=4, name="rnnlm-tiny"),
    ),
    "gnmt-tiny": (
        "GNMT reduced: 2+2 layers of 256, batch 16, 2 steps, vocab 1000",
        partial(gnmt, 2, hidden=256, batch=16, vocab=1000, src_len=2, tgt_len=2, name="gnmt-tiny"),
    ),
    "txl-tiny": (
        "Transformer-XL reduced: 1 layer, d 128, 2 heads, segment 32 + memory 32",
        partial(
            transformer_xl,
            1,
            d_model=128,
            n_head=2,
            d_head=64,
            d_inner=512,
            tgt_len=32,
            mem_len=32,
            batch=4,
            num_segments=1,
            name="txl-tiny",
        ),
    ),
    "wavenet-tiny": (
        "WaveNet reduced: 1 stack x 4 layers, 64 skip channels, 1000 samples",
        partial(
            wavenet, 1, layers_per_stack=4, skip_channels=64, samples=1000, name="wavenet-tiny"
        ),
    ),
    "amoebanet-small": (
        "AmoebaNet-A reduced: N=1, F=16, batch 8, 64x64",
        partial(amoebanet, num_cells=1, filters=16, batch=8, image_size=64, name="amoebanet-small"),
    ),
}

SUITES: dict[str, tuple[str, ...]] = {
    "tiny": (
        "rnnlm-tiny",
        "gnmt-tiny",
        "txl-tiny",
        "wavenet-tiny",
        "random-layered-100-s0",
        "random-sp-100-s0",
    ),
    "default": (
        "rnnlm-tiny",
        "gnmt-tiny",
        "txl-tiny",
        "random-layered-200-s0",
        "random-layered-500-s1",
        "random-sp-300-s2",
        "random-sp-1000-s3",
    ),
    "train": (
        "rnnlm-2",
        "rnnlm-4",
        "gnmt-2",
        "gnmt-4",
        "txl-2",
        "txl-4",
        "inception-v3",
        "random-layered-1000-s0",
        "random-layered-5000-s1",
        "random-sp-1000-s2",
        "random-sp-5000-s3",
    ),
    "heldout": ("amoebanet", "wavenet-2", "wavenet-4"),
    "real": (
        "pipedream:alexnet",
        "pipedream:vgg16",
        "pipedream:gnmt",
        "pipedream:resnet18",
        "pipedream:resnet50",
        "pipedream:inception_v3",
        "pipedream:densenet121",
        "pipedream:nasnetamobile",
        "torch:lstm",
        "torch:transformer",
        "torch:resnet",
        "torch:inception",
        "torch:wavenet",
    ),
    "heldout-small": ("wavenet-tiny", "amoebanet-small", "wavenet-2"),
    "large": ("rnnlm-8", "gnmt-8", "txl-8"),
    "go": (
        "rnnlm-2",
        "rnnlm-4",
        "rnnlm-8",
        "gnmt-2",
        "gnmt-4",
        "gnmt-8",
        "txl-2",
        "txl-4",
        "txl-8",
        "inception-v3",
        "amoebanet",
        "wavenet-2",
        "wavenet-4",
    ),
    "train-gen": distribution.training_specs(),
    "train-gen-small": distribution.small_training_specs(),
    "family-test": distribution.family_test_specs(),
    "cross-family": distribution.cross_family_specs(),
}
"""Suite name -> graph names (use as ``suite:<name>``). Members may also be imported graphs
(``pipedream:NAME``, ``torch:NAME?...``, see :mod:`graphopt.importers.sources`): the ``real``
suite holds measured PipeDream profiles and pure-``torch.nn`` zoo models (no optional extras)."""


def suite_names(item: str) -> tuple[str, ...]:
    """The graph names of ``item`` (``suite:NAME``).

    Raises:
        ValueError: an unknown suite, naming the known ones.
    """
    suite = item[len("suite:") :]
    if suite not in SUITES:
        raise ValueError(
            f"unknown suite {suite!r}; known suites: " + ", ".join(f"suite:{s}" for s in SUITES)
        )
    return SUITES[suite]


_RANDOM = re.compile(r"random-(layered|sp)-([1-9][0-9]*)-s(0|[1-9][0-9]*)")
RANDOM_PATTERNS = ("random-layered-<n>-s<seed>", "random-sp-<n>-s<seed>")


def list_graphs() -> dict[str, str]:
    """Built-in graph names (and the random graphs used by suites) -> one-line descriptions."""
    out = {name: desc for name, (desc, _) in _BUILTIN.items()}
    for names in SUITES.values():
        for name in names:
            if name not in out and not is_source(name):
                out[name] = _describe_random(name)
    return out


def list_suites() -> dict[str, tuple[str, ...]]:
    """Suite names (without the ``suite:`` prefix) -> their graph names."""
    return dict(SUITES)


def family_of(name: str) -> str:
    """The family of a graph name: ``"gnmt-8"`` -> ``"gnmt"``, ``"random-sp-100-s0"`` ->
    ``"random-sp"``, ``"inception-v3"`` -> ``"inception"``; a generated graph's is its builder's
    (``"gen:sp?ops=300"`` -> ``"random-sp"``, ``"gen:txl?layers=2"`` -> ``"txl"``), an imported
    graph's its source (``"torch:resnet?depth=18"`` -> ``"torch:resnet"``,
    ``"pipedream:gnmt"`` -> ``"pipedream:gnmt"``)."""
    if name.startswith("gen:"):
        family = name[len("gen:") :].partition("?")[0]
        return {"layered": "random-layered", "sp": "random-sp"}.get(family, family)
    if is_source(name):
        return name.partition("?")[0]
    match = _RANDOM.fullmatch(name)
    if match:
        return f"random-{match.group(1)}"
    return name.split("-")[0]


def get_graph(name: str | Path) -> CompGraph:
    """The graph called ``name``: a built-in or random graph (built once and cached), an imported
    graph (``pipedream:``, ``torch:``), or the path of a graph file (:meth:`CompGraph.load`, read
    on every call; a ``Path``, or a name containing a path separator or ending in
    ``.json``/``.gz``, or naming an existing file).

    Raises:
        ValueError: an unknown name (the message lists the valid names and suites), a failed
            import or an unreadable graph file.
    """
    if isinstance(name, Path) or (not is_source(name) and _looks_like_path(name)):
        return CompGraph.load(name)
    if is_source(name):
        return load_source(name)
    return _named_graph(name)


@lru_cache(maxsize=32)
def _named_graph(name: str) -> CompGraph:
    """Build (once) and return the built-in or random graph called ``name``."""
    if name in _BUILTIN:
        return _BUILTIN[name][1]()
    match = _RANDOM.fullmatch(name)
    if match:
        kind, n, seed = match.group(1), int(match.group(2)), int(match.group(3))
        if not 2 <= n <= MAX_RANDOM_OPS:
            raise ValueError(
                f"random graph {name!r}: the size must lie in [2, {MAX_RANDOM_OPS}], got {n}"
            )
        make = layered_dag if kind == "layered" else series_parallel_dag
        return make(n, seed, name=name)
    raise ValueError(_unknown_message(f"unknown graph {name!r}"))


def resolve_graphs(spec: str | Sequence[str]) -> list[CompGraph]:
    """Graphs named by ``spec``, in order.

    ``spec`` is a comma-separated string (or a sequence) of items, each a graph name
    (:func:`list_graphs`, or a random-graph pattern), ``suite:<name>`` (:data:`SUITES`), an
    imported graph (``pipedream:``, ``torch:``), or the path of a graph file
    (:meth:`CompGraph.load`; anything containing a path separator or ending in ``.json``/``.gz``,
    or an existing file). A path that holds a comma is taken whole where that file exists
    (:func:`split_spec`). Repeated items are kept.

    Raises:
        ValueError: an empty spec, an unknown name or suite, or an unreadable graph file.
    """
    return [graph for graph, _ in resolve_graph_files(spec)]


def resolve_graph_files(spec: str | Sequence[str]) -> list[tuple[CompGraph, Path | None]]:
    """:func:`resolve_graphs` with the file each graph was read from (``None`` for a built-in,
    random or imported graph).

    Raises:
        ValueError: as :func:`resolve_graphs`.
    """
    items = [s.strip() for s in (split_spec(spec) if isinstance(spec, str) else spec)]
    items = [s for s in items if s]
    if not items:
        raise ValueError(
            f"empty graph spec {spec!r}; give graph names, suite:<name> or graph file paths, "
            "comma-separated"
        )
    graphs: list[tuple[CompGraph, Path | None]] = []
    for item in items:
        if item.startswith("suite:"):
            graphs.extend(resolve_graph_files(list(suite_names(item))))
        else:
            split = isinstance(spec, str) and len(items) > 1
            if (
                split
                and not is_source(item)
                and _looks_like_path(item)
                and not _existing_file(item)
            ):
                raise ValueError(
                    f"graph file {item!r} does not exist (the graph spec {spec!r} is a list split "
                    "at commas; a path that holds a comma is taken whole where that file exists)"
                )
            path = Path(item) if not is_source(item) and _looks_like_path(item) else None
            graphs.append((get_graph(item), path))
    return graphs


def split_spec(spec: str) -> list[str]:
    """The items of a comma-separated graph spec, where the path of a file that exists is one
    item even if it holds commas: ``"a.json,runs/x,y.json,txl-tiny"`` is ``["a.json",
    "runs/x,y.json", "txl-tiny"]`` when ``runs/x,y.json`` is a file (likewise
    ``pipedream:PATH``). Among the ways to join consecutive pieces into a file, the longest wins.
    A path with a comma that does not exist is split (and reported as unknown piece by piece)."""
    pieces = spec.split(",")
    if len(pieces) == 1:
        return pieces
    items: list[str] = []
    i = 0
    while i < len(pieces):
        j = next(
            (
                j
                for j in range(len(pieces), i + 1, -1)
                if _existing_file(",".join(pieces[i:j]).strip())
            ),
            i + 1,
        )
        items.append(",".join(pieces[i:j]))
        i = j
    return items


def _existing_file(item: str) -> bool:
    """Whether ``item`` is the path of a file that exists (or ``pipedream:`` such a path)."""
    if source_file(item) is not None:
        return True
    try:
        return Path(item).is_file()
    except (OSError, ValueError):  # a name too long, a NUL in it
        return False


def _looks_like_path(item: str) -> bool:
    if item in _BUILTIN or _RANDOM.fullmatch(item):
        return False
    return "/" in item or "\\" in item or item.endswith((".json", ".gz")) or _existing_file(item)


def _describe_random(name: str) -> str:
    match = _RANDOM.fullmatch(name)
    assert match, name
    kind = "layered" if match.group(1) == "layered" else "series-parallel"
    return f"random {kind} DAG, {match.group(2)} ops, seed {match.group(3)}"


def _unknown_message(head: str) -> str:
    return (
        f"{head}; known graphs: {', '.join(_BUILTIN)}; random graphs: "
        f"{', '.join(RANDOM_PATTERNS)}; suites: {', '.join(f'suite:{s}' for s in SUITES)}; "
        "imported graphs: pipedream:NAME, tarnawski:NAME, torch:NAME?ARG=INT (graphopt graphs list); "
        "generated graphs: gen:FAMILY?ARG=INT (e.g. gen:rnnlm?layers=2); "
        "or give a path to a graph file (.json or .json.gz)"
    )
