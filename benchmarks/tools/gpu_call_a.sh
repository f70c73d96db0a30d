#!/bin/bash
# One device call: the resolution study of collision by lattice (--lattice), then the whole
# GPU test suite; everything into $OUT.
source benchmarks/tools/wheels.sh; export PYTHONPATH=${SITE}$PWD
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.txt
timeout 200 python3 benchmarks/validation/resolution_study.py --lattice --device gpu \
    --cases collision --diag-interval 0.05 --tracers 0 --budget 190 \
    --out $OUT/study_collision.json > $OUT/study_collision.log 2>&1
timeout 330 python3 -m pytest -q -p no:cacheprovider -m gpu tests > $OUT/gpu_tests.log 2>&1
tail -5 $OUT/gpu_tests.log; tail -12 $OUT/study_collision.log
