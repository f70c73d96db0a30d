"""Run one bench_fmm case a few times (for external profilers such as nsys).

    python benchmarks/one_case.py rings-gauss-1e-6 [repeats]
"""
import sys

import numpy as np

from bench_fmm import gpu_case


def main(name, repeats=3):
    import cupy as cp
    _, (xd, ad, sd, td), fmm = gpu_case(name, np.random.default_rng(0))
    for _ in range(2 + repeats):
        fmm.evaluate(xd, ad, sd, td)
    cp.cuda.Device().synchronize()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3)
