OUT=$OUT LIMIT=110 bash benchmarks/tools/explore_rings.sh "lf|leapfrog|" "col|collision|" "gr|ring_ground|" "obl|oblique_collision|" "obl_cls|oblique_collision|--set stretching=classical"
source benchmarks/tools/wheels.sh; export PYTHONPATH=${SITE}$PWD
for c in collision leapfrog; do timeout 60 python3 benchmarks/bench_health.py --case $c 2>&1 | tail -3 | tee -a $OUT/summary.txt; done
timeout 120 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_health.py tests/physics/test_remesh_groups.py 2>&1 | tail -3 | tee -a $OUT/summary.txt
