#!/usr/bin/env bash
# The whole GPU check after a change (docs/gpu.md): `pytest -m gpu -q`, then the
# benchmarks (bench_direct for the Gaussian and algebraic kernels at sigma = 0.1,
# bench_fmm --suite standard, bench_step), each writing its JSON and log to one output
# folder; the last thing printed is one short table of every result.
#
#   bash benchmarks/tools/gpu_check.sh [OUTDIR]
#
# Run it from the repository root.  OUTDIR defaults to $OUT/gpu_check when $OUT is set
# (the device machine's folder that comes back), else benchmarks/results/gpu_check_DATE.
# Environment:
#   STEPS="tests direct fmm step"   the parts to run, in this order (default: these four;
#                                   the tests take ~7.5 minutes, the benchmarks ~3);
#                                   also "diagnostics" (bench_diagnostics, ~1 min) and
#                                   "run" (bench_run: a whole leapfrog GPU run against
#                                   the same run with minimal output, ~1.5 min)
#   LABEL=text                      passed to every benchmark's --label
#   PYTHONPATH                      kept: the vortexsim tree to check (default: this one)
# Wheels in .whl/ (carried to the device machine) are installed into /tmp/site first.
set -u
STEPS="${STEPS:-tests direct fmm step}"
LABEL="${LABEL:-}"
if [ -n "${1:-}" ]; then
    OUTDIR="$1"
elif [ -n "${OUT:-}" ]; then
    OUTDIR="$OUT/gpu_check"
else
    OUTDIR="benchmarks/results/gpu_check_$(date +%F_%H%M%S)"
fi
mkdir -p "$OUTDIR"
export PYTHONUNBUFFERED=1
source "$(dirname "$0")/wheels.sh"
export PYTHONPATH="$SITE${PYTHONPATH:-$PWD}"
python3 -c "import vortexsim, sys; print('vortexsim from', vortexsim.__file__)" | tee "$OUTDIR/env.log"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | tee -a "$OUTDIR/env.log"

run() {   # run NAME TIMEOUT COMMAND...: log to OUTDIR/NAME.log, print its last lines
    local name="$1" limit="$2"
    shift 2
    echo "== $name: $*"
    timeout "$limit" "$@" > "$OUTDIR/$name.log" 2>&1
    local rc=$?
    [ "$rc" -ne 0 ] && echo "   exit status $rc (log: $OUTDIR/$name.log)"
    return 0
}

for step in $STEPS; do
    case "$step" in
        tests)
            run pytest_gpu 580 python3 -m pytest -m gpu -q --durations=25
            grep -E "^FAILED|^ERROR|passed|failed|^[0-9.]+s (call|setup)" "$OUTDIR/pytest_gpu.log" | tail -40 ;;
        direct)
            run bench_direct 300 python3 benchmarks/performance/bench_direct.py --kernels gaussian algebraic \
                --sigmas 0.1 --out "$OUTDIR/bench_direct.json" --label "$LABEL" ;;
        fmm)
            run bench_fmm 300 python3 benchmarks/performance/bench_fmm.py --suite standard \
                --out "$OUTDIR/bench_fmm.json" --label "$LABEL" ;;
        step)
            run bench_step 240 python3 benchmarks/performance/bench_step.py \
                --out "$OUTDIR/bench_step.json" --label "$LABEL" ;;
        diagnostics)
            run bench_diagnostics 240 python3 benchmarks/performance/bench_diagnostics.py \
                --out "$OUTDIR/bench_diagnostics.json" --label "$LABEL" ;;
        run)
            run bench_run 560 python3 benchmarks/performance/bench_run.py \
                --out "$OUTDIR/bench_run.json" --label "$LABEL" ;;
        *)
            echo "unknown step $step (tests, direct, fmm, step, diagnostics, run)" ;;
    esac
done

echo
echo "== results ($OUTDIR)"
if compgen -G "$OUTDIR/*.json" > /dev/null; then
    python3 benchmarks/performance/timing.py "$OUTDIR"
fi
