"""Graph Segment Training fits where whole-graph training does not: one memory limit, two runs.

Usage: python bench/bench_gst.py [--nodes N] [--configs K] [--batch B] [--hidden H]
                                 [--segment-size S] [--extra-gib X] [--epochs E]

Every measurement runs in a fresh child interpreter (this script with a hidden ``--child``):

1. *generate*: samples ``K`` placements of the random layered DAG ``random-layered-<N>-s0`` and
   measures them with the simulator (out-of-memory placements kept: their step times are real);
2. *idle*: imports torch and graphopt and reports its virtual size, the baseline;
3. *whole graph*: under ``RLIMIT_AS = baseline + X GiB``, one training step of
   :class:`graphopt.costmodel.model.CostNet` on ``B`` configurations of the whole graph (forward,
   ListMLE, backward, Adam), as :func:`graphopt.costmodel.fit.fit` takes it;
4. *GST*: under the same limit, :func:`graphopt.costmodel.gst.fit_gst` for ``E`` epochs of
   ``K / B`` steps (segments of ``S`` nodes, one with gradient per step), then the head
   fine-tuned on fresh embeddings (:func:`graphopt.costmodel.gst.finetune_head`, ``E`` epochs,
   the GNN frozen), with the ListMLE loss of all ``K`` configurations (scored segmented) before,
   after GST and after the fine-tuning.

Each child reports its outcome (ok, or the allocation error it hit) and its peak resident set
``ru_maxrss`` (from ``os.wait4``, so a child killed outright is measured too). The address-space
limit makes a too-large allocation fail inside the child instead of driving the machine into the
OOM killer. The parent imports neither torch nor the data: on Linux a spawned child's
``ru_maxrss`` starts from its parent's peak, so a lean parent keeps the figures the children's
own. Defaults (200,000 ops, 16 configurations, batches of 8, H = 64, segments of 10,000 nodes,
X = 3 GiB) take about two minutes on one CPU thread.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

GIB = 1 << 30


def proc_status(key: str) -> int:
    """A size of this process in bytes from ``/proc/self/status`` (``VmSize``, ``VmPeak``...)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {key} in /proc/self/status (Linux only)")


# ---------------------------------------------------------------------------- children
def _generate(args: argparse.Namespace) -> dict[str, Any]:
    from graphopt.costmodel import data
    from graphopt.costmodel.gst import Segments
    from graphopt.hardware import get_cluster
    from graphopt.workloads.registry import get_graph

    graph = get_graph(f"random-layered-{args.nodes}-s0")
    cluster = get_cluster("v100-nvlink-4")
    data.generate([graph], cluster, args.data, samples=args.configs, seed=0, progress=False)
    (s,) = data.load_dataset(args.data, include_oom=True)
    segs = Segments.of(s, args.segment_size)
    return {
        "graph": graph.name,
        "nodes": s.num_nodes,
        "edges": int(s.edges.shape[1]),
        "configs": s.num_configs,
        "segments": segs.count,
        "cut_edges": segs.cut_edges,
    }


def _net(s: Any, hidden: int) -> Any:
    import torch

    from graphopt.costmodel.model import CostNet, NetLayout

    torch.manual_seed(0)
    layout = NetLayout(
        node_features=s.node_feat.shape[1],
        config_features=s.configs.num_features,
        summary_features=s.configs.num_summary,
        hidden=hidden,
    )
    return CostNet(layout)


def _whole_graph_step(s: Any, args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np
    import torch

    from graphopt.costmodel.fit import GraphTensors
    from graphopt.costmodel.losses import listmle_loss

    net = _net(s, args.hidden)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    t = GraphTensors.of(s)
    idx = np.arange(args.batch)
    feat = torch.as_tensor(s.configs.features(idx))
    summary = torch.as_tensor(s.configs.summary(idx))
    start = time.perf_counter()
    _STAGE[0] = "forward"
    pred = net(t.node_feat, t.opcode, t.edges, t.config_node_ids, feat, summary)
    loss = listmle_loss(pred, torch.as_tensor(s.runtime[idx], dtype=torch.float32))
    _STAGE[0] = "backward"
    opt.zero_grad()
    loss.backward()
    opt.step()
    return {"loss": float(loss), "seconds_per_step": time.perf_counter() - start}


def _gst(s: Any, args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from graphopt.costmodel.gst import finetune_head, fit_gst, predict_segmented
    from graphopt.costmodel.losses import listmle_loss

    net = _net(s, args.hidden)
    runtime = torch.as_tensor(s.runtime, dtype=torch.float32)

    def loss() -> float:
        pred = predict_segmented(net, s, args.segment_size, args.batch)
        return float(listmle_loss(torch.as_tensor(pred), runtime))

    before = loss()
    _STAGE[0] = "training"
    history = fit_gst(
        net,
        [s],
        segment_size=args.segment_size,
        epochs=args.epochs,
        batch_size=args.batch,
        lr=3e-3,
        seed=0,
    )
    steps = s.num_configs // args.batch
    later = (history[-1]["time"] - history[0]["time"]) / max((len(history) - 1) * steps, 1)
    after = loss()
    _STAGE[0] = "fine-tuning the head"
    start = time.perf_counter()
    finetune_head(
        net,
        [s],
        segment_size=args.segment_size,
        epochs=args.epochs,
        batch_size=args.batch,
        lr=1e-3,
        seed=0,
    )
    return {
        "loss_before": before,
        "loss_after": after,
        "first_epoch_s": history[0]["time"],
        "seconds_per_step": later,
        "steps": len(history) * steps,
        "loss_finetuned": loss(),
        "finetune_s": time.perf_counter() - start,
    }


_STAGE = ["loading the data"]
"""What the child is doing, for the failure message."""


def child(args: argparse.Namespace) -> None:
    """Run one measurement in this process and print its result as one JSON line."""
    import torch

    from graphopt.costmodel import data, gst, train  # noqa: F401 - the imports of every child

    torch.set_num_threads(1)
    out: dict[str, Any] = {"vm_start": proc_status("VmSize")}
    if args.limit:
        resource.setrlimit(resource.RLIMIT_AS, (args.limit, args.limit))
    try:
        if args.child == "generate":
            out.update(_generate(args))
        elif args.child in ("whole", "gst"):
            (s,) = data.load_dataset(args.data, include_oom=True)
            out.update((_whole_graph_step if args.child == "whole" else _gst)(s, args))
        out["outcome"] = "ok"
    except MemoryError:
        out["outcome"] = f"MemoryError in {_STAGE[0]}"
    except RuntimeError as e:  # torch's allocator: "DefaultCPUAllocator: can't allocate memory"
        found = re.search(r"can't allocate memory: you tried to allocate (\d+) bytes", str(e))
        if found is None:
            raise
        size = int(found.group(1)) / GIB
        out["outcome"] = f"out of memory in {_STAGE[0]} (torch could not allocate {size:.2f} GiB)"
    out["vm_peak"] = proc_status("VmPeak")
    print(json.dumps(out), flush=True)


# ---------------------------------------------------------------------------- parent
_SHARED = ("nodes", "configs", "batch", "hidden", "segment_size", "epochs")


def spawn(mode: str, args: argparse.Namespace, data_dir: str, limit: int = 0) -> dict[str, Any]:
    """Run this script as a ``--child mode`` process; its JSON line plus its peak RSS."""
    cmd = [sys.executable, __file__, "--child", mode, "--data", data_dir, "--limit", str(limit)]
    cmd += [f"--{k.replace('_', '-')}={getattr(args, k)}" for k in _SHARED]
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
        assert proc.stdout is not None
        stdout = proc.stdout.read()
        proc.stdout.close()
        # wait4, not Popen.wait: it also returns the child's own resource usage (peak RSS).
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read()
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    result: dict[str, Any] = json.loads(lines[-1]) if lines else {}
    if not lines:
        tail = stderr.strip().splitlines()[-1:] or [""]
        result["outcome"] = f"killed (exit {proc.returncode}) {tail[0][:80]}"
    result["peak_rss"] = usage.ru_maxrss * 1024
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=200_000, help="ops of the random DAG")
    parser.add_argument("--configs", type=int, default=16, help="placements sampled (K)")
    parser.add_argument("--batch", type=int, default=8, help="configurations per step (B)")
    parser.add_argument("--hidden", type=int, default=64, help="embedding width (H)")
    parser.add_argument("--segment-size", type=int, default=10_000, help="GST segment size")
    parser.add_argument("--epochs", type=int, default=3, help="GST epochs")
    parser.add_argument("--extra-gib", type=float, default=3.0, help="limit above the baseline")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--limit", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return

    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-gst-") as tmp:
        g = spawn("generate", args, tmp)
        if g["outcome"] != "ok":
            raise SystemExit(f"generating the dataset failed: {g['outcome']}")
        print(
            f"graph {g['graph']}: {g['nodes']:,} ops, {g['edges']:,} edges; {g['configs']} "
            f"configurations, {args.batch} per batch; hidden {args.hidden}, 3 layers"
        )
        print(
            f"GST: {g['segments']} segments of <= {args.segment_size:,} nodes, 1 with gradient "
            f"per step; {g['cut_edges']:,} edges ({g['cut_edges'] / g['edges']:.1%}) between "
            f"segments; data ready in {time.perf_counter() - start:.0f} s"
        )
        idle = spawn("idle", args, tmp)
        base = idle["vm_start"]
        limit = base + int(args.extra_gib * GIB)
        print(
            f"idle process after imports: virtual {base / GIB:.2f} GiB, "
            f"peak RSS {idle['peak_rss'] / GIB:.2f} GiB"
        )
        print(f"RLIMIT_AS = baseline + {args.extra_gib:g} GiB = {limit / GIB:.2f} GiB\n")
        for mode, label in (("whole", "whole-graph step"), ("gst", "GST fit_gst")):
            t0 = time.perf_counter()
            r = spawn(mode, args, tmp, limit)
            line = (
                f"{label:16s} {r['outcome']}; peak RSS {r['peak_rss'] / GIB:.2f} GiB, "
                f"peak virtual {r.get('vm_peak', 0) / GIB:.2f} GiB"
            )
            if r["outcome"] == "ok" and mode == "whole":
                line += f"; {r['seconds_per_step']:.1f} s/step"
            if r["outcome"] == "ok" and mode == "gst":
                line += (
                    f"\n{'':16s} loss {r['loss_before']:.4f} -> {r['loss_after']:.4f} over "
                    f"{r['steps']} steps; first epoch (fills the table) {r['first_epoch_s']:.1f} "
                    f"s, then {r['seconds_per_step']:.2f} s/step"
                    f"\n{'':16s} head fine-tuned on fresh embeddings: loss "
                    f"{r['loss_finetuned']:.4f} ({r['finetune_s']:.1f} s)"
                )
            print(f"{line} [{time.perf_counter() - t0:.0f} s]", flush=True)
    print(f"\ntotal {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
