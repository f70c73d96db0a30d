#!/usr/bin/env bash
# Issue 37 through the CLI on the GPUs of one machine (from the repository root):
#   1. CASE_NAME (default leapfrog) --preset gpu to T_END on 1 rank and on RANKS ranks
#      (whole runs, timed; SET: more --set options, e.g. "--set n=256");
#   2. the same on RANKS ranks, SIGTERM to mpiexec after its third snapshot; the
#      interrupted checkpoint restarted on RESTART_RANKS ranks to T_END;
#   3. the diagnostics at T_END of the continued run against the uninterrupted one.
# Results under $OUT (ranks_cli.log, the run directories' diagnostics and logs).
set -u
OUT="${OUT:-benchmarks/results/ranks_cli_$(date +%F_%H%M%S)}"; mkdir -p "$OUT"
source "$(dirname "$0")/mpi_env.sh"      # PYTHONPATH, PY, MPIEXEC, the MPI/NCCL settings
RANKS="${RANKS:-2}"; RESTART_RANKS="${RESTART_RANKS:-1}"; T_END="${T_END:-4}"
CASE=("${CASE_NAME:-leapfrog}" --preset gpu --device gpu --t-end "$T_END"
      --set "snapshot_interval=${SNAP:-0.5}" ${SET:-} -q)
W=/tmp/ranks_cli; rm -rf "$W"; mkdir -p "$W"
LOG="$OUT/ranks_cli.log"
mpi() { local n=$1; shift; "$MPIEXEC" --allow-run-as-root -x PYTHONPATH -x NCCL_NVLS_ENABLE -n "$n" "$PY" -m vortexsim "$@"; }
timed() { local t0; t0=$(date +%s%N); "$@"; local rc=$?; echo "   rc=$rc wall=$(( ($(date +%s%N) - t0) / 1000000 )) ms"; }
{
  nvidia-smi --query-gpu=index,name --format=csv,noheader; echo "mpiexec: $MPIEXEC"
  echo "== warm-up (CuPy compiles the kernels once)"
  timed mpi 1 run "${CASE[@]}" --t-end 0.2 --out "$W/warm" >/dev/null 2>&1
  echo "== 1 rank";  timed mpi 1 run "${CASE[@]}" --out "$W/one"
  echo "== $RANKS ranks"; timed mpi "$RANKS" run "${CASE[@]}" --out "$W/full"
  echo "== $RANKS ranks, SIGTERM to mpiexec after the third snapshot"
  mpi "$RANKS" run "${CASE[@]}" --out "$W/part" & pid=$!
  for _ in $(seq 600); do
    [ "$(ls "$W"/part/snapshot_*.nc 2>/dev/null | wc -l)" -ge 3 ] && break; sleep 0.2
  done
  pkill -TERM -f "^$MPIEXEC --allow-run-as-root"; wait "$pid"; echo "   mpiexec rc=$?"
  sleep "${AFTER:-20}"                     # ranks left behind by the launcher, if any
  ls "$W/part"; grep -v "numerical health" "$W/part/run.log" | tail -4
  pgrep -af "vortexsim run" || echo "   no rank left"
  last="$(ls "$W"/part/snapshot_*.nc | tail -1)"
  echo "== restart $last on $RESTART_RANKS rank(s)"
  if [ "$RESTART_RANKS" = 1 ]; then timed "$PY" -m vortexsim restart "$last" -q
  else timed mpi "$RESTART_RANKS" restart "$last"; fi
  "$PY" - "$W" <<'PY'
import sys, xarray as xr, numpy as np
from vortexsim.output import read_snapshot
import glob, os
w = sys.argv[1]
for name in ("one", "full", "part"):
    d = xr.open_dataset(os.path.join(w, name, "diagnostics.nc"))
    snaps = sorted(glob.glob(os.path.join(w, name, "snapshot_*.nc")))
    s = read_snapshot(snaps[-1])
    print(name, "t", float(d.t[-1]), "rows", d.sizes, "N", len(s.state["elements"]["x"]),
          {k: float(d[k][-1]) for k in ("energy", "enstrophy", "helicity", "mean_energy",
                                        "lattice_dissipation") if k in d},
          *(["ring_centre", d.ring_centre[-1].values.round(5).tolist()]
            if "ring_centre" in d else []))
a = xr.open_dataset(os.path.join(w, "full", "diagnostics.nc"))
part = sorted(glob.glob(os.path.join(w, "part", "branch_*"))) or [os.path.join(w, "part")]
print("continued in", part[-1])
b = xr.open_dataset(os.path.join(part[-1], "diagnostics.nc"))
for k in [k for k in ("energy", "enstrophy", "ring_centre", "lattice_dissipation",
                      "skewness") if k in a]:
    x, y = a[k][-1].values, b[k][-1].values
    print(k, "continued vs uninterrupted, relative:",
          float(np.abs(y - x).max() / np.abs(x).max()), "t", float(a.t[-1]), float(b.t[-1]))
PY
  cp "$W"/*/run.log "$OUT/" 2>/dev/null; for r in one full part; do cp "$W/$r/run.log" "$OUT/$r.run.log"; cp "$W/$r/diagnostics.nc" "$OUT/$r.diagnostics.nc"; done
} 2>&1 | tee "$LOG"
