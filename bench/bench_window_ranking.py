"""Can the GO network rank the decoder search's window moves? A learned proposer, measured.

Usage: python bench/bench_window_ranking.py [--variant full|mlp] [--windows 384] [--epochs 30]

The decoder search (``graphopt/decoders/search.py``) finds its gains with *window* moves: a
contiguous window of the topological order released from the anchor (the best heuristic's
placement) and pulled towards one device, re-placed by the list scheduler. Few windows gain (0.4
to 8% of random ones on the held-out graphs), so a network that ranked them would give zero-shot
gains and searches of a few calls. This bench trains one and compares its top-k windows with
random windows at equal simulator calls.

1. Data: on each training graph (``bench_decoder_learning.TRAIN``, v100-nvlink-4, decoder
   heft-lc), ``--windows`` random windows (start, length in 0.5/1/2/5/10/20% of the ops, device)
   decoded and simulated: label ``log(t_anchor / t_window)``. The first 75% of each graph's
   windows train, the rest measure how well the ranking generalises to unseen windows of the
   *same* graphs.
2. Model: the GO network's trunk (GraphSAGE, segment attention with FiLM, the anchor as hint,
   the op context features) gives per-op embeddings ``h``; a window's score is an MLP of the mean
   of ``h`` over the window, ``h`` at its ends, the share of the window on each device, the target
   device, each device's busy time under the anchor and the log length. ``--variant mlp``: no
   GraphSAGE and no attention (per-op features only). Trained with a listwise loss (ListNet,
   temperature 0.01 on the labels, clipped at +-0.2) per graph, Adam 1e-3.
3. Evaluation: on the held-out graphs (``bench_decoder_learning.EVAL``) every window of a grid
   (each length, starts at half-length strides, each device) is scored in one forward pass; the
   top ``k`` are simulated and the best kept (the anchor if none gains), against ``k`` random
   windows of the same grid. Printed per graph and as geometric means.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import envs
from graphopt.encoding import CONTEXT_FEATURES
from graphopt.nn.batching import graph_batch, pack, to_padded
from policies.film import graph_context
from policies.go_network import GONetwork, with_context

sys.path.insert(0, str(Path(__file__).parent))
from bench_decoder_learning import CLUSTER, EVAL, MAX_OPS, TRAIN  # noqa: E402

LENGTHS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2)
KS = (1, 4, 16, 64)
Window = tuple[int, int, int]  # start, length, device


def window_outputs(env: Any, n: int, window: Window) -> np.ndarray:
    """The decoder inputs of one window move: gate +1 and affinity +3 for the device on it."""
    start, length, device = window
    channels = list(env.channels)
    out = np.zeros((len(channels), n))
    out[channels.index("gate"), start : start + length] = 1.0
    out[channels.index(f"affinity:{device}"), start : start + length] = 3.0
    return out


def gains(env: Any, index: int, windows: list[Window]) -> np.ndarray:
    """``log(t_anchor / t)`` of each window (-1 for an invalid decision): one decode and one
    simulation each."""
    graph = env.graphs[index]
    ref = env.reference(index).measurement.step_time
    out = []
    for w in windows:
        decision = env.decode_outputs(index, window_outputs(env, graph.num_ops, w))
        m = env.cost_model.evaluate(graph, env.cluster, decision)
        out.append(math.log(ref / m.step_time) if m.valid else -1.0)
    return np.array(out)


def random_windows(n: int, devices: int, count: int, rng: np.random.Generator) -> list[Window]:
    out = []
    for _ in range(count):
        length = max(1, round(LENGTHS[rng.integers(len(LENGTHS))] * n))
        start = int(rng.integers(0, max(1, n - length + 1)))
        out.append((start, length, int(rng.integers(devices))))
    return out


def grid_windows(n: int, devices: int) -> list[Window]:
    out = set()
    for share in LENGTHS:
        length = max(1, round(share * n))
        for start in range(0, max(1, n - length + 1), max(1, length // 2)):
            out.update((start, length, d) for d in range(devices))
    return sorted(out)


class WindowScorer(nn.Module):
    """Scores windows of one graph from the GO network's per-op embeddings."""

    def __init__(self, devices: int, **network: Any) -> None:
        super().__init__()
        self.devices = devices
        self.net = GONetwork(
            {"placement": devices}, context_features=len(CONTEXT_FEATURES), **network
        )
        hidden = self.net.settings.hidden
        self.mlp = nn.Sequential(
            nn.Linear(3 * hidden + 4 * devices + 3, 128),
            nn.ReLU(),
            nn.Linear(128, 64),
            nn.ReLU(),
            nn.Linear(64, 1),
        )

    def embed(self, obs: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-op embeddings of the GO network's trunk (hint added, FiLM applied) and the hint."""
        net = self.net
        batch = graph_batch({k: torch.as_tensor(v)[None] for k, v in obs.items()})
        batch = with_context(batch, net.context_features)
        packed = pack(batch)
        h = to_padded(net.encoder(packed), packed)
        mask = packed.node_mask
        hint = net._hint_blocks(batch, h.shape[1])[0]
        h = h + net.hint_embed[0](hint + 1) * mask.unsqueeze(-1)
        films = None
        if net.film is not None:
            context = graph_context(
                h, mask, batch.graph_features, batch.device_features, batch.device_mask
            )
            films = net.film(context)
        h = net.trunk(h, mask, None if films is None else films[: net.attn_layers])
        return h[0], hint[0]

    def forward(
        self, obs: dict[str, np.ndarray], windows: list[Window], n: int, busy: np.ndarray
    ) -> torch.Tensor:
        h, hint = self.embed(obs)
        h, hint = h[:n], hint[:n].clamp(min=0)
        prefix = F.pad(torch.cumsum(h, 0), (0, 0, 1, 0))
        on = F.pad(torch.cumsum(F.one_hot(hint, self.devices).float(), 0), (0, 0, 1, 0))
        start = torch.tensor([w[0] for w in windows])
        length = torch.tensor([w[1] for w in windows])
        target = F.one_hot(torch.tensor([w[2] for w in windows]), self.devices).float()
        end = start + length
        size = length[:, None].float()
        share = (on[end] - on[start]) / size
        load = torch.as_tensor(busy, dtype=torch.float32)
        load = (load / load.max().clamp(min=1e-12)).expand(len(windows), -1)
        x = torch.cat(
            [
                (prefix[end] - prefix[start]) / size,
                h[start],
                h[end - 1],
                share,
                target,
                load,
                load * target,
                (share * load).sum(1, keepdim=True),
                (target * load).sum(1, keepdim=True),
                torch.log(size / n),
            ],
            1,
        )
        return self.mlp(x).squeeze(-1)


def listnet(score: torch.Tensor, label: torch.Tensor, tau: float = 0.01) -> torch.Tensor:
    return -(F.softmax(label / tau, 0) * F.log_softmax(score, 0)).sum()


def best_of(values: np.ndarray, k: int) -> float:
    """The speed-up of the best of the first ``k`` windows, the anchor if none gains."""
    return math.exp(max(0.0, float(values[:k].max())))


def geomean(values: list[float]) -> float:
    return math.exp(float(np.mean(np.log(values))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", choices=("full", "mlp"), default="full")
    parser.add_argument("--windows", type=int, default=384)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    began = time.perf_counter()
    settings = dict(decoder="heft-lc", max_ops=MAX_OPS, max_edges=4 * MAX_OPS)
    train_env = envs.make_env("placement", TRAIN, CLUSTER, **settings)
    devices = train_env.cluster.num_devices
    split = int(0.75 * args.windows)
    data = []
    for i, graph in enumerate(train_env.graphs):
        windows = random_windows(graph.num_ops, devices, args.windows, rng)
        data.append((windows, gains(train_env, i, windows)))
    obs = [train_env.reset(options={"graph": i})[0] for i in range(len(train_env.graphs))]
    busy = [train_env.reference(i).measurement.busy_time for i in range(len(train_env.graphs))]
    print(
        f"{len(data)} training graphs x {args.windows} windows, labelled in "
        f"{time.perf_counter() - began:.0f} s; windows that gain: "
        f"{np.mean([np.mean(y > 1e-4) for _, y in data]):.1%}",
        flush=True,
    )
    network = {"mlp": {"sage_layers": 0, "attn_layers": 0}}.get(args.variant, {})
    model = WindowScorer(devices, **network)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(args.epochs):
        total = 0.0
        for i in rng.permutation(len(data)):
            windows, y = data[i]
            n = train_env.graphs[i].num_ops
            score = model(obs[i], windows[:split], n, busy[i])
            label = torch.tensor(np.clip(y[:split], -0.2, 0.2), dtype=torch.float32)
            loss = listnet(score, label)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
        if (epoch + 1) % 10 == 0:
            print(f"epoch {epoch + 1}: loss {total / len(data):.3f}", flush=True)
    model.eval()
    # unseen windows of the training graphs: the top k by score against the first k
    seen = {k: ([], []) for k in KS}
    with torch.no_grad():
        for i, (windows, y) in enumerate(data):
            n = train_env.graphs[i].num_ops
            score = model(obs[i], windows[split:], n, busy[i]).numpy()
            rest = y[split:]
            for k in KS:
                seen[k][0].append(best_of(rest[np.argsort(-score)], k))
                seen[k][1].append(best_of(rest, k))
    print(
        "unseen windows of the training graphs (of "
        f"{args.windows - split} per graph), geomean best-of-k: "
        + ", ".join(
            f"k={k} network {geomean(seen[k][0]):.4f} random {geomean(seen[k][1]):.4f}"
            for k in KS
            if k < args.windows - split
        ),
        flush=True,
    )
    eval_env = envs.make_env("placement", EVAL, CLUSTER, **settings)
    table: dict[str, list[float]] = {f"{who}@{k}": [] for who in ("network", "random") for k in KS}
    print("| graph | " + " | ".join(table) + " |")
    print("| --- | " + " | ".join("---:" for _ in table) + " |")
    for i, graph in enumerate(eval_env.graphs):
        n = graph.num_ops
        grid = grid_windows(n, devices)
        o = eval_env.reset(options={"graph": i})[0]
        with torch.no_grad():
            score = model(o, grid, n, eval_env.reference(i).measurement.busy_time).numpy()
        top = [grid[j] for j in np.argsort(-score)[: max(KS)]]
        drawn = np.random.default_rng(args.seed + 1).choice(len(grid), max(KS), replace=False)
        ours, theirs = gains(eval_env, i, top), gains(eval_env, i, [grid[j] for j in drawn])
        for k in KS:
            table[f"network@{k}"].append(best_of(ours, k))
            table[f"random@{k}"].append(best_of(theirs, k))
        print(f"| {graph.name} | " + " | ".join(f"{v[-1]:.4f}" for v in table.values()) + " |")
    print(
        f"| geometric mean ({args.variant}) | "
        + " | ".join(f"{geomean(v):.4f}" for v in table.values())
        + " |",
        flush=True,
    )


if __name__ == "__main__":
    main()
