#!/bin/bash
# The particle-mesh solve against spectral_ns.py on the GPU, whole runs back to back
# (docs/periodic.md): each vortexsim run through the CLI, then the spectral code on the
# same flow, n and t_end at its CFL 0.5 step, then the comparison.  Usage (device):
#   OUT=... bash benchmarks/tools/mesh_validate_gpu.sh RUN...   RUN: tg128 hit128 hit256 hit256dt tg1600
# (NOSP=1: the 256^3 runs without their spectral twins, when those ran in an earlier call)
source benchmarks/tools/wheels.sh; export PYTHONPATH=${SITE}$PWD
nvidia-smi --query-gpu=name --format=csv,noheader
R=/tmp/v; mkdir -p $R $OUT/runs
SP="python3 benchmarks/validation/spectral_ns.py --cfl 0.5 --every 5 --device gpu --quiet"
timed() {  # name command...: wall seconds into $OUT/times.txt
  local name=$1; shift; local s=$(date +%s.%N)
  "$@" > $R/$name.log 2>&1; local rc=$?
  echo "$name rc=$rc wall=$(awk "BEGIN{print $(date +%s.%N) - $s}")" | tee -a $OUT/times.txt
  tail -3 $R/$name.log
}
vs() {  # name case args...
  local name=$1 case=$2; shift 2
  timed $name python3 -m vortexsim run $case --preset gpu --out $R/$name -q "$@"
  grep -h "steps in\|wall" $R/$name/run.log | tail -2
  mkdir -p $OUT/runs/$name; cp $R/$name/diagnostics.nc $R/$name/run.log $OUT/runs/$name/
  cp $R/$name/spectra.nc $OUT/runs/$name/ 2>/dev/null
  [ $name = hit512 ] || rm -f $R/$name/snapshot_*.nc      # the device's disk: 64 GB
}
# both codes once at 32^3 first, so that the timed runs find CuPy's kernel cache warm (a
# user's second run does; the first run on a machine compiles for about 15 s)
python3 -m vortexsim run taylor_green --preset gpu --set n=32 --set t_end=0.2 --out $R/warm_tg -q --overwrite
python3 -m vortexsim run isotropic_turbulence --preset gpu --set n=32 --set t_end=0.1 --out $R/warm_hit -q --overwrite
$SP --n 32 --nu 0.01 --t-end 0.2 --out $R/warm_sp.json > /dev/null 2>&1
$SP --init $R/warm_hit/initial_field.nc --nu 0.01 --t-end 0.1 --spectrum-times 0,0.1 \
    --statistics --nc $R/warm_sp.nc --out $R/warm_sp2.json > /dev/null 2>&1
for run in "$@"; do case $run in
  tg128) vs tg128 taylor_green
    timed tg128_sp $SP --n 128 --nu 1/400 --t-end 12 --out $OUT/runs/tg128_sp.json
    python3 benchmarks/validation/compare_taylor_green.py $OUT/runs/tg128_sp.json $R/tg128/diagnostics.nc ;;
  tg1600) vs tg1600 taylor_green --set n=256 --set nu=0.000625 --set t_end=10 --set dt=0.05
    [ -n "$NOSP" ] || timed tg1600_sp $SP --n 256 --nu 1/1600 --t-end 10 --out $OUT/runs/tg1600_sp.json
    [ -n "$NOSP" ] || python3 benchmarks/validation/compare_taylor_green.py $OUT/runs/tg1600_sp.json $R/tg1600/diagnostics.nc ;;
  hit128) vs hit128 isotropic_turbulence
    timed hit128_sp $SP --init $R/hit128/initial_field.nc --nu 0.0056 --t-end 2.2 \
        --spectrum-times 0,1.1,2.2 --statistics --nc $OUT/runs/hit128_sp.nc --out $R/hit128_sp.json
    python3 benchmarks/validation/compare_isotropic.py $R/hit128 $OUT/runs/hit128_sp.nc --spectrum-times 1.1,2.2 ;;
  hit256*) extra=""; [ $run = hit256dt ] && extra="--set dt=0.025"
    vs $run isotropic_turbulence --set n=256 --set nu=0.0028 --set dt=0.0125 $extra
    [ -f $OUT/runs/hit256_sp.nc ] || [ -n "$NOSP" ] || timed hit256_sp $SP --init $R/$run/initial_field.nc --nu 0.0028 \
        --t-end 2.2 --spectrum-times 0,1.1,2.2 --statistics --nc $OUT/runs/hit256_sp.nc --out $R/hit256_sp.json
    [ -n "$NOSP" ] || python3 benchmarks/validation/compare_isotropic.py $R/$run $OUT/runs/hit256_sp.nc --spectrum-times 1.1,2.2 ;;
  hit512) vs hit512 isotropic_turbulence --set n=512 --set nu=0.0014 --set dt=0.0125 \
        --set t_end=0.05 --set snapshot_interval=0.05 --set diagnostics_interval=0.025
    timed hit512_restart python3 -m vortexsim restart $(ls $R/hit512/snapshot_*.nc | tail -1) --t-end 0.075 -q
    grep -h "GPU memory\|steps in\|time: steps" $R/hit512/run.log | tail -6
    cp $R/hit512/run.log $OUT/runs/hit512/run.log ;;
esac; done
cd $OUT && tar czf runs.tgz runs && rm -rf runs
