#!/usr/bin/env bash
# The simulator against one CUDA GPU, in one run of under 8 minutes:
#   1. profile the zoo on the GPU (CUDA events), probe the GPU (peak FLOP/s, bandwidth, launch),
#      calibrate its roofline and train the per-op model leaving one family out, and print the
#      predicted-vs-measured table (bench/bench_profile.py --device cuda);
#   2. train one op model on every graph (graphopt costmodel ops train) and score it;
#   3. torch.compile's (Triton) measured speed-up against the simulator's inductor fuser, forward
#      graphs of four models (bench/bench_compile.py --device cuda);
#   4. the probed figures beside the datasheet's (the simulator's GPU presets assume them).
#
# Run from anywhere on a machine with a GPU, with python3 holding torch (PY overrides it). A
# machine without lightgbm or the package's other needs gets them from wheels in .whl/ (see
# /work/.library/device/README.md for fetching them), installed into /tmp/site. Logs and a tarball
# of the measured data go to $OUT (default /tmp/gpu-check); the data stay in
# bench/data/profile-cuda-<GPU>/ too.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
OUT=${OUT:-/tmp/gpu-check}
# DEVICE=cpu runs every step on this CPU instead (a dry run of the script itself); MODELS names a
# subset of bench_profile.MODELS, SIZE_MODELS of bench_profile.SIZES, COMPILE_MODELS the models
# compiled; ITERATIONS the timed runs per measurement; DATA the measurement directory (default
# bench/data/profile-<kind>).
DEVICE=${DEVICE:-cuda}
MODELS=${MODELS:-resnet,inception,wavenet,lstm,transformer,gpt2,bert,t5}
ITERATIONS=${ITERATIONS:-10}
# BUDGET: seconds the whole check may take; a later step gets what the earlier ones left.
BUDGET=${BUDGET:-470}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1

if compgen -G ".whl/*.whl" >/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl \
    || { echo "gpu_check: the wheels in .whl/ do not install here (see pip's message above)" >&2; exit 1; }
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}

# Preflight: fail in seconds, not minutes, when something is missing.
DEVICE=$DEVICE "$PY" - <<'EOF'
import importlib
import os
import sys

import torch

missing = [m for m in ("lightgbm", "numba", "yaml", "networkx", "scipy", *os.environ.get("NEED", "transformers").split())
           if importlib.util.find_spec(m) is None]
if missing:
    sys.exit(f"gpu_check: missing Python packages: {', '.join(missing)} (carry them as wheels in .whl/)")
if os.environ["DEVICE"].startswith("cuda") and not torch.cuda.is_available():
    sys.exit("gpu_check: no CUDA device (torch.cuda.is_available() is False)")
where = torch.cuda.get_device_name(0) if os.environ["DEVICE"].startswith("cuda") else "the CPU"
print(f"torch {torch.__version__}, {where}")
EOF

case $DEVICE in
  cuda*) KIND=$("$PY" -c 'from graphopt.measure.machine import cuda_kind; print(cuda_kind())') ;;
  *) KIND=$("$PY" -c 'from graphopt.measure.machine import cpu_kind; print(cpu_kind(1))')-dry ;;
esac
DATA=${DATA:-bench/data/profile-$KIND}
mkdir -p "$DATA"
START=$SECONDS
# Whatever was measured comes back, also when a step fails or times out.
trap 'tar czf "$OUT/$(basename "$DATA").tgz" "$DATA" $(compgen -G "$DATA-sizes" || true)' EXIT
# left CAP: the seconds a step may take, CAP at most, keeping 15 s for the last step.
left() { local rest=$((BUDGET - 15 - (SECONDS - START))); ((rest < $1)) && echo $((rest > 5 ? rest : 5)) || echo "$1"; }

# 1. Profile, probe, calibrate, leave-one-family-out table (the GPU is busy for ~2-3 minutes).
timeout "$(left 200)" "$PY" bench/bench_profile.py --device "$DEVICE" --timer clock --iterations "$ITERATIONS" \
  --warmup 3 --models "$MODELS" --data "$DATA" 2>&1 | tee "$OUT/profile.log"
echo "step 1: $((SECONDS - START)) s"

# 1b. The sizes (bench_profile.SIZES) as more training data, and the table again with them; a
# timeout keeps the graphs measured so far.
timeout "$(left 110)" "$PY" bench/bench_profile.py --device "$DEVICE" --timer clock --iterations "$ITERATIONS" \
  --warmup 3 --sizes ${SIZE_MODELS:+--models "$SIZE_MODELS"} --data "$DATA-sizes" 2>&1 | tee "$OUT/sizes.log" || \
  echo "sizes stopped (status $?): the graphs above are the ones measured"
if compgen -G "$DATA-sizes/*.json.gz" >/dev/null; then
  timeout "$(left 60)" "$PY" bench/bench_profile.py --reuse --models "$MODELS" --data "$DATA" \
    --extra "$DATA-sizes" 2>&1 | tee -a "$OUT/sizes.log" || echo "table with sizes stopped ($?)"
fi
echo "step 1b: $((SECONDS - START)) s"

# 2. One op model on every graph, scored on them (in-sample: the held-out figures are in step 1).
timeout "$(left 60)" "$PY" -m graphopt costmodel ops train "$DATA"/*-forward.json.gz "$DATA"/*-train.json.gz \
  --cluster "$DATA/cluster.yaml" -o "$DATA/op-model.json" 2>&1 | tee "$OUT/op-model.log" || \
  echo "op model training stopped (status $?)"
timeout "$(left 40)" "$PY" -m graphopt costmodel ops eval "$DATA"/*-forward.json.gz "$DATA"/*-train.json.gz \
  --cluster "$DATA/cluster.yaml" --model "$DATA/op-model.json" 2>&1 | tee -a "$OUT/op-model.log" || \
  echo "op model scoring stopped (status $?)"
echo "step 2: $((SECONDS - START)) s"

# 3. torch.compile (Triton) against the simulator's inductor fuser: two compilations per model.
timeout "$(left 200)" "$PY" bench/bench_compile.py --device "$DEVICE" --models "${COMPILE_MODELS:-resnet,inception,wavenet,bert}" \
  --modes forward --iterations "$ITERATIONS" --warmup 2 --data "$DATA" 2>&1 | tee "$OUT/compile.log" || \
  echo "bench_compile stopped (status $?): the rows above are the ones measured"
echo "step 3: $((SECONDS - START)) s"

# 4. The probed GPU against its datasheet (FP32 without tensor cores, memory bandwidth).
"$PY" - "$DATA/cluster.yaml" <<'EOF' 2>&1 | tee "$OUT/roofline.log" || echo "roofline check failed"
import sys

from graphopt.hardware import DEVICE_SPECS, Cluster

device = Cluster.load(sys.argv[1]).devices[0]
print(f"probed {device.kind}: {device.peak_flops / 1e12:.1f} TFLOP/s float32 matmul, "
      f"{device.mem_bandwidth / 1e12:.2f} TB/s copy, {device.launch_overhead * 1e6:.1f} us per op")
# Datasheets: NVIDIA H100 SXM5 67 TFLOP/s FP32, 3.35 TB/s HBM3; H200 SXM 67 TFLOP/s, 4.8 TB/s.
sheets = {"h100": (67e12, 3.35e12), "h200": (67e12, 4.8e12)}
sheets.update({k.lower(): (v["peak_flops"], v["mem_bandwidth"]) for k, v in DEVICE_SPECS.items()})
for key, (flops, bandwidth) in sheets.items():
    if key.split("-")[0] in device.kind:
        print(f"datasheet {key}: {flops / 1e12:.1f} TFLOP/s, {bandwidth / 1e12:.2f} TB/s; probed / "
              f"datasheet: {device.peak_flops / flops:.2f} compute, "
              f"{device.mem_bandwidth / bandwidth:.2f} bandwidth")
EOF

echo "done in $((SECONDS - START)) s; data in $DATA, logs and $(basename "$DATA").tgz in $OUT"
