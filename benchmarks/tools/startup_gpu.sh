#!/bin/bash
# Where a whole periodic CLI run's time goes outside its steps (device): the imports, the
# CUDA context, the case's set-up and the run, under cProfile, with the run logs.
# Usage (device):  OUT=... bash benchmarks/tools/startup_gpu.sh [RUN...]
#   RUN: tg128 hit128 hit256 (isotropic 256^3 at dt 0.025) tg1600 (Taylor-Green 256^3)
# Writes $OUT/startup.tgz: RUN.txt (cProfile, cumulative and own time), RUN.log.
source benchmarks/tools/wheels.sh; export PYTHONPATH=${SITE}$PWD
R=/tmp/startup; rm -rf $R; mkdir -p $R
t() { local s=$(date +%s.%N); "$@"; echo "  wall $(awk "BEGIN{print $(date +%s.%N) - $s}") s: $*"; }
t python3 -c "import cupy; cupy.zeros(1).sum().get()"
t python3 -c "import vortexsim.cli"
profiled() {  # name case args...: the CLI's run_command (main ends the process itself)
  local name=$1; shift
  t python3 - $R/$name.prof run "$@" --out $R/$name -q <<'PY'
import cProfile, sys
from vortexsim.cli.command import run_command
cProfile.run(f"run_command({sys.argv[2:]!r})", sys.argv[1])
PY
  python3 - $R/$name.prof <<'PY' > $R/$name.txt
import pstats, sys
s = pstats.Stats(sys.argv[1]); s.sort_stats("cumulative").print_stats(70)
s.sort_stats("tottime").print_stats(30)
PY
  cp $R/$name/run.log $R/$name.log
}
for run in ${@:-tg128 hit128}; do case $run in
  tg128) t python3 -m vortexsim run taylor_green --preset gpu --out $R/warm -q --overwrite
         profiled tg128 taylor_green --preset gpu ;;
  hit128) profiled hit128 isotropic_turbulence --preset gpu ;;
  hit256) profiled hit256 isotropic_turbulence --preset gpu --set n=256 --set nu=0.0028 \
              --set dt=0.025 ;;
  tg1600) profiled tg1600 taylor_green --preset gpu --set n=256 --set nu=0.000625 \
              --set t_end=10 --set dt=0.05 ;;
esac; done
cd $R && tar czf $OUT/startup.tgz *.txt *.log
