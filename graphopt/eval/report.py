"""Tables, files and plots of method comparisons (``graphopt baselines`` and ``graphopt eval``)."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from rich.console import Console
from rich.table import Table

from graphopt import strict_json
from graphopt.eval.compare import GraphComparison, geomean_speedups
from graphopt.eval.console import make_console
from graphopt.file_set import FileSet, figure_bytes, write_file


def print_comparisons(
    comparisons: list[GraphComparison], title: str, console: Console | None = None
) -> None:
    """One table per graph, then the geometric means; where the graphs ran on different clusters
    (``--cluster each``), each table names its graph's."""
    console = console or make_console()
    several = len({c.cluster for c in comparisons}) > 1
    for c in comparisons:
        best = c.best_heuristic
        ref = c.optimum if c.optimum is not None else c.lower_bound
        ref_name = "optimum" if c.optimum is not None else "lower bound"
        on = f" on {c.cluster}" if several else ""
        table = Table(title=f"{c.graph} ({c.num_ops:,} ops){on}, {title}")
        for col in (
            "method",
            "step (ms)",
            "vs single",
            "vs best heur.",
            f"gap to {ref_name}",
            "valid",
            "wall (s)",
        ):
            numeric = col not in ("method", "valid")
            table.add_column(col, justify="right" if numeric else "left", no_wrap=numeric)
        for r in c.results:
            ok = r.valid and math.isfinite(r.step_time)
            ratio = ok and r.step_time > 0  # a graph of zero-cost ops takes 0 s: no ratio
            table.add_row(
                r.method + (" *" if best is not None and r.method == best.method else ""),
                f"{r.step_time * 1e3:,.3f}" if ok else "-",
                f"{c.single_device_time / r.step_time:.2f}x" if ratio else "-",
                f"{c.speedup_over_best_heuristic(r.method):.3f}x" if ratio else "-",
                f"{r.step_time / ref - 1:+.1%}" if ok and ref > 0 else "-",
                "yes" if r.valid else ("OOM" if "memory" in r.reason else "no"),
                f"{r.wall_seconds:.2f}",
            )
        table.caption = f"* best heuristic; {ref_name} {ref * 1e3:,.3f} ms"
        console.print(table)
    means = geomean_speedups(comparisons)
    summary = Table(
        title=f"geometric mean over {len(comparisons)} graphs: speed-up over the best heuristic"
    )
    summary.add_column("method")
    summary.add_column("speed-up", justify="right", no_wrap=True)
    for method, value in means.items():
        summary.add_row(method, f"{value:.3f}x" if value > 0 else "invalid on some graph")
    console.print(summary)


def write_comparisons(
    comparisons: list[GraphComparison], out_dir: Path, json_name: str = "results.json"
) -> tuple[Path, Path]:
    """Write :func:`comparison_files` into ``out_dir`` and return both paths. Both appear
    together or neither (:class:`graphopt.file_set.FileSet`); ``out_dir`` is made with them.

    Raises:
        ValueError: a file cannot be written; nothing is left.
    """
    json_path = out_dir / json_name
    csv_path = json_path.with_suffix(".csv")
    files = FileSet(out_dir)  # both files appear together, or neither
    for name, text in comparison_files(comparisons, json_name).items():
        files.write(name, text)
    files.commit(last=(csv_path.name,))
    return json_path, csv_path


def comparison_files(comparisons: list[GraphComparison], json_name: str) -> dict[str, str]:
    """The files of a comparison by name: ``json_name`` (everything) and the same name with the
    suffix ``.csv`` (one row per graph and method; ``decision_file`` names the row's saved
    decision, empty when none was saved), the JSON first."""
    csv_name = Path(json_name).with_suffix(".csv").name
    text = strict_json.dumps(
        {
            "graphs": [c.to_dict() for c in comparisons],
            "geomean_speedup_over_best_heuristic": geomean_speedups(comparisons),
        },
        indent=2,
    )
    with io.StringIO(newline="") as f:
        w = csv.writer(f)
        w.writerow(
            [
                "graph",
                "ops",
                "cluster",
                "method",
                "kind",
                "step_time",
                "valid",
                "speedup_over_best_heuristic",
                "speedup_over_single",
                "lower_bound",
                "optimum",
                "wall_seconds",
                "evaluations",
                "reason",
                "decision_file",
            ]
        )
        for c in comparisons:
            for r in c.results:
                w.writerow(
                    [
                        c.graph,
                        c.num_ops,
                        c.cluster,
                        r.method,
                        r.kind,
                        r.step_time,
                        r.valid,
                        c.speedup_over_best_heuristic(r.method),
                        c.single_device_time / r.step_time if r.valid and r.step_time > 0 else 0.0,
                        c.lower_bound,
                        "" if c.optimum is None else c.optimum,
                        r.wall_seconds,
                        r.evaluations,
                        r.reason,
                        r.decision_file or "",
                    ]
                )
        return {json_name: text, csv_name: f.getvalue()}


def plot_comparisons(comparisons: list[GraphComparison], path: Path, title: str) -> Path:
    """Write :func:`comparison_plot` to ``path`` in the type of its suffix, whole or not at all
    (:func:`graphopt.file_set.write_file`); returns the path."""
    return write_file(path, comparison_plot(comparisons, title, path.suffix[1:].lower() or "png"))


def comparison_plot(comparisons: list[GraphComparison], title: str, kind: str = "png") -> bytes:
    """Grouped bars, as the bytes of a ``kind`` file (``png``, ``svg``, ...): per graph, each
    method's step time relative to the best heuristic (lower is better; invalid decisions are
    drawn as empty slots)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    methods: list[str] = []
    for c in comparisons:
        for r in c.results:
            if r.method not in methods:
                methods.append(r.method)
    fig, ax = plt.subplots(figsize=(max(8, 1.2 * len(comparisons) * max(1, len(methods)) / 4), 4.5))
    width = 0.8 / max(len(methods), 1)
    x = np.arange(len(comparisons))
    cmap = plt.get_cmap("tab20")
    for k, method in enumerate(methods):
        values = []
        for c in comparisons:
            s = c.speedup_over_best_heuristic(method)
            values.append(1.0 / s if s > 0 else np.nan)
        ax.bar(
            x + (k - (len(methods) - 1) / 2) * width,
            values,
            width,
            label=method,
            color=cmap(k % 20),
        )
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(x, [c.graph for c in comparisons], rotation=20, ha="right")
    ax.set_ylabel("step time / best heuristic")
    ax.set_title(title)
    ax.legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    try:
        return figure_bytes(fig, kind, dpi=110)
    finally:
        plt.close(fig)


def training_curve_plot(metrics_csv: Path, title: str, kind: str = "png") -> bytes | None:
    """Speed-up over the reference (geometric mean) against timesteps: training samples and greedy
    validation, from a run's ``metrics.csv``, as the bytes of a ``kind`` file (``png``, ``svg``,
    ...). Returns None when there is nothing to plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not metrics_csv.exists():
        return None
    rows = list(csv.DictReader(metrics_csv.open()))
    series: dict[str, tuple[list[float], list[float]]] = {"train": ([], []), "val": ([], [])}
    for row in rows:
        if row["kind"] in series and row["speedup_geomean"]:
            series[row["kind"]][0].append(float(row["timesteps"]))
            series[row["kind"]][1].append(float(row["speedup_geomean"]))
    if not any(xs for xs, _ in series.values()):
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, (xs, ys) in series.items():
        if xs:
            ax.plot(xs, ys, marker="o" if label == "val" else None, label=f"{label} (geomean)")
    ax.axhline(
        1.0, color="black", linewidth=0.8, linestyle="--", label="reference (best heuristic)"
    )
    ax.set_xlabel("timesteps (decisions)")
    ax.set_ylabel("speed-up over reference")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    try:
        return figure_bytes(fig, kind, dpi=110)
    finally:
        plt.close(fig)
