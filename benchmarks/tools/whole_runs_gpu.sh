#!/usr/bin/env bash
# Whole `vortexsim run` commands on the device, timed from the shell (what a user meets:
# the interpreter, imports, CUDA context, set-up, steps, rows, snapshots, plot), the
# trees alternated (old, new, old, new, ...) so that a drift of the machine shows in both.
#
#   TREES="old:$PWD/.old new:$PWD" ROUNDS=2 bash benchmarks/tools/whole_runs_gpu.sh OUTDIR RUN...
#
# RUN: tg128 (taylor_green --preset gpu), hit128 (isotropic_turbulence --preset gpu),
#      hit256 (isotropic 256³, nu 0.0028, dt 0.025, t_end 2.2), tg1600 (Taylor–Green
#      Re 1600 256³ to t = 10, dt 0.05), setup256 / setup512 (isotropic 256³ / 512³, two
#      steps: the start-up alone).  Each tree first runs both cases at 32³ (kernels
#      compiled and cached, as on a user's second run).
# `python3 -P`: the tree on PYTHONPATH, not the working directory's (which `-m` would put
# first).  Writes OUTDIR/RUN_LABEL_ROUND.log (the run's log) and OUTDIR/times.txt (wall seconds);
# PROFILE=1 also writes a cProfile (cumulative and own time) of each run's first round.
set -u
OUTDIR="$1"; shift
TREES="${TREES:-new:$PWD}"; ROUNDS="${ROUNDS:-1}"
mkdir -p "$OUTDIR"
source "$(dirname "$0")/wheels.sh"
W=/tmp/whole_runs; rm -rf $W; mkdir -p $W

args() {
    case "$1" in
        tg128) echo "taylor_green --preset gpu" ;;
        hit128) echo "isotropic_turbulence --preset gpu" ;;
        hit256) echo "isotropic_turbulence --preset gpu --set n=256 --set nu=0.0028 --set dt=0.025 --set t_end=2.2" ;;
        tg1600) echo "taylor_green --preset gpu --set n=256 --set nu=0.000625 --set t_end=10 --set dt=0.05" ;;
        setup256) echo "isotropic_turbulence --preset gpu --set n=256 --set nu=0.0028 --set dt=0.025 --steps 2" ;;
        setup512) echo "isotropic_turbulence --preset gpu --set n=512 --set nu=0.0014 --set dt=0.0125 --steps 2" ;;
    esac
}

for pair in $TREES; do
    tree="${pair#*:}"
    for c in "taylor_green" "isotropic_turbulence"; do
        PYTHONPATH="$SITE$tree" python3 -P -m vortexsim run $c --preset gpu --set n=32 --t-end 0.2 \
            --out $W/warm -q --overwrite > /dev/null 2>&1 || echo "warm-up $c failed ($tree)"
    done
done
for run in "$@"; do
    for round in $(seq "$ROUNDS"); do
        for pair in $TREES; do
            label="${pair%%:*}"; tree="${pair#*:}"; out=$W/${run}_$label
            s=$(date +%s.%N)
            PYTHONPATH="$SITE$tree" python3 -P -m vortexsim run $(args $run) --out $out -q \
                --overwrite > $OUTDIR/${run}_${label}_$round.err 2>&1 || echo "   $run $label: exit $?"
            wall=$(awk "BEGIN{print $(date +%s.%N) - $s}")
            echo "$run $label round $round: wall $wall s" | tee -a $OUTDIR/times.txt
            cp $out/run.log $OUTDIR/${run}_${label}_$round.log 2>/dev/null
            grep -h "set-up\|ran \|time: steps\|output thread" $out/run.log | sed 's/^.*INFO //'
            if [ "${PROFILE:-0}" = 1 ] && [ "$round" = 1 ]; then
                PYTHONPATH="$SITE$tree" python3 - $W/p.prof run $(args $run) --out $out -q \
                    --overwrite <<'PY' > /dev/null 2>&1
import cProfile, sys
from vortexsim.cli.command import run_command
cProfile.run(f"run_command({sys.argv[2:]!r})", sys.argv[1])
PY
                PYTHONPATH="$SITE$tree" python3 - $W/p.prof <<'PY' > $OUTDIR/${run}_${label}_profile.txt
import pstats, sys
s = pstats.Stats(sys.argv[1]); s.sort_stats("cumulative").print_stats(80)
s.sort_stats("tottime").print_stats(40)
PY
            fi
            rm -rf $out
        done
    done
done
PYTHONPATH="$SITE$PWD" python3 -X importtime -c "import vortexsim.cli.command, cupy" 2> $W/imp.txt
sort -t'|' -k2 -n -r $W/imp.txt | head -25 > $OUTDIR/importtime.txt
s=$(date +%s.%N); PYTHONPATH="$SITE$PWD" python3 -c "import cupy; cupy.zeros(1).sum().get()"
echo "python + cupy + CUDA context: $(awk "BEGIN{print $(date +%s.%N) - $s}") s" | tee -a $OUTDIR/times.txt
s=$(date +%s.%N); PYTHONPATH="$SITE$PWD" python3 -c "import vortexsim.cli.command"
echo "python + vortexsim.cli.command: $(awk "BEGIN{print $(date +%s.%N) - $s}") s" | tee -a $OUTDIR/times.txt
