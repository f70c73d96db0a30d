"""Stage times of the adaptive tree's build on the GPU (synchronized laps, summed over
levels) for the Plummer cloud of bench_fmm (`clustered-gauss-1e-6-local`).

    python benchmarks/prof_adaptive.py [LEAF_SIZE]
"""
import collections
import sys
import time

import numpy as np


def main():
    import cupy as cp
    sys.path.insert(0, "benchmarks")
    from bench_fmm import gpu_case
    from vortexsim.fmm.adaptive import build_adaptive, class_vectors
    from vortexsim.fmm.evaluator import near_field_reach
    from vortexsim.fmm.tree import root_cube
    leaf = int(sys.argv[1]) if len(sys.argv) > 1 else 512
    _, (xd, _, sd, _), fmm = gpu_case("clustered-gauss-1e-6-local", np.random.default_rng(0),
                                      tree="adaptive")
    lo, width = root_cube(xd, xd, cp)
    reach = near_field_reach("gaussian", fmm.tol, float(sd.max()))
    depth, width = fmm._adaptive_root(float(width), reach)     # as FMM.evaluate
    vec = class_vectors(fmm)
    for run in range(3):
        laps = collections.defaultdict(float)
        t = [time.perf_counter()]

        def lap(name):
            cp.cuda.Device().synchronize()
            now = time.perf_counter()
            laps[name] += now - t[0]
            t[0] = now
        cp.cuda.Device().synchronize()
        t0 = t[0] = time.perf_counter()
        build_adaptive(xd, xd, lo, width, depth, leaf, 1, vec, cp, lap=lap)
        cp.cuda.Device().synchronize()
        total = time.perf_counter() - t0
        print(f"run {run} depth {depth}: total {total * 1e3:.1f} ms",
              {k: round(v * 1e3, 1) for k, v in laps.items()}, flush=True)


if __name__ == "__main__":
    main()
