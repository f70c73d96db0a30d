#!/bin/bash
# Frames of the leapfrog preset on the GPU (device): the whole `--preset gpu` run, its
# frames with and without the elements, the fraction of lit pixels of each (a channel
# more than 10/255 above the black background) and three frames, one with the elements,
# and plot.png into $OUT.  Usage (device):  OUT=... bash benchmarks/tools/frames_gpu.sh
source benchmarks/tools/wheels.sh; export PYTHONPATH=${SITE}$PWD
R=/tmp/lf; rm -rf $R
t() { local s=$(date +%s.%N); "$@"; echo "  wall $(awk "BEGIN{print $(date +%s.%N) - $s}") s: $*"; }
t python3 -m vortexsim run leapfrog --preset gpu --out $R -q
t python3 -m vortexsim render $R --out $R/frames -q
t python3 -m vortexsim render $R --elements --every 5 --out $R/frames_el -q
python3 - $R <<'PY' | tee $OUT/lit.txt
import glob, sys
import matplotlib.image as mpimg
for folder in ("frames", "frames_el"):
    for path in sorted(glob.glob(f"{sys.argv[1]}/{folder}/render_*.png")):
        img = mpimg.imread(path)[..., :3]
        print(f"{folder}/{path.rsplit('/', 1)[1]}: {100 * (img.max(axis=2) > 10 / 255).mean():.2f} % lit")
PY
f=($(ls $R/frames/render_*.png)); n=${#f[@]}
cp ${f[0]} ${f[$((n / 2))]} ${f[$((n - 1))]} $OUT/
cp $(ls $R/frames_el/render_*.png | tail -1) $OUT/elements_last.png
cp $R/plot.png $OUT/plot.png
