"""Direct sum (u and ∇u, all pairs) through ``vortexsim.induced_velocity``, GPU or CPU.

What it measures: for each sigma, kernel and precision, the median time of
``induced_velocity(x, alpha, sigma, kernel=..., method="direct", precision=...)`` at the
elements themselves (self pairs excluded) after warm-up (CUDA events on the GPU, wall
clock on the CPU; median of ``--repeats``), pairs/s = N·N / time, and the relative L2
error of u and ∇u on ``--samples`` sampled targets against the float64 NumPy direct sum
(the specification).  Inputs (docs/benchmarks.md): N points uniform in the unit cube,
alpha ~ N(0, 1)^3, sigma = 0.1 (most pairs inside the cutoff's range, as in an FMM near
field) and 0.01 (most pairs far).  The targets of benchmarks.md are judged at sigma = 0.1.

Usage::

    python benchmarks/performance/bench_direct.py [--n 131072] [--kernels gaussian algebraic]
        [--precisions float64 float32] [--sigmas 0.1 0.01] [--label new]
    python benchmarks/performance/bench_direct.py --device cpu --n 2000        # smoke test

Options: --n, --sigmas, --kernels, --precisions, --repeats (default 5), --samples
(default 128), --device gpu|cpu, --out PATH, --label TEXT.

Output: JSON (default ``benchmarks/results/bench_direct_DATE[_LABEL].json``) with one row
per (sigma, kernel, precision), and a table printed last.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

import timing as T

#: pairs/s targets on one H100 at sigma = 0.1 (benchmarks.md; algebraic: the first probe)
TARGETS = {("gaussian", "float64"): 1.0e11, ("gaussian", "float32"): 3.0e11,
           ("algebraic", "float64"): 2.7e11, ("algebraic", "float32"): 6.0e11}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=131072)
    p.add_argument("--sigmas", type=float, nargs="+", default=[0.1, 0.01])
    p.add_argument("--kernels", nargs="+",
                   default=["gaussian", "algebraic", "winckelmans", "polynomial", "singular"])
    p.add_argument("--precisions", nargs="+", choices=("float64", "float32"),
                   default=["float64", "float32"])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--samples", type=int, default=128, help="targets checked against NumPy")
    T.add_common_options(p, "bench_direct")
    args = p.parse_args(argv)
    from vortexsim import induced_velocity
    dev = args.device
    rng = np.random.default_rng(20261122)
    n = args.n
    x = rng.random((n, 3))
    alpha = rng.normal(size=(n, 3))
    sample = np.sort(rng.choice(n, size=min(args.samples, n), replace=False))
    on_gpu_target = dev == "gpu"
    rows, summary = [], []
    for sigma_value in args.sigmas:
        sigma = np.full(n, sigma_value)
        for kname in args.kernels:
            ref = T.reference(kname, x, alpha, sigma, sample, device="cpu")   # NumPy float64
            for prec in args.precisions:
                dt = np.dtype(prec)
                xd, ad, sd = (T.to_device(a, dev, dt) for a in (x, alpha, sigma))

                def run():
                    return induced_velocity(xd, ad, sd, kernel=kname, method="direct",
                                            precision=prec, device=dev)
                u, g = run()                                   # warm-up (compiles)
                err_u, err_g = T.errors(u, g, sample, ref)
                del u, g
                t = T.time_median(run, dev, repeats=args.repeats, warmup=0)
                rate = n * n / t
                target = TARGETS.get((kname, prec)) if sigma_value == 0.1 and on_gpu_target \
                    else None
                met = None if target is None else bool(rate >= target)
                rows.append(dict(kernel=kname, precision=prec, sigma=sigma_value, n=n, m=n,
                                 time_s=t, pairs_per_s=rate, err_u=err_u, err_grad=err_g,
                                 target_pairs_per_s=target, met=met))
                summary.append(dict(what=f"direct {kname} {prec} σ={sigma_value} N={n} "
                                    f"({rate:.2e} pairs/s)", ms=t * 1e3, err_u=err_u,
                                    err_grad=err_g, met=met,
                                    target=None if target is None else f"≥ {target:.1e} pairs/s"))
                print(f"{kname:12s} {prec:8s} sigma={sigma_value:<5} {t * 1e3:9.2f} ms "
                      f"{rate:9.3e} pairs/s  err_u={err_u:.2e} err_grad={err_g:.2e}", flush=True)
                del xd, ad, sd
                T.free_gpu_memory(dev)
    T.write_json(args, "bench_direct", dev, dict(n=n, repeats=args.repeats, rows=rows), summary)
    print(f"\n## bench_direct on {T.device_name(dev)}, N = M = {n}, u + ∇u"
          + (f" ({args.label})" if args.label else "") + "\n")
    print("| kernel | precision | sigma | time (ms) | pairs/s | err u | err ∇u | target |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        tgt = "" if r["target_pairs_per_s"] is None else (
            f"≥ {r['target_pairs_per_s']:.1e} {'met' if r['met'] else 'MISSED'}")
        print(f"| {r['kernel']} | {r['precision']} | {r['sigma']} | {r['time_s'] * 1e3:.2f} | "
              f"{r['pairs_per_s']:.3e} | {r['err_u']:.1e} | {r['err_grad']:.1e} | {tgt} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
