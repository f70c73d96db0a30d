#!/bin/bash
# The particle-mesh solve on the GPU (docs/gpu.md): its GPU tests, a profile of the
# Taylor-Green step and the per-step comparison with spectral_ns.  Usage (device):
#   OUT=... bash benchmarks/tools/mesh_gpu.sh [N ...]
source benchmarks/tools/wheels.sh; export PYTHONPATH=${SITE}$PWD
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
python3 -m pytest -q -p no:cacheprovider -m gpu tests/summation/test_mesh.py \
    tests/physics/test_remesh.py 2>&1 | tail -3
for n in ${@:-128}; do
  python3 benchmarks/tools/profile_taylor_green.py --n $n --device gpu --set method=mesh \
      --out $OUT/profile_mesh_$n.json 2>&1 | tail -12
done
cd benchmarks/performance
python3 bench_vs_spectral.py --case taylor_green --n ${@:-128} --set method=mesh \
    --out $OUT/vs_spectral_tg.json 2>&1 | grep -v "^$" | tail -4
python3 bench_vs_spectral.py --case isotropic_turbulence --n ${@:-128} --set method=mesh \
    --set nu=0.0056 --set dt=0.025 --out $OUT/vs_spectral_hit.json 2>&1 | grep -v "^$" | tail -4
