"""The periodic FMM against the free-space FMM of the same elements, and its error
against the spectral sum (the H100 target: periodic ≤ 1.10 × free space at 2^20
uniform elements, tol 1e-6).

Input (fixed seed): N elements uniform in the unit box [0, 1)³, α ~ N(0, 1)³ with its
mean subtracted (Σα = 0 to round-off), σ = ``--sigma-h`` × h, h = N^(−1/3).  Per run:

* the median time of ``--repeats`` evaluations at the elements (u and ∇u) of the
  periodic FMM (``FMM.evaluate(..., box=1)``) and of the free-space FMM (same
  evaluator settings, same arrays), after one warm-up each, alternated so that clock
  drift hits both alike (CUDA events on the GPU, synchronized); their ratio;
* one profiled evaluation of each (stage breakdown, ``FMM(profile=True).timings``);
* the periodic FMM's relative L2 error of u and ∇u on ``--samples`` sampled elements
  against the spectral sum at tol 1e-10 (exact to its tolerance for the Gaussian; on the
  CPU with FINUFFT where it is installed, else on ``--device`` with the own NUFFT),
  each element's own free-space pair left out as in the FMM;
* the spectral sum's own time and error at ``--tol`` on the same input, on ``--device``
  (all elements, u and ∇u; the median of ``--spectral-repeats`` after a warm-up;
  ``--no-spectral-time`` skips it).

Usage::

    python benchmarks/performance/bench_periodic.py                       # H100: 2^20, tol 1e-6
    python benchmarks/performance/bench_periodic.py --device cpu --n 4096 --tol 1e-3   # smoke test

Output: JSON (default ``benchmarks/results/bench_periodic_DATE[_LABEL].json``).
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import timing as T


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=1 << 20, help="elements (default 2^20)")
    p.add_argument("--tol", type=float, default=1e-6)
    p.add_argument("--precision", default="float64", choices=("float64", "float32"))
    p.add_argument("--sigma-h", type=float, default=1.0, help="σ / h (default 1)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--samples", type=int, default=2000)
    p.add_argument("--no-spectral-time", action="store_true",
                   help="skip timing the spectral sum on all elements")
    p.add_argument("--spectral-repeats", type=int, default=3)
    T.add_common_options(p, "bench_periodic")
    args = p.parse_args(argv)

    from vortexsim.fmm.evaluator import FMM
    from vortexsim.summation.spectral import SpectralSum, self_gradient

    device = args.device
    rng = np.random.default_rng(0)
    n = args.n
    x = rng.random((n, 3))
    alpha = rng.normal(size=(n, 3))
    alpha -= alpha.mean(axis=0)
    sigma = args.sigma_h * n ** (-1.0 / 3.0)
    sample = rng.choice(n, min(args.samples, n), replace=False)
    xd, ad = T.to_device(x, device), T.to_device(alpha, device)
    sd = T.to_device(np.full(n, sigma), device)

    opts = dict(tol=args.tol, precision=args.precision, device=device)
    periodic, free = FMM("gaussian", **opts), FMM("gaussian", **opts)
    calls = {"periodic": lambda: periodic.evaluate(xd, ad, sd, box=1.0),
             "free": lambda: free.evaluate(xd, ad, sd)}
    timer = T.times_on(device)
    out = {}
    for name, fn in calls.items():                                 # warm-up
        out[name] = fn()
    T.synchronize(device)
    times = {name: [] for name in calls}
    for _ in range(args.repeats):                                  # alternated
        for name, fn in calls.items():
            times[name] += timer(fn, 1)
    median = {name: float(np.median(t)) for name, t in times.items()}
    configs = {"periodic": periodic.config, "free": free.config}
    stages = {}
    for name, kw in (("periodic", {"box": 1.0}), ("free", {})):
        prof = FMM("gaussian", profile=True, **opts)
        prof.evaluate(xd, ad, sd, **kw)
        prof.evaluate(xd, ad, sd, **kw)
        stages[name] = prof.timings

    # the reference: the spectral sum at 1e-10 at the sampled elements (own pair out)
    try:
        import finufft  # noqa: F401
        ref_device = "cpu"
    except ImportError:
        ref_device = device
    t0 = time.perf_counter()
    u_ref, g_ref = (T.to_host(a) for a in SpectralSum(1.0, sigma, 1e-10).evaluate(
        T.to_device(x, ref_device), T.to_device(alpha, ref_device),
        T.to_device(x[sample], ref_device)))
    g_ref -= self_gradient(alpha[sample], sigma)
    t_ref = time.perf_counter() - t0
    T.free_gpu_memory(device)
    u, g = (T.to_host(a)[sample] for a in out["periodic"])
    err_u, err_g = T.rel_l2(u, u_ref), T.rel_l2(g, g_ref)
    uf, gf = (T.to_host(a)[sample] for a in out["free"])
    spectral = None
    if not args.no_spectral_time:
        ss = SpectralSum(1.0, sigma, args.tol)
        res = {}

        def spectral_call():
            res["out"] = ss.evaluate(xd, ad)
        t_spec = T.time_median(spectral_call, device, repeats=args.spectral_repeats)
        us, gs = (T.to_host(a)[sample] for a in res["out"])
        spectral = dict(seconds=t_spec, m_max=ss.m_max, device=device,
                        err_u=T.rel_l2(us, u_ref), err_grad=T.rel_l2(gs, g_ref))

    ratio = median["periodic"] / median["free"]
    payload = dict(n=n, tol=args.tol, precision=args.precision, sigma=sigma,
                   sigma_h=args.sigma_h, samples=len(sample), times=times, median=median,
                   ratio=ratio, configs={k: str(v) for k, v in configs.items()},
                   stages=stages, err_u=err_u, err_grad=err_g,
                   # how far the free-space field is from the periodic one (context)
                   free_vs_periodic_u=T.rel_l2(uf, u_ref), reference_seconds=t_ref,
                   reference_device=ref_device,
                   spectral=spectral)
    tag = f"{n} uniform, tol {args.tol:g}, {args.precision}"
    summary = [dict(what=f"periodic FMM {tag}", ms=1e3 * median["periodic"], err_u=err_u,
                    err_grad=err_g, target=f"<= 1.10 x free ({ratio:.3f})",
                    met=bool(ratio <= 1.10 and err_u <= args.tol and err_g <= 10 * args.tol)),
               dict(what=f"free-space FMM {tag}", ms=1e3 * median["free"], err_u=None,
                    err_grad=None, target="", met=None)]
    if spectral is not None:
        summary.append(dict(what=f"spectral sum ({device}) {n}, tol {args.tol:g}",
                            ms=1e3 * spectral["seconds"], err_u=spectral["err_u"],
                            err_grad=spectral["err_grad"], target="", met=None))
    path = T.write_json(args, "bench_periodic", device, payload, summary)
    print(f"periodic {1e3 * median['periodic']:.1f} ms  free {1e3 * median['free']:.1f} ms  "
          f"ratio {ratio:.3f}  err u {err_u:.2e}  err grad {err_g:.2e}  ({configs['periodic']})")
    print("stages periodic:", {k: round(1e3 * v, 2) for k, v in stages["periodic"].items()})
    print("stages free:    ", {k: round(1e3 * v, 2) for k, v in stages["free"].items()})
    if spectral is not None:
        print(f"spectral ({device}) {spectral['seconds']:.3f} s  m_max {spectral['m_max']}  "
              f"err u {spectral['err_u']:.2e}  err grad {spectral['err_grad']:.2e}")
    print("wrote", path)


if __name__ == "__main__":
    main()
