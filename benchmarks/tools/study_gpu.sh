#!/bin/bash
# The ring presets' lattice resolution study (resolution_study.py --lattice) on the GPUs
# of one host: each job "name|study arguments ..." (e.g. "obl|--cases oblique_collision",
# "lf4|--cases leapfrog --levels fine --h-scale 0.6299605249474366") runs on GPU
# i mod (number of GPUs) for its place i, the jobs of one GPU one after another, the GPUs
# at the same time; each within BUDGET seconds (default 500), no tracers, rows every 0.05.
# Writes $OUT/study_NAME.json, .md and .log.
source benchmarks/tools/wheels.sh; export PYTHONPATH=${SITE}$PWD
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpus.txt
ngpu=$(nvidia-smi -L | wc -l)
for ((g = 0; g < ngpu; g++)); do
  (
    i=0
    for job in "$@"; do
      if ((i % ngpu == g)); then
        IFS='|' read -r name args <<< "$job"
        CUDA_VISIBLE_DEVICES=$g python3 benchmarks/validation/resolution_study.py \
            --lattice --device gpu --tracers 0 --diag-interval 0.05 \
            --budget ${BUDGET:-500} $args --out $OUT/study_$name.json \
            > $OUT/study_$name.log 2>&1
      fi
      i=$((i + 1))
    done
  ) &
done
wait
for job in "$@"; do
  IFS='|' read -r name args <<< "$job"
  echo "== $name: $args"; tail -n 8 $OUT/study_$name.md 2>/dev/null || tail -n 20 $OUT/study_$name.log
done
