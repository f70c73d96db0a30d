#!/usr/bin/env bash
# A/B of two vortexsim trees on one GPU, the runs alternated (old, new, old, new, ...), so
# that a drift of the machine shows in both: each benchmark with each tree's own copy of
# the script (a tree of the older layout keeps them flat in benchmarks/).
#
#   bash benchmarks/tools/ab_gpu.sh OLD_TREE NEW_TREE OUTDIR [PARTS]
#
# The old tree beside the checkout, carried to the device machine (an ignored folder):
#   mkdir -p .old && git archive REV vortexsim postprocess cases benchmarks | tar -x -C .old
#   echo /.old/ >> .git/info/exclude      # then run with carry [".old", ".whl"]:
#   bash benchmarks/tools/ab_gpu.sh $PWD/.old $PWD $OUT/ab
#
# PARTS (default "step fmm tg run"), in this order, ROUNDS (default 2) rounds a tree each
# (fmm: one):
#   step  bench_step.py (leapfrog GPU step, 32 766 elements, 2^20 tracers)
#   fmm   bench_fmm.py --suite standard
#   tg    profile_taylor_green.py --n 128 --device gpu (the Taylor–Green 128³ step)
#   run   bench_run.py --step --rounds 1 (a whole leapfrog GPU run, bare and full)
# Each run writes OUTDIR/<part>_<old|new>_<round>.{json,log}; the last lines printed are
# each log's summary.  Wheels in .whl/ are installed into /tmp/site first (docs/gpu.md).
set -u
OLD="$1"; NEW="$2"; OUTDIR="$3"; PARTS="${4:-step fmm tg run}"; ROUNDS="${ROUNDS:-2}"
mkdir -p "$OUTDIR"
export PYTHONUNBUFFERED=1
source "$(dirname "$0")/wheels.sh"

script() {   # script TREE KIND NAME: the path of a benchmark script in TREE
    if [ -f "$1/benchmarks/$2/$3" ]; then echo "$1/benchmarks/$2/$3"; else echo "$1/benchmarks/$3"; fi
}

one() {      # one PART LABEL ROUND TREE LIMIT KIND SCRIPT ARGS...
    local part="$1" label="$2" round="$3" tree="$4" limit="$5" kind="$6" name="$7"
    shift 7
    local base="$OUTDIR/${part}_${label}_${round}"
    echo "== $part $label $round ($tree)"
    PYTHONPATH="$SITE$tree" timeout "$limit" python3 "$(script "$tree" "$kind" "$name")" "$@" \
        > "$base.log" 2>&1 || echo "   exit status $? ($base.log)"
    tail -n 4 "$base.log"
}

for part in $PARTS; do
    case "$part" in
        step)
            for round in $(seq "$ROUNDS"); do
                for pair in "old:$OLD" "new:$NEW"; do
                    one step "${pair%%:*}" $round "${pair#*:}" 200 performance bench_step.py \
                        --out "$OUTDIR/step_${pair%%:*}_$round.json"
                done
            done ;;
        fmm)
            for pair in "old:$OLD" "new:$NEW"; do
                one fmm "${pair%%:*}" 1 "${pair#*:}" 280 performance bench_fmm.py \
                    --suite standard --out "$OUTDIR/fmm_${pair%%:*}_1.json"
            done ;;
        tg)
            for round in $(seq "$ROUNDS"); do
                for pair in "old:$OLD" "new:$NEW"; do
                    one tg "${pair%%:*}" $round "${pair#*:}" 200 tools profile_taylor_green.py \
                        --n 128 --device gpu --out "$OUTDIR/tg_${pair%%:*}_$round.json"
                done
            done ;;
        run)
            for round in $(seq "$ROUNDS"); do
                for pair in "old:$OLD" "new:$NEW"; do
                    (cd "${pair#*:}" && one run "${pair%%:*}" $round . 280 performance \
                        bench_run.py --step --rounds 1 \
                        --out "$OUTDIR/run_${pair%%:*}_$round.json")
                done
            done ;;
        *) echo "unknown part $part (step, fmm, tg, run)" ;;
    esac
done
