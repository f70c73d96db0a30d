#!/bin/bash
# exploratory ring runs on the GPU: diagnostics + logs into $OUT
source benchmarks/tools/wheels.sh; export PYTHONPATH=${SITE}$PWD
nvidia-smi --query-gpu=name --format=csv,noheader
run() { name=$1; shift; s=$(date +%s.%N)
  timeout ${LIMIT:-100} python3 -m vortexsim run "$@" --device gpu --out /tmp/r/$name --set plot=false --set snapshot_interval=auto -q > /tmp/r/$name.out 2>&1; rc=$?
  e=$(date +%s.%N); echo "$name rc=$rc wall=$(awk "BEGIN{print $e - $s}")" | tee -a $OUT/summary.txt
  mkdir -p $OUT/d/$name; cp /tmp/r/$name/diagnostics.nc /tmp/r/$name/run.log /tmp/r/$name.out $OUT/d/$name/ 2>/dev/null; }
mkdir -p /tmp/r
run obl_adapt oblique_collision --preset gpu --set adaptive=true --set courant=0.25
run obl_visc oblique_collision --preset gpu --set nu=0.001 --set adaptive=true --set courant=0.25
run col_remesh collision --preset gpu --set remesh_every=5 --set remesh_spacing=0.05 --set remesh_threshold=1e-4 --set adaptive=true --set courant=0.25
run lf_remesh leapfrog --preset gpu --set remesh_every=5 --set remesh_spacing=0.05 --set remesh_threshold=1e-4
run gr_adapt ring_ground --preset gpu --set adaptive=true --set courant=0.25
cd $OUT && tar czf d.tgz d && rm -rf d
