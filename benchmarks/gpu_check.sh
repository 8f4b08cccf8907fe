#!/usr/bin/env bash
# One device call a developer runs to check a change on the GPU: tests/gpu, then a short GPU suite run
# of the offline model (triton, gpu-smoke tasks) and its leaderboard, with a one-screen summary.
# Needs the wheels of benchmarks/gpu_wheels.sh in .whl/ (carried: run(carry=[".whl"])). Logs go to
# $OUT (tar them: the device brings back at most 8 files).
#   bash benchmarks/gpu_check.sh [TESTS_TIMEOUT_S=450] [SUITE_TIMEOUT_S=110]
# Each limit is the whole pytest process: its start (torch and CUDA, ~8 s on the H200's host) and its
# exit are outside the seconds its summary line reports.
set -u
tests_timeout=${1:-450} suite_timeout=${2:-110}
out=${OUT:-/tmp/gpu_check}
mkdir -p "$out"
started=$(date +%s)
if [ ! -d /tmp/site ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 MLFLOW_TRACKING_URI=sqlite:////tmp/gpu_check.db
# One worker: with three (-n 3) the processes time-shared the GPU, and the all-streams busy-time check
# rejected six honest kernels (busy 0.37 ms against 0.13 ms on their own stream); serially all pass.
timeout "$tests_timeout" python3 -m pytest tests/gpu -q -p no:cacheprovider --durations=10 \
    > "$out/tests_gpu.log" 2>&1
tests_rc=$?
# The suite's baselines without torch.compile's max-autotune and FlashInfer's JIT build (tests/gpu times
# both; here they cost a minute of a check that should fit 8 minutes).
timeout "$suite_timeout" python3 -m pytest suite/ -q -p no:cacheprovider --agent=oneshot --platform=triton \
    --tasks=gpu-smoke --override 'platform.baselines=[eager,compile,liger]' > "$out/suite.log" 2>&1
suite_rc=$?
python3 -m forgebench.cli leaderboard > "$out/leaderboard.md" 2>&1
board_rc=$?
{
    echo "== $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)," \
        "$(python3 -c 'import torch, triton; print(f"torch {torch.__version__}, triton {triton.__version__}")')"
    echo "== tests/gpu (exit $tests_rc$([ $tests_rc = 124 ] && echo ', stopped at its time limit')):"
    grep -E "^(FAILED|ERROR)|passed|failed" "$out/tests_gpu.log" | tail -8
    echo "== suite run, gpu-smoke, oneshot, triton (exit $suite_rc):"
    grep -E "passed|failed|error" "$out/suite.log" | tail -3
    echo "== leaderboard (exit $board_rc):"
    head -12 "$out/leaderboard.md"
    echo "== $(($(date +%s) - started)) s in all"
} | tee "$out/summary.txt"
[ $tests_rc = 0 ] && [ $suite_rc = 0 ] && [ $board_rc = 0 ]
