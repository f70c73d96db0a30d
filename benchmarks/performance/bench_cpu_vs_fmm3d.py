"""CPU FMM against FMM3D (fmm3dpy) on the same machine, same run (benchmarks.md target).

What it measures: N uniform points (default 10^5), alpha ~ N(0,1)^3, sigma = h =
N^(-1/3), tol 1e-6, u and ∇u at the points.  FMM3D: the singular velocity and its
gradient through the vector potential (3 densities, potential gradients and Hessians;
FMM3D's Laplace kernel is 1/(4π r), the same convention as ours).  vortexsim: the CPU
``FMM`` with the singular and the Gaussian kernel, its first call (which builds the
translation operators) and a later one timed apart.  Wall-clock seconds of each, and
errors on 200 sampled targets against the float64 direct sum (``induced_velocity``).
fmm3dpy is a benchmark-only dependency (``pip install fmm3dpy``); without it the FMM3D
row is left out.

Usage::

    python benchmarks/bench_cpu_vs_fmm3d.py [--n 100000] [--tol 1e-6] [--label new]
    python benchmarks/bench_cpu_vs_fmm3d.py --n 2000                   # smoke test

Options: --n, --tol, --kernels (default singular gaussian), --out PATH, --label TEXT.

Output: JSON (default ``benchmarks/results/bench_cpu_vs_fmm3d_DATE[_LABEL].json``) and a
table printed last.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

import timing as T


def fmm3d_velocity(x, alpha, eps):
    """u and grad_u (singular) from FMM3D: ψ_c = Σ α_c/(4π r), u = ∇×ψ, ∂_d u_a = ε_abc ∂_d∂_b ψ_c."""
    import fmm3dpy
    out = fmm3dpy.lfmm3d(eps=eps, sources=np.ascontiguousarray(x.T),
                         charges=np.ascontiguousarray(alpha.T), nd=3, pg=3)
    g = out.grad            # (3 densities c, 3 directions b, N)
    h = out.hess            # (3, 6, N): xx, yy, zz, xy, xz, yz
    n = x.shape[0]
    hess = np.empty((3, 3, 3, n))                     # [c, d, b]
    idx = {(0, 0): 0, (1, 1): 1, (2, 2): 2, (0, 1): 3, (1, 0): 3, (0, 2): 4, (2, 0): 4,
           (1, 2): 5, (2, 1): 5}
    for (d, b), k in idx.items():
        hess[:, d, b] = h[:, k]
    u = np.stack([g[2, 1] - g[1, 2], g[0, 2] - g[2, 0], g[1, 0] - g[0, 1]], axis=1)
    grad = np.empty((n, 3, 3))
    for d in range(3):
        grad[:, 0, d] = hess[2, d, 1] - hess[1, d, 2]
        grad[:, 1, d] = hess[0, d, 2] - hess[2, d, 0]
        grad[:, 2, d] = hess[1, d, 0] - hess[0, d, 1]
    return u, grad


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--tol", type=float, default=1e-6)
    p.add_argument("--kernels", nargs="+", default=["singular", "gaussian"])
    p.add_argument("--out", default=None,
                   help="JSON path (default benchmarks/results/bench_cpu_vs_fmm3d_DATE[_LABEL].json)")
    p.add_argument("--label", default="", help="free text stored in the JSON and the file name")
    args = p.parse_args(argv)
    from vortexsim import FMM
    rng = np.random.default_rng(1)
    n = args.n
    x, alpha = rng.random((n, 3)), rng.normal(size=(n, 3))
    sigma = np.full(n, n ** (-1 / 3))
    sample = np.sort(rng.choice(n, min(n, 200), replace=False))
    refs = {}
    rows = []

    def record(name, kernel, run):
        t0 = time.perf_counter()
        u, g = run()
        t = time.perf_counter() - t0
        if kernel not in refs:
            refs[kernel] = T.reference(kernel, x, alpha, sigma, sample)
        eu, eg = T.errors(u, g, sample, refs[kernel])
        rows.append(dict(code=name, kernel=kernel, n=n, tol=args.tol, time_s=t, err_u=eu,
                         err_grad=eg, cores=os.cpu_count()))
        print(rows[-1], flush=True)

    try:
        import fmm3dpy  # noqa: F401
        record("FMM3D (fmm3dpy)", "singular", lambda: fmm3d_velocity(x, alpha, args.tol))
    except ImportError:
        print("fmm3dpy is not installed: no FMM3D row (pip install fmm3dpy)", flush=True)
    for kernel in args.kernels:
        # the first call builds and caches the M2L operators (once per evaluator and
        # order); every later call, e.g. each stage of a run, reuses them
        fmm = FMM(kernel, tol=args.tol, device="cpu")
        record("vortexsim CPU FMM, first call", kernel, lambda: fmm.evaluate(x, alpha, sigma))
        record("vortexsim CPU FMM", kernel, lambda: fmm.evaluate(x, alpha, sigma))
    peer = next((r["time_s"] for r in rows if r["code"].startswith("FMM3D")), None)
    summary = []
    for r in rows:
        target = met = None
        if peer is not None and r["kernel"] == "singular" and r["code"] == "vortexsim CPU FMM":
            target, met = f"≤ FMM3D {peer:.1f} s", bool(r["time_s"] <= peer)
        summary.append(dict(what=f"{r['code']} {r['kernel']} N={n} tol {args.tol:g}",
                            ms=r["time_s"] * 1e3, err_u=r["err_u"], err_grad=r["err_grad"],
                            target=target, met=met))
    T.write_json(args, "bench_cpu_vs_fmm3d", "cpu", dict(n=n, tol=args.tol, rows=rows), summary)
    print("\n| code | kernel | N | tol | time (s) | err u | err ∇u | cores |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['code']} | {r['kernel']} | {r['n']} | {r['tol']:g} | {r['time_s']:.1f} | "
              f"{r['err_u']:.1e} | {r['err_grad']:.1e} | {r['cores']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
