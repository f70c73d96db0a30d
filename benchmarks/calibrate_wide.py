"""Errors of the wide-separation FMM (tol < 1e-6) by expansion order, on the CPU.

    python benchmarks/calibrate_wide.py KERNEL ORDERS [DEPTH]
    python benchmarks/calibrate_wide.py gaussian 12,14,16        # the cost model's depth
    python benchmarks/calibrate_wide.py singular 12 4            # a forced depth

2×10^4 uniform points in the unit cube, σ = h = N^(−1/3), sources = targets; relative L2
errors of u and ∇u on 400 sampled targets against the NumPy direct sum, with the
chosen depth and the seconds of the call (2 cores: run one process at a time, or the
times are not comparable).  The table of `_ORDER_TABLE_WIDE*` in
vortexsim/fmm/evaluator.py came from these runs (session 5).
"""
from __future__ import annotations

import sys
import time

import numpy as np


def main(argv=None):
    from vortexsim.fmm.evaluator import FMM
    from vortexsim.inputs import uniform
    from vortexsim.kernels.cutoff import get_kernel
    from vortexsim.kernels.direct import direct_sum_at_elements
    argv = sys.argv[1:] if argv is None else argv
    kernel, orders = argv[0], [int(v) for v in argv[1].split(",")]
    depth = int(argv[2]) if len(argv) > 2 else None
    rng = np.random.default_rng(20000)
    n = 20000
    x, alpha, _ = uniform(n, rng)
    sample = rng.choice(n, 400, replace=False)
    sigma = np.full(n, n ** (-1 / 3))
    ud, gd = direct_sum_at_elements(get_kernel(kernel), x, alpha, sigma, sample)
    for order in orders:
        fmm = FMM(kernel, tol=1e-9, order=order, device="cpu")
        t0 = time.perf_counter()
        u, g = fmm.evaluate(x, alpha, sigma, depth=depth)
        wall = time.perf_counter() - t0
        err_u = np.linalg.norm(u[sample] - ud) / np.linalg.norm(ud)
        err_g = np.linalg.norm(g[sample] - gd) / np.linalg.norm(gd)
        print(f"{kernel} P={order} depth={fmm.config.depth} err_u={err_u:.2e} "
              f"err_grad={err_g:.2e} {wall:.1f} s", flush=True)


if __name__ == "__main__":
    main()
