#!/usr/bin/env bash
# One level of the ring presets' lattice resolution study too large for one GPU, through
# the CLI on RANKS ranks (mpiexec, one GPU each): the parameters are resolution_study.py's
# for CASE_NAME (default leapfrog) at --levels fine with --h-scale H_SCALE (default
# 16^(-1/3): a fifth level, h / 64^(1/3)), to T_END (default 10), no tracers, rows every
# 0.05.  Prints the run's leapfrog pass times (or oblique bridge times) from its
# diagnostics.nc; writes $OUT/level.log and the run's diagnostics.nc and run.log.
# RUN_ARGS: more options of vortexsim run (e.g. "--max-memory 140GB": the memory check
# bounds a remeshed ring by a torus of radius 4R, twice this level's elements).
set -u
source "$(dirname "$0")/mpi_env.sh"
RANKS="${RANKS:-4}"; W=/tmp/study_level; rm -rf "$W"
CASE_NAME="${CASE_NAME:-leapfrog}"; H_SCALE="${H_SCALE:-0.3968502629920499}"
mapfile -t SETS < <("$PY" - "$CASE_NAME" "$H_SCALE" "${T_END:-10}" <<'PY'
import sys
from vortexsim.validation import resolution_study as rs
case, scale, t_end = sys.argv[1:]
run = rs.plan(rs.parse_args(["--lattice", "--cases", case, "--levels", "fine", "--h-scale",
                             scale, "--tracers", "0", "--t-end", t_end]))[0]
for key in ("n_phi", "layers", "layer_spacing", "sigma", "core", "remesh_spacing",
            "tracers_per_ring", "t_end"):
    print("--set"); print(f"{key}={run['params'][key]!r}")
PY
)
{
  nvidia-smi --query-gpu=index,name --format=csv,noheader; echo "${SETS[*]}"
  t0=$(date +%s)
  "$MPIEXEC" --allow-run-as-root -x PYTHONPATH -x NCCL_NVLS_ENABLE -n "$RANKS" "$PY" -m \
      vortexsim run "$CASE_NAME" --preset gpu --device gpu "${SETS[@]}" \
      --set diagnostics_interval=0.05 --set snapshot_interval=100 --set plot=false \
      --out "$W" -q ${RUN_ARGS:-}
  echo "rc=$? wall=$(( $(date +%s) - t0 )) s"
  tail -5 "$W/run.log"
  [ -f "$W/diagnostics.nc" ] && "$PY" - "$W" "$CASE_NAME" <<'PY'
import sys, numpy as np, xarray as xr
from vortexsim.validation.ring_events import crossing_times
d = xr.open_dataset(sys.argv[1] + "/diagnostics.nc")
names = [str(n) for n in d.ring.values]
c = d.ring_centre.values
print("rows", d.sizes["t"], "t_end", float(d.t[-1]), "rings", names)
if sys.argv[2] == "leapfrog":
    g = c[:, names.index("front"), 2] - c[:, names.index("rear"), 2]
    print("pass_times", crossing_times(d.t.values, g))
PY
} 2>&1 | tee "$OUT/level.log"
cp "$W/diagnostics.nc" "$W/run.log" "$OUT/" 2>/dev/null
