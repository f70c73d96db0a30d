#!/usr/bin/env bash
# One device call that checks GPU code after a change (run from the repository root on
# the device machine, with .whl/ carried): the GPU test suite N times (default 2, ~3.5 min each; a
# race shows up as a run that fails), then the issue-4 leapfrog step time in three
# separate processes (its spread between processes is part of the result), then the
# bench_fmm cases named in BENCH (default none; JSON to $OUT when set).
#
#   [BENCH="uniform-gauss-1e-6 rings-gauss-1e-6"] bash benchmarks/gpu_check.sh [N]
set -u
N="${1:-2}"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
for i in $(seq "$N"); do
    echo "== pytest -m gpu, run $i of $N"
    timeout 400 python3 -m pytest -m gpu -q 2>&1 | grep -E "^E  |^FAILED|passed|failed" | head -12
done
echo "== leapfrog RK4 step (median and minimum of 5 steps, ms), three processes"
for i in 1 2 3; do
    timeout 120 python3 benchmarks/validate_rings.py perf --device gpu --method fmm \
        --n-phi 129 --layers 7 --layer-spacing 0.5 --sigma 0.05 --tracers 1048576 2>&1 \
        | tail -1 | grep -o '"step_ms_median": [0-9.]*, "step_ms_min": [0-9.]*'
done
if [ -n "${BENCH:-}" ]; then
    echo "== bench_fmm $BENCH"
    # shellcheck disable=SC2086
    timeout 300 python3 benchmarks/bench_fmm.py --cases $BENCH --direct-max-pairs 1e10 --out "${OUT:-/tmp}/bench_fmm.json" 2>&1 | tail -30
fi
