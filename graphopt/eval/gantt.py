"""Gantt chart of a simulated schedule: one row per device and one per busy link."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from graphopt.file_set import figure_bytes, write_file
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.typing import Schedule

MAX_LEGEND_TYPES = 10


def plot_gantt(
    graph: CompGraph,
    cluster: Cluster,
    schedule: Schedule,
    path: str | Path,
    title: str | None = None,
) -> Path:
    """Write :func:`gantt_plot` of ``schedule`` to ``path``, in the type of its suffix (PNG
    without one), whole or not at all (:func:`graphopt.file_set.write_file`); return the path."""
    path = Path(path)
    return write_file(
        path, gantt_plot(graph, cluster, schedule, title, path.suffix[1:].lower() or "png")
    )


def gantt_plot(
    graph: CompGraph,
    cluster: Cluster,
    schedule: Schedule,
    title: str | None = None,
    kind: str = "png",
) -> bytes:
    """A Gantt chart of ``schedule`` as the bytes of a ``kind`` file (``png``, ``svg``, ...):
    one row per device and one per link that carried data.

    Kernels are coloured by the op type of their root (the ten most frequent types get their own
    colour, the rest share grey); transfers are drawn on one row per link that carried data.
    Rectangles are drawn with one ``broken_barh`` call per row and colour, so 80,000-op schedules plot
    in seconds.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    root_type = [graph.op_types[k.ops[-1]] for k in schedule.kernels]
    top = [t for t, _ in Counter(root_type).most_common(MAX_LEGEND_TYPES)]
    cmap = plt.get_cmap("tab10")
    colour = {t: cmap(i) for i, t in enumerate(top)}
    links = sorted({(t.src, t.dst) for t in schedule.transfers})
    rows = [d.name for d in cluster.devices] + [
        f"{cluster.devices[s].name}→{cluster.devices[d].name}" for s, d in links
    ]
    fig, ax = plt.subplots(figsize=(12, 1.0 + 0.45 * len(rows)))
    scale, unit = _time_unit(max((k.end for k in schedule.kernels), default=0.0))
    for device in range(cluster.num_devices):
        by_colour: dict[object, list[tuple[float, float]]] = {}
        for k, t in zip(schedule.kernels, root_type, strict=True):
            if k.device == device:
                by_colour.setdefault(colour.get(t, "0.6"), []).append(
                    (k.start * scale, (k.end - k.start) * scale)
                )
        for c, spans in by_colour.items():
            ax.broken_barh(spans, (device - 0.4, 0.8), facecolors=c, edgecolor="none")
    for row, link in enumerate(links, start=cluster.num_devices):
        spans = [
            (t.start * scale, (t.end - t.start) * scale)
            for t in schedule.transfers
            if (t.src, t.dst) == link
        ]
        ax.broken_barh(spans, (row - 0.3, 0.6), facecolors="black", edgecolor="none")
    ax.set_yticks(np.arange(len(rows)), rows)
    ax.invert_yaxis()
    ax.set_xlabel(f"time ({unit})")
    ax.set_title(title or f"{graph.name} on {cluster.name}")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour[t]) for t in top]
    labels = list(top)
    if links:
        handles.append(plt.Rectangle((0, 0), 1, 1, color="black"))
        labels.append("transfer")
    if handles:
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.tight_layout()
    try:
        return figure_bytes(fig, kind, dpi=110)
    finally:
        plt.close(fig)


def _time_unit(span: float) -> tuple[float, str]:
    if span >= 1.0:
        return 1.0, "s"
    if span >= 1e-3:
        return 1e3, "ms"
    return 1e6, "µs"
