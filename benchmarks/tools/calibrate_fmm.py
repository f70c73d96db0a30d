"""Errors of the FMM by expansion order: the data behind the tol → order tables.

What it measures: on uniform inputs (N points in the unit cube, alpha ~ N(0,1)^3,
sigma = ``--sigma-h`` × N^(-1/3), sources = targets), for each kernel, each order P of
``--orders`` and each depth of ``--depths`` (default: the FMM's own choice), the relative
L2 errors of u and ∇u on ``--samples`` sampled targets against the float64 direct sum
(``vortexsim.induced_velocity``), with ``FMM(kernel, tol=--tol, order=P,
separation=--separation)``, the tree depth it used and the time of one evaluation
(the second, whose result is checked; with ``--profile`` the stages of a third, profiled one).  Then, for each
tol of ``--rule-tols``, the smallest P with err u ≤ tol/2 and err ∇u ≤ 5·tol for every
kernel (a factor 2 of margin), the rule of the order tables.  ``--tol`` still matters:
it sets the near field's reach of kernels with a cutoff; calibrate a table row with its
own tol.

Standard separation (tol ≥ 1e-6, M2L from boxes one apart) and the wide one (tol < 1e-6,
two apart, ``--separation 2``)::

    python benchmarks/tools/calibrate_fmm.py --device cpu --n 4000 --tol 1e-6 \\
        --kernels singular algebraic winckelmans --orders 8 10 12 14 16
    python benchmarks/tools/calibrate_fmm.py --device cpu --n 20000 --tol 1e-9 --separation 2 \\
        --kernels gaussian --orders 12 14 16
    python benchmarks/tools/calibrate_fmm.py --device gpu --n 1048576 --tol 1e-9 --separation 2 \\
        --kernels gaussian singular --orders 13 14 15 --depths 4 5 --profile

Options: --n (default 4000), --kernels, --orders, --depths, --tol (default 1e-6),
--separation 1|2 (default: the FMM's for --tol), --tree (default uniform), --leaf-size,
--sigma-h (default 1), --samples (default 300), --rule-tols, --profile, --seed,
--device cpu|gpu (default cpu), --out PATH, --label TEXT.

Output: JSON (default ``benchmarks/results/calibrate_fmm_DATE[_LABEL].json``) with one row
per (kernel, P, depth), and the error table and the derived order per tol printed last.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

# the shared helpers of benchmarks/performance/ (timing.py, bench_fmm.py)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "performance"))
import timing as T  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=4000)
    p.add_argument("--kernels", nargs="+", default=["singular", "algebraic", "winckelmans"])
    p.add_argument("--orders", type=int, nargs="+", default=[4, 6, 8, 10, 12, 14, 16])
    p.add_argument("--depths", type=int, nargs="+", default=None)
    p.add_argument("--tol", type=float, default=1e-6)
    p.add_argument("--separation", type=int, choices=(1, 2), default=None)
    p.add_argument("--tree", choices=("uniform", "adaptive", "auto"), default="uniform")
    p.add_argument("--leaf-size", type=int, default=None)
    p.add_argument("--sigma-h", type=float, default=1.0)
    p.add_argument("--samples", type=int, default=300)
    p.add_argument("--rule-tols", type=float, nargs="+",
                   default=[1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9])
    p.add_argument("--profile", action="store_true", help="stages of a profiled evaluation")
    p.add_argument("--seed", type=int, default=7)
    T.add_common_options(p, "calibrate_fmm", device_default="cpu")
    args = p.parse_args(argv)
    from vortexsim import FMM
    from vortexsim.cases import inputs
    dev = args.device
    rng = np.random.default_rng(args.seed)
    n = args.n
    x, alpha, _ = inputs.uniform(n, rng)
    sigma = np.full(n, args.sigma_h * n ** (-1 / 3))
    sample = np.sort(rng.choice(n, size=min(n, args.samples), replace=False))
    xd, ad, sd = (T.to_device(a, dev) for a in (x, alpha, sigma))
    opts = {k: v for k, v in dict(separation=args.separation, tree=args.tree,
                                  leaf_size=args.leaf_size).items() if v is not None}
    rows = []
    for kname in args.kernels:
        ref = T.reference(kname, x, alpha, sigma, sample, device=dev)
        for depth in args.depths or [None]:
            for order in args.orders:
                fmm = FMM(kname, tol=args.tol, order=order, device=dev, **opts)
                kw = {} if depth is None else {"depth": depth}
                fmm.evaluate(xd, ad, sd, **kw)                  # builds the operators
                T.synchronize(dev)
                out = []
                t = T.times_on(dev)(lambda: out.append(fmm.evaluate(xd, ad, sd, **kw)), 1)[0]
                u, g = out.pop()
                err_u, err_g = T.errors(u, g, sample, ref)
                del u, g
                stages = {}
                if args.profile:
                    prof = FMM(kname, tol=args.tol, order=order, device=dev, profile=True,
                               **opts)
                    prof.evaluate(xd, ad, sd, **kw)
                    stages = dict(prof.timings)
                    del prof
                cfg = fmm.config
                rows.append(dict(kernel=kname, order=order, depth=getattr(cfg, "depth", None),
                                 depth_asked=depth, order_used=getattr(cfg, "order", None),
                                 separation=getattr(fmm, "separation", None),
                                 err_u=err_u, err_grad=err_g, time_s=t, stages=stages))
                print(f"{kname:12s} P={order:2d} depth={rows[-1]['depth']} "
                      f"sep={rows[-1]['separation']} err_u={err_u:.2e} err_grad={err_g:.2e} "
                      f"{t * 1e3:.1f} ms", flush=True)
                del fmm
                T.free_gpu_memory(dev)
    # the rule: smallest P meeting tol/2 (u) and 5·tol (∇u) for every kernel and depth
    rule = {}
    for tol in args.rule_tols:
        ok = [P for P in sorted(args.orders)
              if all(r["err_u"] <= tol / 2 and r["err_grad"] <= 5 * tol
                     for r in rows if r["order"] == P)]
        rule[f"{tol:g}"] = ok[0] if ok else None
    summary = [dict(what=f"{r['kernel']} P={r['order']} depth={r['depth']} sep="
                    f"{r['separation']} N={n}", ms=r["time_s"] * 1e3, err_u=r["err_u"],
                    err_grad=r["err_grad"], target=None, met=None) for r in rows]
    T.write_json(args, "calibrate_fmm", dev, dict(n=n, tol=args.tol, sigma_h=args.sigma_h,
                                                   fmm_options=opts, rows=rows,
                                                   order_rule=rule), summary)
    print(f"\n## calibrate_fmm on {T.device_name(dev)}, N = {n}, σ = {args.sigma_h:g} h, "
          f"tol {args.tol:g}" + (f" ({args.label})" if args.label else "") + "\n")
    print("| kernel | P | depth | separation | err u | err ∇u | ms | stages ms |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        st = " ".join(f"{k} {v * 1e3:.1f}" for k, v in r["stages"].items())
        print(f"| {r['kernel']} | {r['order']} | {r['depth']} | {r['separation']} | "
              f"{r['err_u']:.1e} | {r['err_grad']:.1e} | {r['time_s'] * 1e3:.1f} | {st} |")
    print("\nsmallest P with err u ≤ tol/2 and err ∇u ≤ 5·tol for every kernel above:")
    print("| tol | P |\n|---|---|")
    for tol, P in rule.items():
        print(f"| {tol} | {'none of ' + str(args.orders) if P is None else P} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
