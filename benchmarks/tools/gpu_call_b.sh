#!/bin/bash
# One device call: the GPU tests of the health measures, then the resolution study of
# leapfrog and ring_ground by lattice (--lattice); everything into $OUT.
source benchmarks/tools/wheels.sh; export PYTHONPATH=${SITE}$PWD
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.txt
timeout 60 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_health.py > $OUT/gpu_tests.log 2>&1
timeout 480 python3 benchmarks/validation/resolution_study.py --lattice --device gpu \
    --cases leapfrog ring_ground --diag-interval 0.05 --tracers 0 --budget 470 \
    --out $OUT/study.json > $OUT/study.log 2>&1
tail -3 $OUT/gpu_tests.log; tail -22 $OUT/study.log
