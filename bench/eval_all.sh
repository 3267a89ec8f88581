#!/usr/bin/env bash
# The paper's experimental section on the shared data, one `tigrag eval` run per dataset:
# all systems (both presets and the ablation of each mechanism of `best` included), the Table-10
# ablations and the th / γ / damping sweeps of the paper preset. Writes
# bench/results/eval/<dataset>/{results.json,report.md,*.png} and bench/results/eval/compare.md.
# Indexes are built once into .cache/bench (the same ones bench/quality.py uses), with the benchmarks'
# reference encoder, all-MiniLM-L6-v2 on torch (bench/common.py bench_index_config).
set -euo pipefail
cd "$(dirname "$0")/.."
DATA="${TIGRAG_DATA:-../shared/data}"
BIN="${BIN:-.venv/bin}"
OUT=bench/results/eval
SWEEPS=(--sweep th=0.1,0.2,0.5,0.8,0.9 --sweep gamma=20,50,100,200,500 --sweep damping=0.3,0.5,0.7,0.85)

index() {  # index NAME CORPUS...
  local dir=".cache/bench/index_$1"; shift
  [ -f "$dir/manifest.json" ] || "$BIN/tigrag" index "$@" -o "$dir" -q \
    --set encoder.model=all-MiniLM-L6-v2 --set encoder.backend=torch
}

index 2wikimultihopqa "$DATA/2wikimultihopqa/2wikimultihopqa_corpus.json"
index musique_train100 "$DATA/musique_train100/musique_train_corpus.json"
index beir_scifact "$DATA/beir_scifact"

"$BIN/tigrag" eval .cache/bench/index_2wikimultihopqa "$DATA/2wikimultihopqa" --systems all "${SWEEPS[@]}" \
  --out "$OUT/2wikimultihopqa" --backend numpy --preset paper -q
"$BIN/tigrag" eval .cache/bench/index_musique_train100 "$DATA/musique_train100" --systems all "${SWEEPS[@]}" \
  --out "$OUT/musique_train100" --backend numpy --preset paper -q
"$BIN/tigrag" eval .cache/bench/index_beir_scifact "$DATA/beir_scifact" --systems all "${SWEEPS[@]}" \
  --out "$OUT/beir_scifact" --backend numpy --preset paper -q
"$BIN/tigrag" report "$OUT/2wikimultihopqa" "$OUT/musique_train100" "$OUT/beir_scifact" --out "$OUT/compare.md"
