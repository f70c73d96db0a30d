"""Per-stage times of the FMM on one benchmark case, through ``FMM(..., profile=True)``.

What it measures: for a case of ``bench_fmm.py`` (its inputs, seeds and options), the
median over ``--repeats`` evaluations of each stage in ``FMM.timings`` (the evaluator
synchronizes the GPU after each stage when ``profile=True``, so the stages add up to a
bit more than an unprofiled evaluation), the evaluation's ``FMM.config`` (tree, order,
depth, leaf size, near radius, reach), and the unprofiled median time of the same
evaluation for comparison.  Optionally a host profile (cProfile, own time per function)
of one unprofiled evaluation, or one evaluation between cudaProfilerStart/Stop for ncu.

Usage::

    python benchmarks/tools/profile_fmm.py --case rings-gauss-1e-6 [--tree adaptive]
    python benchmarks/tools/profile_fmm.py --case clustered-gauss-1e-6-local --cprofile 30
    ncu --profile-from-start off --metrics gpu__time_duration.sum --csv \\
        python benchmarks/tools/profile_fmm.py --case rings-gauss-1e-6 --ncu > kernels.csv
    python benchmarks/performance/bench_step.py --ncu-summary kernels.csv      # time by kernel name
    python benchmarks/tools/profile_fmm.py --device cpu --case uniform-gauss-1e-6 --n 5000

Options: --case NAME (bench_fmm's named cases), --n / --m (resize it), --tree, --leaf-size,
--near-radius, --separation, --order (FMM options; unset: the FMM's defaults), --repeats
(default 5), --cprofile TOP, --ncu, --device gpu|cpu, --out PATH, --label TEXT.

Output: JSON (default ``benchmarks/results/profile_fmm_DATE[_LABEL].json``) with every
profiled evaluation's stages, and a table of the median stages printed last.
"""
from __future__ import annotations

import argparse
import os
import dataclasses
import sys

import numpy as np

# the shared helpers of benchmarks/performance/ (timing.py, bench_fmm.py)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "performance"))
import timing as T  # noqa: E402
from bench_fmm import CASES, case_arrays, case_seed, fmm_options  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--case", default="uniform-gauss-1e-6", choices=list(CASES))
    p.add_argument("--n", type=int, default=None)
    p.add_argument("--m", type=int, default=None)
    p.add_argument("--tree", choices=("uniform", "adaptive", "auto"), default=None)
    p.add_argument("--leaf-size", type=int, default=None)
    p.add_argument("--near-radius", type=int, choices=(1, 2), default=None)
    p.add_argument("--separation", type=int, choices=(1, 2), default=None)
    p.add_argument("--order", type=int, default=None)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--cprofile", type=int, default=0, metavar="TOP")
    p.add_argument("--ncu", action="store_true")
    T.add_common_options(p, "profile_fmm")
    args = p.parse_args(argv)
    from vortexsim import FMM
    dev = args.device
    case = CASES[args.case]
    if args.n or args.m is not None:
        case = dataclasses.replace(case, n=args.n or case.n,
                                   m=case.m if args.m is None else (args.m or None))
    x, alpha, sigma, tracers = case_arrays(case, np.random.default_rng(case_seed(args.case)))
    dt = np.dtype(case.precision)
    xd, ad, sd, td = (T.to_device(a, dev, dt) for a in (x, alpha, sigma, tracers))
    opts = fmm_options(args)
    plain = FMM(case.kernel, tol=case.tol, precision=case.precision, device=dev, **opts)
    prof = FMM(case.kernel, tol=case.tol, precision=case.precision, device=dev, profile=True,
               **opts)
    call = lambda: plain.evaluate(xd, ad, sd, td)         # noqa: E731
    t_plain = T.time_median(call, dev, repeats=args.repeats)
    prof.evaluate(xd, ad, sd, td)                        # warm-up
    laps = []
    for _ in range(args.repeats):
        prof.evaluate(xd, ad, sd, td)
        laps.append(dict(prof.timings))
    keys = list(dict.fromkeys(k for lap in laps for k in lap))
    median = {k: float(np.median([lap.get(k, 0.0) for lap in laps])) for k in keys}
    cfg = prof.config
    config = {f: getattr(cfg, f) for f in ("tree", "order", "depth", "leaf_size", "near_radius",
                                           "reach") if hasattr(cfg, f)}
    T.profile_once(call, dev, args.cprofile, args.ncu)
    total = median.get("total", sum(median.values()))
    summary = [dict(what=f"{args.case} unprofiled (stages: profiled {total * 1e3:.1f} ms)",
                    ms=t_plain * 1e3, err_u=None, err_grad=None, target=None, met=None)]
    T.write_json(args, "profile_fmm", dev, dict(
        case=args.case, n=case.n, m=case.m, kernel=case.kernel, tol=case.tol,
        precision=case.precision, fmm_options=opts, config=config, unprofiled_s=t_plain,
        stages_median_s=median, stages_s=laps), summary)
    print(f"\n## profile_fmm {args.case} on {T.device_name(dev)}"
          + (f" ({args.label})" if args.label else "") + "\n")
    print("config: " + ", ".join(f"{k} {v}" for k, v in config.items())
          + f"; unprofiled median {t_plain * 1e3:.1f} ms\n")
    print("| stage | median ms | share |")
    print("|---|---|---|")
    for k, v in median.items():
        print(f"| {k} | {v * 1e3:.2f} | {v / total:.0%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
