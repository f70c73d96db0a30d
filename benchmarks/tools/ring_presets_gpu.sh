#!/bin/bash
# The ring presets as shipped (vortexsim run CASE --preset gpu) on the device, then the
# row's cost (bench_health.py) and the GPU tests of the health measures and remeshing.
# Extra variants: RING_VARIANTS="name|case|--set ..." (explore_rings.sh's format).
OUT=$OUT LIMIT=${LIMIT:-150} bash benchmarks/tools/explore_rings.sh "lf|leapfrog|" "col|collision|" \
    "gr|ring_ground|" "obl|oblique_collision|" ${RING_VARIANTS:+"$RING_VARIANTS"}
source benchmarks/tools/wheels.sh; export PYTHONPATH=${SITE}$PWD
for c in collision leapfrog; do
    timeout 60 python3 benchmarks/bench_health.py --case $c 2>&1 | tail -3 | tee -a $OUT/summary.txt
done
timeout 120 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_health.py \
    tests/physics/test_remesh_groups.py 2>&1 | tail -3 | tee -a $OUT/summary.txt
