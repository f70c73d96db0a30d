#!/usr/bin/env bash
# Whole CLI runs of a case on 1 and P GPUs of one machine (from the repository root), the
# GPU tests of the split periodic box first; the run logs' time lines and the largest
# difference of the diagnostics between the runs.  Environment: RANKS (default "1 4"),
# ARGS (default: isotropic_turbulence --preset gpu at 256^3 to t = 0.75, snapshots every
# 0.25), SKIP_TESTS=1, TESTS (the GPU test files, default the split periodic box's),
# RUN_TIMEOUT (seconds per run, default 200).  Each GPU's largest memory use during a run
# (nvidia-smi every 0.25 s: CuPy's pool, the context and NCCL's buffers) is printed after it.  Results under $OUT (runs_gpu.log, each run's run_P*.log).
set -u
OUT="${OUT:-benchmarks/results/runs_$(date +%F_%H%M%S)}"; mkdir -p "$OUT"
source "$(dirname "$0")/mpi_env.sh"      # PYTHONPATH, PY, MPIEXEC, the MPI/NCCL settings
ARGS="${ARGS:-isotropic_turbulence --preset gpu --device gpu --set n=256 --t-end 0.75 --set snapshot_interval=0.25}"
{
  nvidia-smi --query-gpu=index,name --format=csv,noheader
  [ "${SKIP_TESTS:-0}" = 1 ] || timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider \
      ${TESTS:-tests/test_turbulence_slab.py tests/model/test_slab_partition.py} 2>&1 | tail -8
  for P in ${RANKS:-1 4}; do
    rm -rf "/tmp/runs/P$P"; mkdir -p /tmp/runs
    nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits -lms 250 \
        > "$OUT/smi_P$P.csv" 2>/dev/null & smi=$!
    t0=$(date +%s%N)
    timeout "${RUN_TIMEOUT:-200}" "$MPIEXEC" --allow-run-as-root -x PYTHONPATH -x NCCL_NVLS_ENABLE -n "$P" "$PY" \
        -m vortexsim run $ARGS --out "/tmp/runs/P$P" -q
    echo "== $P GPU(s): rc=$? wall=$(( ($(date +%s%N) - t0) / 1000000 )) ms"
    kill "$smi" 2>/dev/null
    grep -E "set-up|time:|ran [0-9]+ steps|output thread|GPU memory" "/tmp/runs/P$P/run.log" | cut -c1-600
    cp "/tmp/runs/P$P/run.log" "$OUT/run_P$P.log"
    awk -F', ' '{ if ($2 > m[$1]) m[$1] = $2 } END { for (g in m) printf "GPU %s: %.1f GiB used at most (nvidia-smi)\n", g, m[g] / 1024 }' \
        "$OUT/smi_P$P.csv" | sort
  done
  "$PY" - ${RANKS:-1 4} <<'PY'
import sys, numpy as np, xarray as xr
ranks = sys.argv[1:]
a = xr.open_dataset(f"/tmp/runs/P{ranks[0]}/diagnostics.nc")
for p in ranks[1:]:
    b = xr.open_dataset(f"/tmp/runs/P{p}/diagnostics.nc")
    worst = max((float(np.abs(a[k].values - b[k].values).max() / max(np.abs(a[k].values).max(), 1e-300)), k)
                for k in ("energy", "enstrophy", "lattice_dissipation", "skewness", "flatness"))
    print(f"diagnostics {p} GPUs vs {ranks[0]}: largest relative difference {worst[0]:.2e} ({worst[1]})")
    import glob
    from vortexsim.output import read_snapshot
    last = [sorted(glob.glob(f"/tmp/runs/P{q}/snapshot_*.nc"))[-1] for q in (ranks[0], p)]
    s, t = (read_snapshot(f).state["elements"] for f in last)
    print(f"last snapshot {p} GPUs vs {ranks[0]}:", {k: float(np.abs(np.asarray(s[k]) - np.asarray(t[k])).max())
                                                    for k in ("x", "alpha", "sigma", "volume")})
PY
} 2>&1 | tee "$OUT/runs_gpu.log"
