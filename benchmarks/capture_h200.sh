#!/usr/bin/env bash
# Capture the four built-in models on the GPU twice: the first capture replaces tasks/<model>/,
# the second goes to $2 and is compared with the first (benchmarks/capture_stability.py).
#   bash benchmarks/capture_h200.sh <log folder> <second capture folder> [models...]
set -u
log=${1:?log folder}; second=${2:?second capture folder}; shift 2
models=${*:-resnet50 sd35 qwen35 gemma4}
budget=${BUDGET_MS:-30}
processes=${PROCESSES:-3}  # each group's time is the fastest of this many processes
gap=${CUT_GAP:+--cut-gap $CUT_GAP}  # default 0.15 (near-equal groups at the coverage cut go together); CUT_GAP=0: off
for model in $models; do
  for pass in 1 2; do
    out=tasks; [ "$pass" = 2 ] && out=$second
    start=$(date +%s)
    python3 -m forgebench.cli capture --model "$model" --device cuda --out "$out" --budget-ms "$budget" \
      --timing-processes "$processes" $gap \
      > "$log/capture-$model-$pass.log" 2>&1
    echo "$model pass $pass: rc=$? $(( $(date +%s) - start )) s" >> "$log/capture.txt"
    tail -1 "$log/capture-$model-$pass.log" >> "$log/capture.txt"
  done
  python3 benchmarks/capture_stability.py "tasks/$model/manifest.yaml" "$second/$model/manifest.yaml" \
    > "$log/stability-$model.json" 2>&1
  cp "$second/$model/manifest.yaml" "$log/manifest-$model-2.yaml"  # per-group times of the second pass
  tar czf "$log/tasks-$model.tgz" "tasks/$model"
done
