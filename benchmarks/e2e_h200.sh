#!/usr/bin/env bash
# The H200 e2e tables (docs/results.md): for each MODEL[:OVERRIDE[,OVERRIDE...]] given, a suite run of the offline
# model (oneshot, triton, eager baseline) on conf/suite/<model>-e2e.yaml, then `forgebench e2e` on
# that run, then `forgebench leaderboard --e2e`. Logs and each e2e.json (or the model run's partial
# file, if its timeout stopped it) go to $OUT. Needs the wheels of benchmarks/gpu_wheels.sh in .whl/.
#   bash benchmarks/e2e_h200.sh SUITE_TIMEOUT_S E2E_TIMEOUT_S qwen35:capture.workload.layers=8,--no-compile sd35:capture.workload.steps=1
# The suite runs go to $OUT/suites.tgz. A later call that carries that file as .fb/suites.tgz skips
# the suite runs and gives the whole call to `forgebench e2e` (a big model's run takes minutes).
# E2E_TIMEOUT_S 0 makes the suite runs only.
set -u
suite_timeout=$1 e2e_timeout=$2
shift 2
out=${OUT:-/tmp/e2e_out}
mkdir -p "$out"
if [ ! -d /tmp/site ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 MLFLOW_TRACKING_URI=sqlite:////tmp/fb/mlflow.db
mkdir -p /tmp/fb
carried=.fb/suites.tgz
[ -f "$carried" ] && tar xzf "$carried" -C / && echo "== suite runs from $carried" | tee -a "$out/summary.txt"
# A sqlite store keeps its runs' artifacts (a suite run's config.json, which e2e reads) in ./mlruns,
# at the absolute path the experiment was made with: kept under /tmp/fb through a link, so that
# suites.tgz holds them (a cold machine once found the runs but not their config.json).
mkdir -p /tmp/fb/mlruns
[ -e mlruns ] || ln -s /tmp/fb/mlruns mlruns
# A call stopped by the device's limit still brings back what each model run had measured so far.
trap 'for f in /tmp/fb/e2e-*/model_run.partial.json; do [ -f "$f" ] && cp "$f" "$out/$(basename "$(dirname "$f")")_partial.json"; done' EXIT
trap 'exit 124' TERM INT
for item in "$@"; do
    model=${item%%:*}
    overrides=()
    if [ "$item" != "$model" ]; then
        IFS=, read -ra pairs <<< "${item#*:}"
        for pair in "${pairs[@]}"; do  # KEY=VALUE overrides; a flag as it is, + for a comma (--modes=eager+cuda_graph)
            if [[ $pair == --* ]]; then overrides+=("${pair//+/,}"); else overrides+=(--override "$pair"); fi
        done
    fi
    run_dir=$(ls -d /tmp/fb/$model-[0-9]* 2>/dev/null | tail -1)
    if [ -z "$run_dir" ]; then
        run_dir=/tmp/fb/$model-$(date +%s)
        echo "== $model: suite into $run_dir ($(date +%T))" | tee -a "$out/summary.txt"
        timeout "$suite_timeout" python3 -m pytest suite/ -q -p no:cacheprovider --tasks="$model-e2e" --agent=oneshot \
            --platform=triton --override 'platform.baselines=[eager]' --override "run_dir=$run_dir" \
            > "$out/${model}_suite.log" 2>&1
        tail -3 "$out/${model}_suite.log" | tee -a "$out/summary.txt"
        (cd / && tar czf "$out/suites.tgz" tmp/fb/mlflow.db tmp/fb/mlruns tmp/fb/*-[0-9]*)
    fi
    [ "$e2e_timeout" = 0 ] && continue  # suite runs only, for a later call to carry
    echo "== $model: e2e ${overrides[*]} ($(date +%T))" | tee -a "$out/summary.txt"
    python3 -m forgebench.cli e2e --model "$model" --run "$run_dir" --device cuda --budget-ms 300 \
        --timeout-s "$e2e_timeout" --out "/tmp/fb/e2e-$model" "${overrides[@]}" \
        2>&1 | tee "$out/${model}_e2e.log"
    cp /tmp/fb/e2e-$model/e2e.json "$out/${model}_e2e.json" 2>/dev/null \
        || cp /tmp/fb/e2e-$model/model_run.partial.json "$out/${model}_e2e_partial.json" 2>/dev/null
    echo "== done $model ($(date +%T))" | tee -a "$out/summary.txt"
done
python3 -m forgebench.cli leaderboard --e2e 2>&1 | tee -a "$out/summary.txt"
