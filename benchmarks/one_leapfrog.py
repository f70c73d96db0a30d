"""One sync-free FMM evaluation of the leapfrog GPU step, for ncu (GPU only).

    ncu --profile-from-start off --metrics gpu__time_duration.sum --csv \\
        python3 benchmarks/one_leapfrog.py > kernels.csv

Builds the resolved-core leapfrog case (32 004 elements, 2^20 tracers), runs one step
(compiles every kernel, sizes the M2L), then profiles exactly one evaluation of the
right-hand side between cudaProfilerStart and Stop.  ``python3 benchmarks/
one_leapfrog.py --summary kernels.csv`` sums the kernel times by name.
"""
from __future__ import annotations

import csv
import sys
from collections import defaultdict


def main():
    import cupy as cp
    import vortexsim
    sim = vortexsim.make_case("leapfrog", n_phi=126, layers=7, layer_spacing=0.5, sigma=0.05,
                              tracers_per_ring=1 << 19, dt=0.01, device="gpu", method="fmm",
                              tol=1e-6, progress=False)
    sim.run(steps=1)
    rhs = sim.rhs
    root, _ = sim._root(sim.dt)
    rhs.begin_step(sim.t, sim.elements.sigma, sim._sigma_range, root)
    state = (sim.elements.x, sim.elements.alpha, sim.tracers.x)
    rhs(state, sim.t)                          # sizes the M2L (one transfer)
    cp.cuda.Device().synchronize()
    cp.cuda.profiler.start()
    rhs(state, sim.t)
    cp.cuda.Device().synchronize()
    cp.cuda.profiler.stop()


def summary(path):
    """Kernel time [ms] by kernel name from ncu's CSV (gpu__time_duration.sum, ns)."""
    total = defaultdict(float)
    count = defaultdict(int)
    with open(path) as f:
        rows = [r for r in csv.reader(f) if len(r) > 10]
    head = rows[0]
    i_name, i_val = head.index("Kernel Name"), head.index("Metric Value")
    for r in rows[1:]:
        name = r[i_name].split("(")[0][:70]
        total[name] += float(r[i_val].replace(",", "")) * 1e-6
        count[name] += 1
    print(f"{sum(total.values()):8.3f} ms  total of {sum(count.values())} kernels")
    for name, t in sorted(total.items(), key=lambda kv: -kv[1]):
        print(f"{t:8.3f} ms  {count[name]:4d}×  {name}")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--summary":
        summary(sys.argv[2])
    else:
        main()
