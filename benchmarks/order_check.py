"""Errors of the GPU FMM at given expansion orders (to check the tol → order tables).

    python benchmarks/order_check.py --kernel singular --tol 1e-6 --orders 14 16 [--n 1048576]
    python benchmarks/order_check.py --kernel gaussian --tol 1e-9 --separation 2 \
        --orders 13 14 --depths 4 5 [--sigma-h 2] [--profile]

Uniform points (benchmarks.md `uniform`, σ = sigma-h × h), errors relative L2 of u and
∇u on 200 sampled targets against the float64 CUDA direct sum, and the time of one
evaluation (the second of two; stage times with --profile, from a third, synchronized
call).  ``--separation 2`` is the wide separation (tol < 1e-6).
"""
import argparse
import sys
import time

import numpy as np

from vortexsim.fmm.evaluator import FMM
from vortexsim.inputs import uniform
from vortexsim.kernels.cutoff import get_kernel
from vortexsim.kernels.direct import direct_sum_at_elements


def main(argv=None):
    import cupy as cp
    p = argparse.ArgumentParser()
    p.add_argument("--kernel", default="singular")
    p.add_argument("--tol", type=float, default=1e-6)
    p.add_argument("--orders", type=int, nargs="+", default=[14, 16])
    p.add_argument("--depths", type=int, nargs="+", default=[None])
    p.add_argument("--n", type=int, default=1 << 20)
    p.add_argument("--sigma-h", type=float, default=1.0)
    p.add_argument("--separation", type=int, default=None)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    n = args.n
    x, alpha, _ = uniform(n, rng)
    sigma = np.full(n, args.sigma_h * n ** (-1 / 3))
    sample = rng.choice(n, 200, replace=False)
    xd, ad, sd = (cp.asarray(a) for a in (x, alpha, sigma))
    ud, gd = (a.get() for a in direct_sum_at_elements(get_kernel(args.kernel), xd, ad, sd,
                                                       sample))
    for depth in args.depths:
        for order in args.orders:
            fmm = FMM(args.kernel, tol=args.tol, order=order, device="gpu",
                      separation=args.separation)
            fmm.evaluate(xd, ad, sd, depth=depth)
            cp.cuda.Device().synchronize()
            t0 = time.perf_counter()
            u, g = fmm.evaluate(xd, ad, sd, depth=depth)
            cp.cuda.Device().synchronize()
            t = time.perf_counter() - t0
            u, g = u.get()[sample], g.get()[sample]
            stages = ""
            if args.profile:
                fmm.profile = True
                fmm.evaluate(xd, ad, sd, depth=depth)
                fmm.profile = False
                stages = " " + " ".join(f"{k} {v * 1e3:.1f}" for k, v in fmm.timings.items()
                                        if k in ("tree", "near", "p2m", "m2m", "m2l", "l2l",
                                                 "l2p", "total"))
            print(f"{args.kernel} n={n} sep={fmm.separation} P={order} "
                  f"depth={fmm.config.depth}: err u "
                  f"{np.linalg.norm(u - ud) / np.linalg.norm(ud):.2e}, err grad "
                  f"{np.linalg.norm(g - gd) / np.linalg.norm(gd):.2e}, {t * 1e3:.1f} ms"
                  f"{stages}, peak {cp.get_default_memory_pool().total_bytes() / 2**30:.1f} GiB",
                  flush=True)
            del fmm
            cp.get_default_memory_pool().free_all_blocks()
    return 0


if __name__ == "__main__":
    sys.exit(main())
