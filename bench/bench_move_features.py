"""Which knowledge of single-op moves carries over to held-out families: local features of the
hint's schedule, or a model of the whole schedule?

Usage: python bench/bench_move_features.py [--random-graphs R] [--extra GRAPHS]

``bench_move_ranking.py`` shows the GO network's logits, trained to rank single-op moves on the
training graphs, pick no improving move on the held-out ones. This asks whether the fault lies in
what the ranker sees. Every single-op move from the hint (the best heuristic's placement,
``v100-nvlink-4``) is simulated on ``suite:default`` plus ``R`` random DAGs and the ``--extra``
graphs (training) and on the held-out graphs; then, per graph, the move ranked first by

- ``gbdt (gain)`` / ``gbdt (improves?)``: LightGBM (300 trees) regressing the log speed-up of a move
  / classifying whether it improves, on 15 *decision-aware local features* of (op, device) taken
  from the hint's simulated schedule (:func:`move_features`: op times, the op's earliest finish on
  the new device given when its inputs would arrive, how late its successors' inputs would be,
  its slack, transfer seconds added and removed, the loads and the occupancy of the new device
  over that window), all divided by the step time;
- ``earliest finish``: one of those features alone (how much earlier the op could finish there);
- ``analytic estimate``: the contention-aware insertion schedule of the whole moved placement
  (:class:`graphopt.sim.estimate.PlacementEstimate`), no learning;

is priced by the simulator: the count of graphs where it improves on the hint, and the geometric
mean speed-up, beside the oracle (best move, or none). No torch.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import lightgbm as lgb
import numpy as np
from placement_moves import HELD_OUT, move_times, random_graph_names

from graphopt.baselines.staged import best_heuristic
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster, get_cluster
from graphopt.sim import PreparedGraph, Simulator
from graphopt.sim.estimate import PlacementEstimate, estimate_links
from graphopt.sim.links import transfer_times_by_inverse
from graphopt.typing import Decision
from graphopt.workloads.registry import resolve_graphs
from policies.rollout import geomean

EARLIEST_FINISH = 3  # column of move_features: (finish now - earliest finish there) / step time


def _busy_until(
    starts: np.ndarray, ends: np.ndarray, before: np.ndarray, t: np.ndarray
) -> np.ndarray:
    """Seconds a device with sorted busy intervals ``[starts, ends)`` (``before``: busy seconds
    before each interval) has been busy by time ``t``."""
    k = np.searchsorted(starts, t, "right") - 1
    kk = np.maximum(k, 0)
    busy = before[kk] + np.clip(t - starts[kk], 0.0, ends[kk] - starts[kk])
    return np.where(k >= 0, busy, 0.0)


def move_features(graph: CompGraph, cluster: Cluster, hint: np.ndarray) -> np.ndarray:
    """``(N, D, 15)`` local features of moving op ``i`` to device ``d``, from one simulation of
    ``hint`` (the columns are listed in the module docstring; times over the step time)."""
    m = Simulator().evaluate(graph, cluster, Decision(placement=hint), schedule=True)
    assert m.schedule is not None
    t, n, d = m.step_time, graph.num_ops, cluster.num_devices
    start, end = np.zeros(n), np.zeros(n)
    for kernel in m.schedule.kernels:
        start[list(kernel.ops)], end[list(kernel.ops)] = kernel.start, kernel.end
    op_time = PreparedGraph(graph, cluster).op_time  # (N, D)
    src, dst = np.asarray(graph.edge_src), np.asarray(graph.edge_dst)
    nbytes = np.asarray(graph.edge_bytes, dtype=np.float64)[:, None]
    latency, inv_bw = estimate_links(cluster)
    devices = np.arange(d)[None, :]

    def comm(a: np.ndarray, b: np.ndarray) -> np.ndarray:  # (E, D) transfer seconds a -> b
        return transfer_times_by_inverse(latency, inv_bw, a, b, nbytes)

    def per_op(at: np.ndarray, values: np.ndarray) -> np.ndarray:
        out = np.zeros((n, d))
        np.add.at(out, at, np.broadcast_to(values, (len(at), d)))
        return out

    ready = np.zeros((n, d))  # when op i's inputs would all be on device d
    np.maximum.at(ready, dst, end[src][:, None] + comm(hint[src][:, None], devices))
    finish = ready + op_time
    late = np.full((n, d), -t)  # how late the op's output would reach its latest-hit successor
    np.maximum.at(late, src, finish[src] + comm(devices, hint[dst][:, None]) - start[dst][:, None])
    slack = t - end
    np.minimum.at(slack, src, start[dst] - end[src] - comm(hint[src], hint[dst])[:, 0])
    now_in = per_op(dst, comm(hint[src][:, None], hint[dst][:, None]))
    now_out = per_op(src, comm(hint[src][:, None], hint[dst][:, None]))
    load = np.bincount(hint, weights=op_time[np.arange(n), hint], minlength=d)
    occupied = np.zeros((n, d))  # busy share of device e over [ready, ready + op time]
    for e in range(d):
        on = np.flatnonzero(hint == e)
        if on.size:
            on = on[np.argsort(start[on])]
            before = np.concatenate([[0.0], np.cumsum(end[on] - start[on])[:-1]])
            a, b = ready[:, e], ready[:, e] + np.maximum(op_time[:, e], 1e-12)
            busy = _busy_until(start[on], end[on], before, b) - _busy_until(
                start[on], end[on], before, a
            )
            occupied[:, e] = busy / (b - a)
    here = op_time[np.arange(n), hint][:, None]
    column = np.ones((1, d))
    columns = [
        op_time,
        here * column,
        op_time - here,
        end[:, None] - finish,
        late,
        slack[:, None] * column,
        start[:, None] * column,
        end[:, None] * column,
        per_op(dst, comm(hint[src][:, None], devices)) - now_in,
        per_op(src, comm(devices, hint[dst][:, None])) - now_out,
        load[None, :] * np.ones((n, 1)),
        load[hint][:, None] * column,
    ]
    scaled = [c / t for c in columns]
    flags = [occupied, ((t - end) < 1e-9 * t)[:, None] * column]
    return np.stack([*scaled[:12], flags[0], (ready - start[:, None]) / t, flags[1]], axis=-1)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--random-graphs", type=int, default=12)
    parser.add_argument("--extra", default="", help="more training graphs (comma list)")
    args = parser.parse_args()
    cluster = get_cluster("v100-nvlink-4")
    d = cluster.num_devices

    def load(names: list[str]) -> list[tuple]:
        rows = []
        for graph in resolve_graphs(names):
            decision, _, _ = best_heuristic(graph, cluster, "placement", Simulator())
            hint = np.asarray(decision.placement, dtype=np.int64)
            base, times = move_times(PreparedGraph(graph, cluster), hint, d)
            stay = np.arange(d)[None, :] == hint[:, None]
            rows.append(
                (graph, hint, move_features(graph, cluster, hint), np.log(base / times), stay)
            )
        return rows

    t0 = time.perf_counter()
    extra = [name for name in args.extra.split(",") if name]
    train = load(["suite:default", *random_graph_names(args.random_graphs), *extra])
    held = load(HELD_OUT.split(","))
    x = np.concatenate([f[~stay] for _, _, f, _, stay in train])
    y = np.concatenate([g[~stay] for _, _, _, g, stay in train])
    print(
        f"{len(train)} training graphs ({len(y):,} moves), {len(held)} held-out; "
        f"features and every move simulated in {time.perf_counter() - t0:.0f} s"
    )
    params = {"learning_rate": 0.05, "num_leaves": 31, "verbose": -1, "num_threads": 1}
    regress = lgb.train({**params, "objective": "regression"}, lgb.Dataset(x, y), 300)
    classify = lgb.train({**params, "objective": "binary"}, lgb.Dataset(x, (y > 1e-6) * 1), 300)

    def flat(model: lgb.Booster) -> Callable[..., np.ndarray]:
        return lambda g, h, f: model.predict(f.reshape(-1, f.shape[-1])).reshape(f.shape[:2])

    def analytic(g: CompGraph, h: np.ndarray, f: np.ndarray) -> np.ndarray:
        moved = np.repeat(h[None], g.num_ops * d, axis=0)
        moved[np.arange(g.num_ops * d), np.repeat(np.arange(g.num_ops), d)] = np.tile(
            np.arange(d), g.num_ops
        )
        return -PlacementEstimate(g, cluster)(moved).reshape(g.num_ops, d)

    rankers = {
        "gbdt (gain)": flat(regress),
        "gbdt (improves?)": flat(classify),
        "earliest finish": lambda g, h, f: f[..., EARLIEST_FINISH],
        "analytic estimate": analytic,
    }
    for split, rows in (("training", train), ("held-out", held)):
        oracle = [
            float(np.exp(max(np.nanmax(np.where(stay, -np.inf, gain)), 0.0)))
            for _, _, _, gain, stay in rows
        ]
        print(f"{split}: oracle (best move, or none) {geomean(oracle):.4f}")
        for name, rank in rankers.items():
            picked = []
            for g, h, f, gain, stay in rows:
                score = np.where(stay, -np.inf, rank(g, h, f))
                picked.append(float(np.exp(gain.flat[int(np.argmax(score))])))
            per_graph = " ".join(f"{p:.3f}" for p in picked) if split == "held-out" else ""
            print(
                f"  {name:<18} top-1 move improves {sum(p > 1 + 1e-9 for p in picked)}/"
                f"{len(picked)}, geomean {geomean(picked):.4f}  {per_graph}",
                flush=True,
            )


if __name__ == "__main__":
    main()
