#!/bin/bash
# The ring presets' lattice resolution study (resolution_study.py --lattice) on the GPUs
# of one host, one job per GPU, at the same time: each job "name|study arguments ..."
# (e.g. "obl|--cases oblique_collision", "lf10k|--cases leapfrog --set nu=1e-4") runs on
# GPU i for its i-th place, within BUDGET seconds (default 500), no tracers, rows every
# 0.05.  Writes $OUT/study_NAME.json, .md and .log.
source benchmarks/tools/wheels.sh; export PYTHONPATH=${SITE}$PWD
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpus.txt
i=0
for job in "$@"; do
  IFS='|' read -r name args <<< "$job"
  CUDA_VISIBLE_DEVICES=$i python3 benchmarks/validation/resolution_study.py --lattice \
      --device gpu --tracers 0 --diag-interval 0.05 --budget ${BUDGET:-500} $args \
      --out $OUT/study_$name.json > $OUT/study_$name.log 2>&1 &
  i=$((i + 1))
done
wait
for job in "$@"; do
  IFS='|' read -r name args <<< "$job"
  echo "== $name: $args"; tail -n 25 $OUT/study_$name.md 2>/dev/null || tail -n 20 $OUT/study_$name.log
done
