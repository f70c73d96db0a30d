"""Run one bench_fmm case a few times (for external profilers such as nsys).

    python benchmarks/one_case.py rings-gauss-1e-6 [repeats]
"""
import sys

import numpy as np

from bench_fmm import CASES
from vortexsim.fmm.evaluator import FMM
from vortexsim.inputs import rings, uniform


def main(name, repeats=3):
    import cupy as cp
    kind, n, m, kname, tol, prec, sh, _ = CASES[name]
    rng = np.random.default_rng(0)
    if kind == "rings":
        x, alpha, tracers = rings(n, m, rng)
        sigma = np.full(n, 0.01)
    else:
        x, alpha, tracers = uniform(n, rng)
        sigma = np.full(n, sh * n ** (-1 / 3))
    dt = np.dtype(prec)
    xd, ad, sd = (cp.asarray(a, dtype=dt) for a in (x, alpha, sigma))
    td = None if tracers is None else cp.asarray(tracers, dtype=dt)
    fmm = FMM(kname, tol=tol, precision=prec, device="gpu")
    for _ in range(2 + repeats):
        fmm.evaluate(xd, ad, sd, td)
    cp.cuda.Device().synchronize()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3)
