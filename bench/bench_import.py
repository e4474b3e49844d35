"""Import speed of the zoo: GPT-2 at 12 and 48 layers (forward and training), and cached loads.

Usage: python bench/bench_import.py [--threads 2] [--specs SPEC,SPEC] [--no-training]

Every figure is taken in a fresh Python process, so it includes what a user pays: importing torch
and transformers and tracing (for an import), or importing graphopt and reading the file (for a
cached load). Each import writes into a temporary cache directory; the cached load then reads it
back. Targets (on 2 cores): 12-layer GPT-2 (sequence 128) under 30 s, 48 layers under 120 s,
cached loads under 1 s. Hugging Face models are skipped, with a message, when transformers is
missing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEFAULT_SPECS = (
    "torch:gpt2?n_layer=12&seq=128",
    "torch:gpt2?n_layer=48&n_embd=1600&n_head=25&seq=128",  # GPT-2 XL
    "torch:resnet?depth=50&batch=32",
)
LIMITS = {"n_layer=12": 30.0, "n_layer=48": 120.0}


def child(spec: str, training: bool, cache_dir: str, threads: int) -> None:
    """Run in the subprocess: time one load_zoo call, print JSON."""
    start = time.perf_counter()
    import torch

    torch.set_num_threads(threads)
    from graphopt.importers.zoo import load_zoo

    ready = time.perf_counter()
    graph = load_zoo(spec, training=training, cache_dir=cache_dir)
    done = time.perf_counter()
    print(
        json.dumps(
            {
                "libs": ready - start,
                "load": done - ready,
                "total": done - start,
                "ops": graph.num_ops,
                "edges": graph.num_edges,
                "gflops": float(graph.flops.sum()) / 1e9,
            }
        )
    )


def cached_child(spec: str, training: bool, cache_dir: str) -> None:
    """Run in the subprocess: a cached load (torch is not imported on this path)."""
    start = time.perf_counter()
    from graphopt.importers.zoo import load_zoo

    graph = load_zoo(spec, training=training, cache_dir=cache_dir)
    done = time.perf_counter()
    print(
        json.dumps({"total": done - start, "ops": graph.num_ops, "torch": "torch" in sys.modules})
    )


def run(args: list[str]) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, cwd=ROOT, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "failed")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--specs", default=",".join(DEFAULT_SPECS))
    parser.add_argument("--no-training", action="store_true", help="forward graphs only")
    parser.add_argument("--child", choices=["import", "cached"], help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    parser.add_argument("--training", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cache-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "import":
        child(args.spec, args.training, args.cache_dir, args.threads)
        return
    if args.child == "cached":
        cached_child(args.spec, args.training, args.cache_dir)
        return

    try:
        import transformers  # noqa: F401

        have_hf = True
    except ImportError:
        have_hf = False
    from graphopt.importers.zoo import INSTALL_HINT, parse_spec

    print(f"threads={args.threads}; every figure from a fresh process")
    columns = ("ops", "GFLOPs", "libs s", "import s", "cached s")
    widths = (6, 9, 7, 8, 8)
    cells = " ".join(f"{c:>{w}s}" for c, w in zip(columns, widths, strict=True))
    print(f"{'spec':58s} {'mode':5s} {cells}  target")
    with tempfile.TemporaryDirectory() as cache_dir:
        for spec in args.specs.split(","):
            entry, _ = parse_spec(spec)
            if entry.needs_transformers and not have_hf:
                print(f"{spec:58s} skipped: transformers is not installed ({INSTALL_HINT})")
                continue
            for training in (False,) if args.no_training else (False, True):
                flag = ["--training"] if training else []
                common = ["--spec", spec, "--cache-dir", cache_dir, *flag]
                fresh = run(["--child", "import", "--threads", str(args.threads), *common])
                cached = run(["--child", "cached", *common])
                limit = next((v for k, v in LIMITS.items() if k in spec), None)
                verdict = ""
                if limit is not None:
                    ok = fresh["total"] < limit and cached["total"] < 1.0
                    verdict = f"{'ok' if ok else 'MISSED'} (<{limit:.0f} s, cached <1 s)"
                print(
                    f"{spec:58s} {'train' if training else 'fwd':5s} {fresh['ops']:6d} "
                    f"{fresh['gflops']:9.1f} {fresh['libs']:7.2f} {fresh['total']:8.2f} "
                    f"{cached['total']:8.3f}  {verdict}"
                )


if __name__ == "__main__":
    main()
