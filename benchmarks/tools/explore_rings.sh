#!/bin/bash
# Exploratory ring runs on the GPU (docs/gpu.md): each variant through the CLI, at most
# LIMIT seconds, its diagnostics.nc, run.log and element count into $OUT/d.tgz and one
# line per run into $OUT/summary.txt.  Usage: OUT=... LIMIT=90 explore_rings.sh VARIANTS
# where each variant is "name|case|--set arguments ...".
source benchmarks/tools/wheels.sh; export PYTHONPATH=${SITE}$PWD
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/summary.txt
mkdir -p /tmp/r
for spec in "$@"; do
  IFS='|' read -r name case args <<< "$spec"
  s=$(date +%s.%N)
  timeout ${LIMIT:-90} python3 -m vortexsim run $case --preset gpu $args --device gpu \
      --out /tmp/r/$name --set plot=false -q > /tmp/r/$name.out 2>&1; rc=$?
  e=$(date +%s.%N)
  n=$(python3 - /tmp/r/$name <<'PY'
import glob, sys, netCDF4
files = sorted(glob.glob(sys.argv[1] + "/snapshot_*.nc"))
print(netCDF4.Dataset(files[-1]).dimensions["element"].size if files else -1)
PY
)
  echo "$name rc=$rc wall=$(awk "BEGIN{print $e - $s}") elements_end=$n" | tee -a $OUT/summary.txt
  mkdir -p $OUT/d/$name
  cp /tmp/r/$name/diagnostics.nc /tmp/r/$name/run.log /tmp/r/$name.out $OUT/d/$name/ 2>/dev/null
done
cd $OUT && tar czf d.tgz d && rm -rf d
