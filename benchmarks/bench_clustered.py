"""The `clustered` target of benchmarks.md (FMM time on the Plummer cloud ≤ 2 × the
`uniform` time), measured as an A/B in one process: rounds alternate the uniform case
(`uniform-gauss-1e-6`) and the clustered one (`clustered-gauss-1e-6-local`: 2^20
Plummer points, σ from the half-mass spacing, Gaussian, tol 1e-6), both with the
default ``FMM(tree="auto")`` (which picks the level-uniform tree for the first and the
adaptive one for the second; the table says which ran), so that clock and machine
drift hit both alike.  Each round times ``--repeats`` evaluations of each (CUDA events, after a
warm-up); the ratio of the medians over all rounds is the result.  Errors of u and ∇u
of both against the float64 CUDA direct sum on sampled targets, and one profiled
evaluation's stages, come in the same run.

    python benchmarks/bench_clustered.py [--rounds 5] [--repeats 5] [--leaf-size K]
        [--tree auto|adaptive] [--out bench_clustered.json]
"""
from __future__ import annotations

import argparse
import datetime
import json
import sys

import numpy as np

from _timing import gpu_times
from bench_fmm import CASES, gpu_case

from vortexsim.kernels.cutoff import get_kernel
from vortexsim.kernels.direct import direct_sum_at_elements


def _errors(fmm, host, dev, samples, rng):
    """Relative L2 errors (u, ∇u) on ``samples`` targets against the float64 direct sum."""
    import cupy as cp
    x, alpha, sigma, _ = host
    u, g = fmm.evaluate(*dev)
    sample = np.sort(rng.choice(x.shape[0], size=samples, replace=False))
    ud, gd = direct_sum_at_elements(get_kernel(fmm.kernel.name), cp.asarray(x),
                                    cp.asarray(alpha), cp.asarray(sigma), sample)
    ud, gd, uf, gf = (a.get() for a in (ud, gd, u[sample], g[sample]))
    return (float(np.linalg.norm(uf - ud) / np.linalg.norm(ud)),
            float(np.linalg.norm(gf - gd) / np.linalg.norm(gd)))


def main(argv=None):
    import cupy as cp
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--samples", type=int, default=200)
    p.add_argument("--leaf-size", type=int, default=None,
                   help="the adaptive tree's leaf_size (default: the FMM's; implies the "
                        "adaptive tree for the clustered case)")
    p.add_argument("--tree", choices=("auto", "adaptive"), default="auto",
                   help="FMM(tree=...) of both cases (auto: the default, chosen per input)")
    p.add_argument("--out", default="bench_clustered.json")
    args = p.parse_args(argv)
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    device = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    cases = {}
    for name, opts in (("uniform-gauss-1e-6", {"tree": args.tree}),
                       ("clustered-gauss-1e-6-local",
                        {"tree": "adaptive" if args.leaf_size else args.tree,
                         "leaf_size": args.leaf_size})):
        rng = np.random.default_rng(sum(map(ord, name)))
        host, dev, fmm = gpu_case(name, rng, **opts)
        dev = dev[:3] + ((dev[3],) if dev[3] is not None else ())
        fmm.evaluate(*dev)                                   # warm-up (compiles, caches)
        err = _errors(fmm, host, dev, args.samples, rng)
        fmm.profile = True
        fmm.evaluate(*dev)
        stages = {k: round(v * 1e3, 2) for k, v in fmm.timings.items()}
        fmm.profile = False
        cases[name] = dict(host=host, dev=dev, fmm=fmm, times=[], err_u=err[0],
                           err_grad=err[1], stages=stages)
        print(name, "err u %.2e grad %.2e" % err, "stages ms", stages, flush=True)
    for r in range(args.rounds):
        for name, c in cases.items():
            c["times"] += gpu_times(lambda c=c: c["fmm"].evaluate(*c["dev"]), args.repeats)
        print(f"round {r}: " + ", ".join(
            f"{name} {np.median(c['times'][-args.repeats:]) * 1e3:.1f} ms"
            for name, c in cases.items()), flush=True)
    uni, clu = (np.median(c["times"]) for c in cases.values())
    ratio = clu / uni
    rows = {name: dict(median_ms=float(np.median(c["times"]) * 1e3),
                       min_ms=float(np.min(c["times"]) * 1e3),
                       max_ms=float(np.max(c["times"]) * 1e3),
                       err_u=c["err_u"], err_grad=c["err_grad"], stages=c["stages"],
                       tree=c["fmm"].config.tree, leaf_size=c["fmm"].config.leaf_size,
                       order=c["fmm"].config.order, depth=c["fmm"].config.depth,
                       sigma=float(c["host"][2][0]), n=int(c["host"][0].shape[0]))
            for name, c in cases.items()}
    meta = dict(date=datetime.date.today().isoformat(), device=device, rounds=args.rounds,
                repeats=args.repeats, ratio=float(ratio), met=bool(ratio <= 2.0
                and all(r["err_u"] <= 1e-6 and r["err_grad"] <= 1e-5 for r in rows.values())),
                cases=rows, tol=CASES["uniform-gauss-1e-6"][4])
    with open(args.out, "w") as fh:
        json.dump(meta, fh, indent=1)
    print(f"\n## bench_clustered {meta['date']} on {device}\n")
    print("| case | tree | median ms (min–max) | err u | err ∇u |")
    print("|---|---|---|---|---|")
    for name, r in rows.items():
        print(f"| {name} | {r['tree']} | {r['median_ms']:.1f} ({r['min_ms']:.1f}–"
              f"{r['max_ms']:.1f}) | {r['err_u']:.1e} | {r['err_grad']:.1e} |")
    print(f"\nclustered / uniform = {ratio:.2f} (target ≤ 2): "
          f"{'met' if meta['met'] else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
