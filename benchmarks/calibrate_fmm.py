"""Calibrate the FMM rule tol → expansion order P (CPU, NumPy).

For uniform inputs (σ = h) and each far-field kernel, measures the relative L2
error of u and ∇u against the float64 direct sum on sampled targets for a
range of orders P.  The table ``_ORDER_TABLE`` in vortexsim/fmm/evaluator.py
takes, for each tol, the smallest P with err_u ≤ tol/2 and err_∇u ≤ 5·tol over
all kernels (a factor 2 of margin).

    python benchmarks/calibrate_fmm.py --n 4000
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from vortexsim.fmm.evaluator import FMM
from vortexsim.kernels.cutoff import get_kernel
from vortexsim.kernels.direct import direct_sum_at_elements


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=4000)
    p.add_argument("--orders", type=int, nargs="+", default=[4, 6, 8, 10, 12, 14, 16])
    p.add_argument("--kernels", nargs="+", default=["singular", "algebraic", "winckelmans"])
    p.add_argument("--out", default="calibrate_fmm.json")
    args = p.parse_args(argv)
    rng = np.random.default_rng(7)
    n = args.n
    x = rng.random((n, 3))
    alpha = rng.normal(size=(n, 3))
    sigma = np.full(n, n ** (-1 / 3))
    sample = rng.choice(n, size=min(n, 300), replace=False)
    rows = []
    for name in args.kernels:
        ref_u, ref_g = direct_sum_at_elements(get_kernel(name), x, alpha, sigma, sample)
        for order in args.orders:
            fmm = FMM(name, tol=1e-3, order=order, leaf_size=32, device="cpu")
            u, g = fmm.evaluate(x, alpha, sigma)
            eu = float(np.linalg.norm(u[sample] - ref_u) / np.linalg.norm(ref_u))
            eg = float(np.linalg.norm(g[sample] - ref_g) / np.linalg.norm(ref_g))
            rows.append(dict(kernel=name, order=order, depth=fmm.config.depth, err_u=eu,
                             err_grad=eg, time_s=fmm.timings["total"]))
            print(f"{name:12s} P={order:2d} depth={fmm.config.depth} err_u={eu:.2e} "
                  f"err_grad={eg:.2e} time={fmm.timings['total']:.1f}s", flush=True)
    with open(args.out, "w") as fh:
        json.dump(dict(n=n, rows=rows), fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
