"""One RK4 step of the leapfrog case at GPU size, through ``vortexsim.make_case`` and
``Simulation.step``.

What it measures: the time of ``sim.step()`` (four FMM evaluations of the right-hand
side, the integrator, the safety check) on the resolved-core leapfrog case of
docs/benchmarks.md — 2 rings × 129 stations × 127 points across the core (7 layers,
spacing core/2) = 32 766 elements ≈ 2^15, sigma = 0.05, 2^20 tracers, float64, FMM tol
1e-6; target ≤ 60 ms on one H100.  After ``--warmup`` steps (compilation, caches), it
times ``--steps`` steps in each of ``--rounds`` rounds (CUDA events around each step on
the GPU, wall clock on the CPU) and reports the median and minimum of all.

Usage::

    python benchmarks/performance/bench_step.py [--label new]                 # the target's case, GPU
    python benchmarks/performance/bench_step.py --cprofile 30                 # + host profile of a step
    ncu --profile-from-start off --metrics gpu__time_duration.sum --csv \\
        python benchmarks/performance/bench_step.py --ncu > kernels.csv        # kernels of one step
    python benchmarks/performance/bench_step.py --ncu-summary kernels.csv       # their time by name
    python benchmarks/performance/bench_step.py --device cpu --n-phi 16 --layers 2 --tracers 512 \\
        --steps 2 --rounds 1 --warmup 1                           # smoke test

``--advance T`` times the steps at t = T instead of t = 0 (the case first runs to T with
steps of ``--advance-dt``, 0.1 as in cases/leapfrog.toml): the step cost changes along
the trajectory, e.g. as the tracers spread.

Options: --n-phi (129), --layers (7), --layer-spacing (0.5), --sigma (0.05), --tracers
(total, 2^20), --dt (0.01), --method (fmm), --tol (1e-6), --precision (float64),
--depth D (pin the tree depth of the timed steps), --warmup (2), --steps (5), --rounds
(3), --cprofile TOP (cProfile one more step and print the TOP functions by own time),
--ncu (one more step between cudaProfilerStart/Stop),
--ncu-summary CSV, --device gpu|cpu, --out PATH, --label TEXT.

Output: JSON (default ``benchmarks/results/bench_step_DATE[_LABEL].json``) with every step
time, and a table printed last.
"""
from __future__ import annotations

import argparse
import csv
import sys
from collections import defaultdict

import numpy as np

import timing as T

TARGET_MS = 60.0


def ncu_summary(path):
    """Kernel time [ms] by kernel name from ncu's CSV (gpu__time_duration.sum, ns)."""
    total, count = defaultdict(float), defaultdict(int)
    with open(path) as fh:
        rows = [r for r in csv.reader(fh) if len(r) > 10]
    head = rows[0]
    i_name, i_val = head.index("Kernel Name"), head.index("Metric Value")
    for r in rows[1:]:
        name = r[i_name].split("(")[0][:70]
        total[name] += float(r[i_val].replace(",", "")) * 1e-6
        count[name] += 1
    print(f"{sum(total.values()):8.3f} ms  total of {sum(count.values())} kernels")
    for name, t in sorted(total.items(), key=lambda kv: -kv[1]):
        print(f"{t:8.3f} ms  {count[name]:4d}×  {name}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n-phi", type=int, default=129)
    p.add_argument("--layers", type=int, default=7)
    p.add_argument("--layer-spacing", type=float, default=0.5)
    p.add_argument("--sigma", type=float, default=0.05)
    p.add_argument("--tracers", type=int, default=1 << 20, help="tracers in all (half per ring)")
    p.add_argument("--dt", type=float, default=0.01)
    p.add_argument("--method", default="fmm")
    p.add_argument("--tol", type=float, default=1e-6)
    p.add_argument("--precision", choices=("float64", "float32"), default="float64")
    p.add_argument("--advance", type=float, default=0.0, metavar="T")
    p.add_argument("--advance-dt", type=float, default=0.1)
    p.add_argument("--depth", type=int, default=None,
                   help="pin the FMM tree depth of the timed steps (default: the model's)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--cprofile", type=int, default=0, metavar="TOP")
    p.add_argument("--ncu", action="store_true")
    p.add_argument("--ncu-summary", metavar="CSV")
    T.add_common_options(p, "bench_step")
    args = p.parse_args(argv)
    if args.ncu_summary:
        ncu_summary(args.ncu_summary)
        return 0
    import vortexsim
    dev = args.device
    sim = vortexsim.make_case("leapfrog", n_phi=args.n_phi, layers=args.layers,
                              layer_spacing=args.layer_spacing, sigma=args.sigma,
                              tracers_per_ring=args.tracers // 2, dt=args.dt, device=dev,
                              method=args.method, tol=args.tol, precision=args.precision,
                              progress=False)
    n_el, n_tr = len(sim.elements), len(sim.tracers)
    if args.advance > 0:
        sim.dt = args.advance_dt
        sim.run(steps=int(round(args.advance / args.advance_dt)))
        sim.dt = args.dt
        print(f"advanced to t = {sim.t:g}", flush=True)
    if args.depth is not None:
        T.pin_depth(sim, args.depth)
    sim.run(steps=args.warmup)                       # compilation, caches, the tree depth
    T.synchronize(dev)
    timer = T.times_on(dev)
    times = []
    for r in range(args.rounds):
        times.append(timer(sim.step, args.steps))
        print(f"round {r + 1}/{args.rounds}: steps (ms) "
              f"{[round(t * 1e3, 1) for t in times[-1]]}", flush=True)
    flat = np.concatenate(times)
    med, low = float(np.median(flat)) * 1e3, float(flat.min()) * 1e3
    T.profile_once(sim.step, dev, args.cprofile, args.ncu)
    standard = (args.n_phi, args.layers, args.layer_spacing, args.sigma, args.tracers,
                args.method, args.tol, args.precision) == (129, 7, 0.5, 0.05, 1 << 20, "fmm",
                                                           1e-6, "float64")
    met = bool(med <= TARGET_MS) if standard and dev == "gpu" else None
    what = f"leapfrog RK4 step, {n_el} elements + {n_tr} tracers, {args.method} " \
           f"tol {args.tol:g} {args.precision}"
    payload = dict(case="leapfrog", t_start=float(sim.t), n_phi=args.n_phi, layers=args.layers,
                   layer_spacing=args.layer_spacing, sigma=args.sigma, n_elements=n_el,
                   n_tracers=n_tr, dt=args.dt, method=args.method, tol=args.tol,
                   precision=args.precision, depth=sim.planner.depth, warmup=args.warmup,
                   step_ms=(flat * 1e3).tolist(),
                   step_ms_median=med, step_ms_min=low, target_ms=TARGET_MS, met=met,
                   round_medians_ms=[float(np.median(t)) * 1e3 for t in times])
    summary = [dict(what=what, ms=med, err_u=None, err_grad=None, met=met,
                    target=f"≤ {TARGET_MS:g} ms" if met is not None else None)]
    T.write_json(args, "bench_step", dev, payload, summary)
    print(f"\n## bench_step on {T.device_name(dev)}" + (f" ({args.label})" if args.label else "")
          + "\n")
    print("| case | elements | tracers | method | tol | precision | steps | median ms | "
          "min ms | round medians ms | target |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    tgt = "" if met is None else f"≤ {TARGET_MS:g} ms: {'met' if met else 'MISSED'}"
    print(f"| leapfrog RK4 | {n_el} | {n_tr} | {args.method} | {args.tol:g} | {args.precision} "
          f"| {flat.size} | {med:.1f} | {low:.1f} | "
          f"{' / '.join(f'{v:.1f}' for v in payload['round_medians_ms'])} | {tgt} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
