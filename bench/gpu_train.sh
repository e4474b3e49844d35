#!/usr/bin/env bash
# Training throughput on one CUDA GPU, in one run of under 9 minutes (issue #37's GPU bench):
#   1. bench/bench_train_throughput.py --device cuda: the step-wise policy (GO and MLP encoders)
#      on 8 graphs of 1,000 ops, and the one-shot GO policy (SB3 PPO), torch on the GPU;
#   2. the same step-wise bench with torch on this machine's CPU (2 threads), for the ratio;
#   3. both again on 8 graphs of 4,000 ops (where the encoder's share of the work is larger);
#   4. the CUDA test of the step-wise trainer (tests/graphopt/train/test_stepwise_training.py).
#
# Run from anywhere on a machine with a GPU, with python3 holding torch, numba and PyG (PY
# overrides it). Packages the machine lacks (gymnasium, stable-baselines3, pymetis, lightgbm) come
# from wheels in .whl/ (see /work/.library/device/README.md), installed into /tmp/site. Logs go to
# $OUT (default /tmp/gpu-train). BUDGET: seconds the whole run may take (default 500).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
OUT=${OUT:-/tmp/gpu-train}
BUDGET=${BUDGET:-500}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1

if compgen -G ".whl/*.whl" >/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
START=$SECONDS
# left CAP: the seconds a step may take, CAP at most, keeping 10 s for the last step.
left() { local rest=$((BUDGET - 10 - (SECONDS - START))); ((rest < $1)) && echo $((rest > 5 ? rest : 5)) || echo "$1"; }

"$PY" - <<'EOF' 2>&1 | tee "$OUT/preflight.log" || exit 1
import importlib.util
import os
import sys

import numba
import torch

missing = [m for m in ("gymnasium", "stable_baselines3", "pymetis", "lightgbm", "torch_geometric",
                       "yaml", "networkx", "scipy", "rich") if importlib.util.find_spec(m) is None]
if missing:
    sys.exit(f"gpu_train: missing Python packages: {', '.join(missing)} (carry them as wheels in .whl/)")
if not torch.cuda.is_available():
    sys.exit("gpu_train: no CUDA device (torch.cuda.is_available() is False)")
print(f"torch {torch.__version__}, numba {numba.__version__}, {torch.cuda.get_device_name(0)}, "
      f"{os.cpu_count()} CPUs")
EOF

BENCH="$PY bench/bench_train_throughput.py --skip-startup --threads 2"
timeout "$(left 260)" $BENCH --device cuda --updates 10 2>&1 | tee "$OUT/cuda-1000.log"
echo "step 1: $((SECONDS - START)) s"
timeout "$(left 70)" $BENCH --device cpu --updates 10 --skip-one-shot 2>&1 | tee "$OUT/cpu-1000.log"
echo "step 2: $((SECONDS - START)) s"
timeout "$(left 80)" $BENCH --device cuda --ops 4000 --updates 4 --skip-one-shot 2>&1 | tee "$OUT/cuda-4000.log"
timeout "$(left 60)" $BENCH --device cpu --ops 4000 --updates 4 --skip-one-shot 2>&1 | tee "$OUT/cpu-4000.log"
echo "step 3: $((SECONDS - START)) s"
timeout "$(left 60)" "$PY" -m pytest -p no:cacheprovider -p no:xdist -q -k cuda \
  tests/graphopt/train/test_stepwise_training.py 2>&1 | tee "$OUT/test-cuda.log"
echo "done in $((SECONDS - START)) s; logs in $OUT"
