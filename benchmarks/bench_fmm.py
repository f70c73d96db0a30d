"""Benchmark of the FMM on the GPU (u and grad_u), per benchmarks.md.

Standard inputs (fixed seeds): ``uniform`` (N points in the unit cube, alpha ~ N(0,1)^3,
sigma = h = N^(-1/3) or 2h), ``rings`` (two coaxial rings of radius 0.3 with elements in
a Gaussian core, plus M tracers in a Gaussian cloud), ``clustered`` (Plummer cloud).
For each case: the relative L2 error of u and grad_u on sampled targets against the
float64 CUDA direct sum (tested against NumPy to 1e-12), the median of >= 5 timed evaluations after warm-up (CUDA
events), the stage breakdown of one profiled evaluation, and the direct-sum time
for the same input (timed once, or estimated from the measured pairs/s of the
direct kernel on a subset when marked "est").  Prints a table and writes JSON.

    python benchmarks/bench_fmm.py --out bench_fmm.json [--cases uniform-gauss-1e-6 ...]
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import sys

import numpy as np

from _timing import time_gpu

from vortexsim.fmm.evaluator import FMM
from vortexsim.inputs import clustered, rings, uniform
from vortexsim.kernels.cutoff import get_kernel
from vortexsim.kernels.direct import direct_sum_at_elements, direct_sum_cuda


CASES = {
    # name: (input, N, M, kernel, tol, precision, sigma/h, target ms)
    "uniform-gauss-1e-6": ("uniform", 1 << 20, None, "gaussian", 1e-6, "float64", 1.0, 100),
    "uniform-gauss-1e-6-2h": ("uniform", 1 << 20, None, "gaussian", 1e-6, "float64", 2.0, None),
    "uniform-alg-1e-6": ("uniform", 1 << 20, None, "algebraic", 1e-6, "float64", 1.0, None),
    "uniform-winck-1e-6": ("uniform", 1 << 20, None, "winckelmans", 1e-6, "float64", 1.0, None),
    "uniform-gauss-f32-1e-4": ("uniform", 1 << 20, None, "gaussian", 1e-4, "float32", 1.0, 40),
    "rings-gauss-1e-6": ("rings", 1 << 15, 1 << 20, "gaussian", 1e-6, "float64", None, 15),
    "clustered-gauss-1e-6": ("clustered", 1 << 20, None, "gaussian", 1e-6, "float64", 1.0, None),
    # σ from the spacing at the Plummer half-mass radius (≈ 1.3 × 0.05): σ = h_uniform
    # above puts ~6.6e5 sources within ρ*σ of each core point (see RESULTS.md)
    "clustered-gauss-1e-6-local": ("clustered", 1 << 20, None, "gaussian", 1e-6, "float64",
                                   "half-mass", None),
    # tol 1e-9: the wide separation (M2L between boxes two apart, P = 15)
    "uniform-gauss-1e-9": ("uniform", 1 << 20, None, "gaussian", 1e-9, "float64", 1.0, None),
    "uniform-singular-1e-9": ("uniform", 1 << 20, None, "singular", 1e-9, "float64", 1.0,
                              None),
    "rings-gauss-1e-9": ("rings", 1 << 15, 1 << 20, "gaussian", 1e-9, "float64", None, None),
    "uniform-2^24-f32-1e-4": ("uniform", 1 << 24, None, "gaussian", 1e-4, "float32", 1.0, 1000),
    # the same with a 5³ near-field stencil of half-width leaves (FMM(near_radius=2))
    "uniform-gauss-1e-6-r2": ("uniform", 1 << 20, None, "gaussian", 1e-6, "float64", 1.0, 100),
    "uniform-gauss-f32-1e-4-r2": ("uniform", 1 << 20, None, "gaussian", 1e-4, "float32", 1.0, 40),
}


def case_arrays(name, rng):
    """Host inputs (float64) of a case: x, alpha (N, 3), sigma (N,), tracers (M, 3) or None."""
    kind, n, m, _, _, _, sh, _ = CASES[name]
    if kind == "rings":
        x, alpha, tracers = rings(n, m, rng)
        sigma_val = 0.01
    else:
        x, alpha, tracers = uniform(n, rng) if kind == "uniform" else clustered(n, rng)
        if sh == "half-mass":     # spacing of n/2 points in the half-mass sphere
            r_half = 1.305 * 0.05
            sigma_val = (0.5 * n / (4 / 3 * math.pi * r_half ** 3)) ** (-1 / 3)
        else:
            sigma_val = sh * n ** (-1 / 3)
    return x, alpha, np.full(n, sigma_val), tracers


def gpu_case(name, rng, **fmm_options):
    """A case on the GPU: its host arrays (:func:`case_arrays`), the same as CuPy arrays
    in the case's precision, and an FMM evaluator for it (``fmm_options`` added)."""
    import cupy as cp
    _, _, _, kname, tol, prec, _, _ = CASES[name]
    host = case_arrays(name, rng)
    dt = np.dtype(prec)
    dev = tuple(None if a is None else cp.asarray(a, dtype=dt) for a in host)
    return host, dev, FMM(kname, tol=tol, precision=prec, device="gpu", **fmm_options)


STAGES = ("sigma", "root", "depth", "setup", "tree", "near", "p2m", "m2m", "m2l", "l2l", "l2p")


def main(argv=None):
    import cupy as cp
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", nargs="+", default=list(CASES))
    p.add_argument("--samples", type=int, default=200)
    p.add_argument("--direct-max-pairs", type=float, default=2e12,
                   help="time the direct sum outright up to this many pairs, else estimate")
    p.add_argument("--out", default="bench_fmm.json")
    p.add_argument("--leaf-size", type=int, default=None,
                   help="force the leaf-size depth rule (default: the FMM's cost model)")
    p.add_argument("--tree", choices=("auto", "uniform", "adaptive"), default="auto",
                   help="FMM(tree=...): chosen per input (default), level-uniform or adaptive")
    args = p.parse_args(argv)
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    device = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    rows = []
    for name in args.cases:
        kind, n, m, kname, tol, prec, sh, target = CASES[name]
        rng = np.random.default_rng(sum(map(ord, name.removesuffix("-r2"))))
        (x, alpha, sigma, tracers), (xd, ad, sd, td), fmm = gpu_case(
            name, rng, leaf_size=args.leaf_size, tree=args.tree,
            near_radius=2 if name.endswith("-r2") else None)
        kern = get_kernel(kname)
        t_fmm = time_gpu(lambda: fmm.evaluate(xd, ad, sd, td))
        fmm.profile = True
        u, g = fmm.evaluate(xd, ad, sd, td)
        stages = dict(fmm.timings)
        fmm.profile = False
        n_t = n if tracers is None else tracers.shape[0]
        sample = np.sort(rng.choice(n_t, size=min(args.samples, n_t), replace=False))
        x64, a64, s64 = (cp.asarray(a) for a in (x, alpha, sigma))   # float64 reference
        if tracers is None:
            ud, gd = direct_sum_at_elements(kern, x64, a64, s64, sample)
        else:
            ud, gd = direct_sum_cuda(kern, x64, a64, s64, cp.asarray(tracers[sample]))
        ud, gd = ud.get(), gd.get()
        del x64, a64, s64
        uf, gf = u[sample].get().astype(np.float64), g[sample].get().astype(np.float64)
        err_u = float(np.linalg.norm(uf - ud) / np.linalg.norm(ud))
        err_g = float(np.linalg.norm(gf - gd) / np.linalg.norm(gd))
        pairs = float(n) * n_t
        if pairs <= args.direct_max_pairs:
            tdd = td if td is not None else xd
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            direct_sum_cuda(kern, xd[:1024], ad[:1024], sd[:1024], tdd[:1024])   # warm-up
            start.record()
            direct_sum_cuda(kern, xd, ad, sd, tdd, exclude_self=tracers is None)
            stop.record()
            stop.synchronize()
            t_direct, how = cp.cuda.get_elapsed_time(start, stop) * 1e-3, "timed"
        else:
            k = 1 << 17
            sub = time_gpu(lambda: direct_sum_cuda(kern, xd[:k], ad[:k], sd[:k], xd[:k]), 3)
            t_direct, how = sub * pairs / float(k * k), "est"
        row = dict(case=name, device=device, n=n, m=n_t, kernel=kname, tol=tol, precision=prec,
                   sigma=float(sigma[0]), order=fmm.config.order, depth=fmm.config.depth,
                   tree=fmm.config.tree, leaf_size=fmm.config.leaf_size,
                   err_u=err_u, err_grad=err_g, time_s=t_fmm, stages=stages,
                   direct_s=t_direct, direct_how=how, target_ms=target,
                   met=None if target is None else (t_fmm * 1e3 <= target and err_u <= tol
                                                    and err_g <= 10 * tol))
        rows.append(row)
        print(json.dumps(row), flush=True)
        del xd, ad, sd, td, u, g
        cp.get_default_memory_pool().free_all_blocks()
    meta = dict(date=datetime.date.today().isoformat(), device=device, rows=rows)
    with open(args.out, "w") as fh:
        json.dump(meta, fh, indent=1)
    print(f"\n## bench_fmm {meta['date']} on {device}\n")
    print("| case | N | M | kernel | prec | tol | P | depth | err u | err ∇u | FMM ms | "
          "stages ms (sigma/root/depth/setup/tree/near/p2m/m2m/m2l/l2l/l2p) | direct ms | target |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        st = "/".join(f"{r['stages'].get(k, 0) * 1e3:.1f}"
                      for k in STAGES)
        tgt = "" if r["target_ms"] is None else (
            f"≤ {r['target_ms']} ms: {'met' if r['met'] else 'MISSED'}")
        print(f"| {r['case']} | {r['n']} | {r['m']} | {r['kernel']} | {r['precision']} | "
              f"{r['tol']:g} | {r['order']} | {r['depth']} | {r['err_u']:.1e} | "
              f"{r['err_grad']:.1e} | {r['time_s'] * 1e3:.1f} | {st} | "
              f"{r['direct_s'] * 1e3:.0f} ({r['direct_how']}) | {tgt} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
