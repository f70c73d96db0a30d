"""CPU FMM below tol 1e-6 (the wide separation) against the direct sum; prints JSON.

    python benchmarks/bench_cpu_wide.py [--n 100000] [--kernels singular gaussian] [--tol 1e-9]

Uniform points in the unit cube, σ = h = N^(−1/3), sources = targets. Errors are relative
L2 on 400 sampled targets against the NumPy direct sum; the direct sum's time for all N
targets is extrapolated from those 400 (same process, same cores).
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np


def main(argv=None):
    from vortexsim.fmm.evaluator import FMM
    from vortexsim.inputs import uniform
    from vortexsim.kernels.cutoff import get_kernel
    from vortexsim.kernels.direct import direct_sum_at_elements
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=100000)
    p.add_argument("--kernels", nargs="+", default=["singular", "gaussian"])
    p.add_argument("--tol", type=float, default=1e-9)
    args = p.parse_args(argv)
    rng = np.random.default_rng(args.n)
    n = args.n
    x, alpha, _ = uniform(n, rng)
    sigma = np.full(n, n ** (-1 / 3))
    sample = rng.choice(n, 400, replace=False)
    for name in args.kernels:
        t0 = time.perf_counter()
        ud, gd = direct_sum_at_elements(get_kernel(name), x, alpha, sigma, sample)
        direct = (time.perf_counter() - t0) * n / sample.size
        fmm = FMM(name, tol=args.tol, device="cpu")
        t0 = time.perf_counter()
        u, g = fmm.evaluate(x, alpha, sigma)
        wall = time.perf_counter() - t0
        rel = lambda a, b: float(np.linalg.norm(a - b) / np.linalg.norm(b))  # noqa: E731
        print(json.dumps({
            "kernel": name, "n": n, "tol": args.tol, "cores": os.cpu_count(),
            "order": fmm.config.order, "depth": fmm.config.depth,
            "separation": fmm.separation, "err_u": rel(u[sample], ud),
            "err_grad": rel(g[sample], gd), "fmm_s": round(wall, 2),
            "stages_s": {k: round(v, 2) for k, v in fmm.timings.items()},
            "direct_s_extrapolated": round(direct, 1)}), flush=True)


if __name__ == "__main__":
    main()
