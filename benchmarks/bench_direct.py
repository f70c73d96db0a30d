"""Benchmark of the direct sum (u and grad_u) on the GPU, per benchmarks.md.

N = M points uniform in the unit cube, alpha ~ N(0, 1)^3, sigma = 0.1 (and 0.01).
For each kernel and precision: accuracy on sampled targets against the float64
NumPy direct sum (the specification), then the median of >= 5 timed runs after
warm-up (CUDA events).  Pairs/s = N*M / time.  Prints a table and writes JSON.

    python benchmarks/bench_direct.py --n 131072 --out results.json [--sweep]

``--sweep`` times every launch shape (threads per block x targets per thread)
and reports the best; the defaults in vortexsim/kernels/direct.py come from it.
"""
from __future__ import annotations

import argparse
import datetime
import json
import sys

import numpy as np

from _timing import time_gpu

from vortexsim.kernels.cutoff import get_kernel
from vortexsim.kernels.direct import (DEFAULT_LAUNCH, DirectLaunchConfig, direct_sum_at_elements,
                                      direct_sum_cuda)

TARGETS = {("gaussian", "float64"): 1.0e11, ("gaussian", "float32"): 3.0e11,
           ("algebraic", "float64"): 2.7e11, ("algebraic", "float32"): 6.0e11}
SHAPES = [(128, 1), (256, 1), (128, 2), (256, 2)]


def rel_l2(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def main(argv=None):
    import cupy as cp
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=131072)
    p.add_argument("--sigmas", type=float, nargs="+", default=[0.1, 0.01])
    p.add_argument("--kernels", nargs="+",
                   default=["gaussian", "algebraic", "winckelmans", "polynomial", "singular"])
    p.add_argument("--precisions", nargs="+", default=["float64", "float32"])
    p.add_argument("--samples", type=int, default=128, help="targets checked against NumPy")
    p.add_argument("--sweep", action="store_true", help="time all launch shapes")
    p.add_argument("--out", default="bench_direct.json")
    args = p.parse_args(argv)

    rng = np.random.default_rng(20261122)
    n = args.n
    x = rng.random((n, 3))
    alpha = rng.normal(size=(n, 3))
    sample = np.sort(rng.choice(n, size=min(args.samples, n), replace=False))
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    device = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    rows = []
    for sigma_value in args.sigmas:
        sigma = np.full(n, sigma_value)
        for kname in args.kernels:
            k = get_kernel(kname)
            # reference: float64 NumPy on sampled targets, self pair excluded
            ref_u, ref_g = direct_sum_at_elements(k, x, alpha, sigma, sample)
            for prec in args.precisions:
                dt = np.dtype(prec)
                xd, ad, sd = (cp.asarray(a, dtype=dt) for a in (x, alpha, sigma))
                shapes = SHAPES if args.sweep else [DEFAULT_LAUNCH.get((kname, prec),
                                                                       DirectLaunchConfig())]
                shapes = [s if isinstance(s, DirectLaunchConfig) else DirectLaunchConfig(*s)
                          for s in shapes]
                timings = {}
                for shape in shapes:
                    def run(shape=shape):
                        return direct_sum_cuda(k, xd, ad, sd, xd, exclude_self=True, launch=shape)
                    timings[(shape.block, shape.targets_per_thread)] = time_gpu(run)
                best = min(timings, key=timings.get)
                u, g = direct_sum_cuda(k, xd, ad, sd, xd, exclude_self=True,
                                       launch=DirectLaunchConfig(*best))
                err_u = rel_l2(u[sample].get().astype(np.float64), ref_u)
                err_g = rel_l2(g[sample].get().astype(np.float64), ref_g)
                t = timings[best]
                rate = n * n / t
                target = TARGETS.get((kname, prec)) if sigma_value == 0.1 else None
                rows.append(dict(device=device, kernel=kname, precision=prec, sigma=sigma_value,
                                 n=n, m=n, time_s=t, pairs_per_s=rate, err_u=err_u, err_grad=err_g,
                                 launch=list(best), target=target,
                                 met=None if target is None else rate >= target,
                                 sweep={f"{b}x{tp}": v for (b, tp), v in timings.items()}))
                print(f"{kname:12s} {prec:8s} sigma={sigma_value:<5} {t * 1e3:9.2f} ms "
                      f"{rate:9.3e} pairs/s  err_u={err_u:.2e} err_grad={err_g:.2e} "
                      f"launch={best} " + ("" if target is None else
                                           f"target {target:.1e} {'MET' if rate >= target else 'MISSED'}"),
                      flush=True)
                del xd, ad, sd
                cp.get_default_memory_pool().free_all_blocks()
    meta = dict(date=datetime.date.today().isoformat(), device=device, n=n, rows=rows)
    with open(args.out, "w") as fh:
        json.dump(meta, fh, indent=1)
    print(f"\n## bench_direct {meta['date']} on {device}, N = M = {n}, u + grad_u\n")
    print("| kernel | precision | sigma | time (ms) | pairs/s | err u | err grad u | launch | target |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        tgt = "" if r["target"] is None else f"≥ {r['target']:.1e} {'met' if r['met'] else 'MISSED'}"
        print(f"| {r['kernel']} | {r['precision']} | {r['sigma']} | {r['time_s'] * 1e3:.2f} | "
              f"{r['pairs_per_s']:.3e} | {r['err_u']:.1e} | {r['err_grad']:.1e} | "
              f"{r['launch'][0]}x{r['launch'][1]} | {tgt} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
