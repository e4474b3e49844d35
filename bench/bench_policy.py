"""GO policy speed: one forward pass on a large graph, and PPO's ``evaluate_actions`` on a batch.

Usage: python bench/bench_policy.py [--graph NAME] [--cluster PRESET] [--threads T ...] [--repeats N]
       [--batch-graph NAME] [--batch B] [--profile]

Each part runs once per ``--threads`` value (default: 2, then 1).

1. Inference (``torch.inference_mode``, batch 1, default network): ``GOPolicy`` forward pass
   (network, then sampling an action for every op) on ``--graph`` (default ``gnmt-8``: 86,562 ops,
   154,402 edges) encoded with ``max_ops = num_ops``. Target: under 1 s on 2 CPU cores.
2. Training step shape: ``evaluate_actions`` (forward with gradients, log-probabilities, entropy,
   then ``backward``) on ``--batch`` copies of ``--batch-graph`` (default a 1,000-op random DAG):
   identical copies (deduplicated: embedded once) and copies made distinct (embedded each).
   Reports the time with and without ``backward``.

Prints the best and median of ``--repeats`` runs in milliseconds; ``--profile`` adds a breakdown of
the forward pass by stage. The machine's load average is printed first: with other processes on
the two cores, multi-threaded PyTorch slows down far more than in proportion (its worker threads
wait for each other), so compare timings taken at a low load only.

glibc returns freed blocks above 128 KiB to the OS, so every large tensor page-faults its memory
again; ``MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=17179869184`` in the environment
keeps freed memory for reuse and saved about 20% of the large-graph forward pass on our 2-core VM.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import time
from collections.abc import Callable
from typing import TypeVar

import numpy as np
import torch
from gymnasium import spaces

from graphopt.encoding import encode, observation_space
from graphopt.hardware import get_cluster
from graphopt.nn.batching import graph_batch, obs_to_tensors, pack, to_padded
from graphopt.workloads import get_graph
from policies.sb3_policy import GOPolicy
from policies.segment_attention import SegmentAttentionLayer, extend


def _timed(fn: Callable[[], object], repeats: int) -> list[float]:
    fn()  # warm-up (allocator, lazy init)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def _report(label: str, times: list[float]) -> None:
    print(
        f"{label}: best {min(times) * 1e3:.0f} ms, median {statistics.median(times) * 1e3:.0f} ms"
    )


def _policy(max_ops: int, max_edges: int, num_devices: int) -> GOPolicy:
    space = spaces.MultiDiscrete(np.full(max_ops, num_devices))
    return GOPolicy(observation_space(max_ops, max_edges), space, lambda _: 3e-4, task="placement")


def _profile(policy: GOPolicy, obs: dict[str, torch.Tensor]) -> None:
    """Time the stages of the network's forward pass (same steps as ``GONetwork.forward``)."""
    net = policy.network
    stages: dict[str, float] = {}
    T = TypeVar("T")

    def stage(name: str, fn: Callable[[], T]) -> T:
        start = time.perf_counter()
        out = fn()
        stages[name] = time.perf_counter() - start
        return out

    with torch.inference_mode():
        batch = graph_batch(obs)
        packed = stage("pack", lambda: pack(batch))
        nodes = stage("graph encoder", lambda: net.encoder(packed))
        h = to_padded(nodes, packed)
        mask = packed.node_mask
        layers = [layer for layer in net.trunk.layers if isinstance(layer, SegmentAttentionLayer)]
        x, valid = extend(h, mask, layers[0].segment_len, layers[0].mem_len)
        for i, layer in enumerate(layers):
            step = functools.partial(layer.step, x, valid)
            x = stage(f"attention layer {i}", step)
        h = x[:, layers[0].mem_len : layers[0].mem_len + h.shape[1]]
        stage("heads", lambda: net.heads(h, mask))
    for name, seconds in stages.items():
        print(f"  {name:<20} {seconds * 1e3:7.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--graph", default="gnmt-8")
    parser.add_argument("--cluster", default="v100-nvlink-8")
    parser.add_argument("--threads", type=int, nargs="+", default=[2, 1])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch-graph", default="random-layered-1000-s0")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    cluster = get_cluster(args.cluster)
    graph = get_graph(args.graph)
    enc = encode(graph, cluster, max_ops=graph.num_ops, max_edges=graph.num_edges)
    obs = obs_to_tensors(enc.observation)
    small = get_graph(args.batch_graph)
    enc = encode(small, cluster, max_ops=small.num_ops, max_edges=small.num_edges)
    one = obs_to_tensors(enc.observation)
    same = {k: v.repeat(args.batch, *([1] * (v.dim() - 1))) for k, v in one.items()}
    distinct = {k: v.clone() for k, v in same.items()}
    # feature 'measured' is a 0/1 flag: nudge it per copy
    distinct["op_features"][:, :, -1] += torch.arange(args.batch)[:, None] * 1e-3

    for threads in args.threads:
        torch.set_num_threads(threads)
        torch.manual_seed(0)
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"== {threads} thread(s); load average {load} on {os.cpu_count()} cores")

        # 1. inference on one large graph
        print(f"graph {graph.name}: {graph.num_ops:,} ops, {graph.num_edges:,} edges")
        policy = _policy(graph.num_ops, graph.num_edges, cluster.num_devices).eval()

        def infer(policy: GOPolicy = policy) -> None:
            with torch.inference_mode():
                policy(obs)

        _report("forward (inference, batch 1)", _timed(infer, args.repeats))
        if args.profile:
            _profile(policy, obs)

        # 2. PPO-style evaluate_actions on copies of a small graph: identical (the deduplication
        # embeds them once) and made distinct (every copy embedded)
        policy = _policy(small.num_ops, small.num_edges, cluster.num_devices).train()
        print(f"batch: {args.batch} copies of {small.name} ({small.num_ops:,} ops)")
        for label, batch in (("identical", same), ("distinct", distinct)):
            with torch.no_grad():
                actions, _, _ = policy(batch)

            def evaluate(
                batch: dict[str, torch.Tensor] = batch,
                actions: torch.Tensor = actions,
                policy: GOPolicy = policy,
            ) -> None:
                values, log_prob, entropy = policy.evaluate_actions(batch, actions)
                (values.sum() + log_prob.sum() + entropy.sum()).backward()

            def evaluate_no_grad(
                batch: dict[str, torch.Tensor] = batch,
                actions: torch.Tensor = actions,
                policy: GOPolicy = policy,
            ) -> None:
                with torch.no_grad():
                    policy.evaluate_actions(batch, actions)

            _report(
                f"  {label}: evaluate_actions (no grad)", _timed(evaluate_no_grad, args.repeats)
            )
            _report(f"  {label}: evaluate_actions + backward", _timed(evaluate, args.repeats))


if __name__ == "__main__":
    main()
