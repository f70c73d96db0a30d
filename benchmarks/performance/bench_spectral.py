"""Time and error of the periodic spectral sum (``vortexsim.summation.spectral.SpectralSum``) on the
Taylor–Green lattice.

For the n³ Taylor–Green lattice of the box [0, 2π)³ (α = ω h³, σ = h) it times u and ∇u
at the elements (their own free-space part left out, as in a time step): on the GPU the
own deterministic NUFFT (CuPy arrays), on the CPU FINUFFT.  Median of ``--repeats`` calls
after one warm-up, synchronized (CUDA events).  Also the stages on the GPU (type 1 alone,
u alone) and the memory CuPy's pool held after the call (its peak, the pool keeps its
blocks).  The error is against the lattice's exact Fourier series (the Taylor–Green modes
and their aliases k₀ + n a, |a_i| ≤ 2, summed directly) at ``--sample`` elements, the
element's own gradient added back: the largest difference over the largest value (the
tests' measure) and the relative L2 error.

Usage::

    python benchmarks/performance/bench_spectral.py [--n 64 128] [--tol 1e-6] [--device gpu] [--label x]

Output: JSON (default ``benchmarks/results/bench_spectral_DATE[_LABEL].json``) and a table.
"""
from __future__ import annotations

import argparse
import itertools
import math

import numpy as np

import timing as T

L = 2.0 * math.pi


def lattice_series(y, n, sigma, reach=2):
    """u (M, 3), ∇u (M, 3, 3) of the n³ Taylor–Green lattice's blobs at ``y`` (M, 3): the
    exact Fourier series over the modes k₀ = (±1, ±1, ±1) and their aliases k₀ + n a."""
    u = np.zeros((len(y), 3))
    g = np.zeros((len(y), 3, 3))
    for s in itertools.product((-1, 1), repeat=3):
        k0 = np.array(s, dtype=np.float64)
        # the Taylor–Green u = (sin x cos y cos z, −cos x sin y cos z, 0): its mode at k0
        u_hat = np.array([-1j * s[0], 1j * s[1], 0.0]) / 8.0
        w_hat = 1j * np.cross(k0, u_hat)
        for a in itertools.product(range(-reach, reach + 1), repeat=3):
            kv = k0 + n * np.array(a)
            k2 = kv @ kv
            uh = 1j * np.cross(kv, w_hat) / k2 * math.exp(-0.5 * k2 * sigma ** 2)
            e = np.exp(1j * (y @ kv))
            u += (e[:, None] * uh).real
            g += (e[:, None, None] * (1j * uh[:, None] * kv[None, :])).real
    return u, g


def measure(n, tol, device, repeats, sample):
    from vortexsim.cases.taylor_green import taylor_green_lattice
    from vortexsim.summation.spectral import SpectralSum, self_gradient
    x_h, w, h = taylor_green_lattice(n)
    a_h = w * h ** 3
    x, alpha = T.to_device(x_h, device), T.to_device(a_h, device)
    T.free_gpu_memory(device)
    ss = SpectralSum(L, h, tol)
    row = {"n": n, "elements": n ** 3, "sigma": h, "tol": tol, "m_max": ss.m_max,
           "device": device}

    def full():
        return ss.evaluate(x, alpha, check=False)
    u, g = full()                                              # warm-up (compile, plans)
    T.synchronize(device)
    if device == "gpu":
        import cupy as cp
        pool = cp.get_default_memory_pool()
        row["pool_gb"] = pool.total_bytes() / 1e9
        own = ss.own_nufft(cp)
        row.update(fine_grid=own.nufft.n, kernel_width=own.nufft.w)
        t = own.nufft_points(x)
        row["type1_ms"] = 1e3 * T.time_median(lambda: own.nufft_modes(t, alpha), device, repeats)
        row["u_only_ms"] = 1e3 * T.time_median(
            lambda: ss.evaluate(x, alpha, gradient=False, check=False), device, repeats)
    row["u_grad_ms"] = 1e3 * T.time_median(full, device, repeats, warmup=0)
    u, g = T.to_host(u), T.to_host(g)
    pick = np.random.default_rng(0).choice(n ** 3, size=min(sample, n ** 3), replace=False)
    u_ref, g_ref = lattice_series(x_h[pick], n, h)
    g_full = g[pick] + self_gradient(a_h[pick], h)             # the own blob back in
    row["err_u_max"] = float(np.abs(u[pick] - u_ref).max() / np.abs(u_ref).max())
    row["err_grad_max"] = float(np.abs(g_full - g_ref).max() / np.abs(g_ref).max())
    row["err_u_l2"] = T.rel_l2(u[pick], u_ref)
    row["err_grad_l2"] = T.rel_l2(g_full, g_ref)
    T.free_gpu_memory(device)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--sample", type=int, default=2000, help="elements checked")
    T.add_common_options(ap, "bench_spectral")
    args = ap.parse_args()
    rows = []
    for n in args.n:
        row = measure(n, args.tol, args.device, args.repeats, args.sample)
        rows.append(row)
        print(f"{n}^3 tol {args.tol:g}: u and grad u {row['u_grad_ms']:.1f} ms"
              + (f" (type 1 {row['type1_ms']:.1f} ms, u only {row['u_only_ms']:.1f} ms,"
                 f" fine grid {row['fine_grid']}^3, w {row['kernel_width']},"
                 f" pool {row['pool_gb']:.2f} GB)" if "type1_ms" in row else "")
              + f"; max error u {row['err_u_max']:.2e}, grad {row['err_grad_max']:.2e}",
              flush=True)
    T.write_json(args, "bench_spectral", args.device, {"rows": rows}, summary=[
        {"what": f"spectral u+grad TG {r['n']}^3 sigma=h tol {r['tol']:g}",
         "ms": r["u_grad_ms"], "err_u": r["err_u_max"], "err_grad": r["err_grad_max"],
         "target": f"err <= {r['tol']:g}",
         "met": r["err_u_max"] <= r["tol"] and r["err_grad_max"] <= r["tol"]} for r in rows])
    T.print_summary([T.out_path(args, "bench_spectral")])


if __name__ == "__main__":
    main()
