"""FMM against the direct sum on the benchmark inputs (u and ∇u), GPU or CPU.

What it measures, per case: the relative L2 error of u and ∇u on sampled targets
against the float64 direct sum (``vortexsim.induced_velocity``, computed in the same
run), the median time of one ``FMM(...).evaluate`` after warm-up (CUDA events on the
GPU, wall clock on the CPU), the stage breakdown of one evaluation of an
``FMM(..., profile=True)`` (``.timings``), the derived parameters (``.config``: tree,
order P, depth) and the direct sum's time on the same input (timed, or estimated from
a subset's pairs/s when marked "est").  Cases are first all built, then timed in
``--rounds`` rounds that alternate them, so that clock drift hits all alike; ratios
between cases (clustered / uniform, 2^24 / 2^20) come from the same process.

Inputs (docs/benchmarks.md, fixed seeds): ``uniform`` (N points in the unit cube,
alpha ~ N(0,1)^3, sigma = h = N^(-1/3) or a multiple), ``rings`` (two coaxial rings of
radius 0.3 with elements in a Gaussian core, sigma = 0.01, plus M tracers in a Gaussian
cloud), ``clustered`` (Plummer cloud, sigma from the spacing at the half-mass radius).

Usage::

    python benchmarks/performance/bench_fmm.py --suite standard [--label new]     # the targets' cases
    python benchmarks/performance/bench_fmm.py --cases uniform-gauss-1e-6 rings-gauss-1e-6
    python benchmarks/performance/bench_fmm.py --input clustered --n 1048576 --tree adaptive \\
        --leaf-size 512 --tol 1e-6 --kernel gaussian --precision float64
    python benchmarks/performance/bench_fmm.py --device cpu --input uniform --n 2000     # smoke test

Options:
    --suite standard|report|tol1e-9|all   named case sets (``--list`` prints them);
                          ``standard`` is exactly the FMM targets of benchmarks.md
                          (with the clustered / uniform and 2^24 / 2^20 ratios)
    --cases NAME ...      named cases instead
    --input uniform|rings|clustered       one ad-hoc case instead, from --n, --m,
                          --kernel, --tol, --precision, --sigma-h / --sigma
    --n, --m              N elements, M tracers (also override the named cases' sizes;
                          the targets are then not judged)
    --tree uniform|adaptive|auto, --leaf-size, --near-radius, --separation, --order
                          FMM constructor options (unset: the FMM's defaults)
    --rounds R, --repeats K   timed evaluations: R rounds of K per case (median of all)
    --samples S           sampled targets of the error check (default 200)
    --direct-max-pairs X  time the direct sum outright up to X pairs, else estimate;
    --no-direct           skip the direct-sum time
    --no-stages           skip the profiled evaluation
    --device gpu|cpu, --out PATH, --label TEXT   (see timing.py)

Output: JSON (default ``benchmarks/results/bench_fmm_DATE[_LABEL].json``) with one row
per case (every stage, config, times of every timed evaluation) and a table printed last.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import sys

import numpy as np

import timing as T


@dataclasses.dataclass(frozen=True)
class Case:
    """One benchmark input and its FMM settings (docs/benchmarks.md)."""

    input: str                  # uniform | rings | clustered
    n: int                      # elements
    m: int | None               # tracers (None: sources = targets)
    kernel: str
    tol: float
    precision: str
    sigma: float | str          # multiple of h = N^(-1/3), "half-mass", or "rings" (0.01)
    target_ms: float | None = None
    sigma_value: float | None = None    # an absolute sigma [L] instead of the rule


CASES = {
    "uniform-gauss-1e-6": Case("uniform", 1 << 20, None, "gaussian", 1e-6, "float64", 1.0, 100),
    "uniform-gauss-f32-1e-4": Case("uniform", 1 << 20, None, "gaussian", 1e-4, "float32", 1.0,
                                   40),
    "rings-gauss-1e-6": Case("rings", 1 << 15, 1 << 20, "gaussian", 1e-6, "float64", "rings", 15),
    # σ from the spacing at the Plummer half-mass radius: σ = h of the uniform case would
    # put ~6.6e5 sources within the near-field reach of each core point
    "clustered-gauss-1e-6-local": Case("clustered", 1 << 20, None, "gaussian", 1e-6, "float64",
                                       "half-mass"),
    "uniform-2^24-f32-1e-4": Case("uniform", 1 << 24, None, "gaussian", 1e-4, "float32", 1.0,
                                  1000),
    "uniform-gauss-1e-6-2h": Case("uniform", 1 << 20, None, "gaussian", 1e-6, "float64", 2.0),
    "uniform-alg-1e-6": Case("uniform", 1 << 20, None, "algebraic", 1e-6, "float64", 1.0),
    "uniform-winck-1e-6": Case("uniform", 1 << 20, None, "winckelmans", 1e-6, "float64", 1.0),
    # σ = h of the uniform case: ~2.6e11 near-field pairs in the core whatever the tree
    # (seconds per evaluation); in the "all" suite only
    "clustered-gauss-1e-6": Case("clustered", 1 << 20, None, "gaussian", 1e-6, "float64", 1.0),
    "uniform-gauss-1e-9": Case("uniform", 1 << 20, None, "gaussian", 1e-9, "float64", 1.0),
    "uniform-singular-1e-9": Case("uniform", 1 << 20, None, "singular", 1e-9, "float64", 1.0),
    "rings-gauss-1e-9": Case("rings", 1 << 15, 1 << 20, "gaussian", 1e-9, "float64", "rings"),
}

SUITES = {
    # the FMM targets of docs/benchmarks.md
    "standard": ["uniform-gauss-1e-6", "uniform-gauss-f32-1e-4", "rings-gauss-1e-6",
                 "clustered-gauss-1e-6-local", "uniform-2^24-f32-1e-4"],
    # reported next to the targets: other kernels, σ = 2h (the Plummer cloud on the
    # level-uniform tree: --cases clustered-gauss-1e-6-local --tree uniform)
    "report": ["uniform-gauss-1e-6-2h", "uniform-alg-1e-6", "uniform-winck-1e-6"],
    # the wide separation
    "tol1e-9": ["uniform-gauss-1e-9", "uniform-singular-1e-9", "rings-gauss-1e-9"],
    "all": list(CASES),
}

#: (case, reference case, largest ratio of their median times): targets between cases
RATIOS = [("clustered-gauss-1e-6-local", "uniform-gauss-1e-6", 2.0),
          ("uniform-2^24-f32-1e-4", "uniform-gauss-f32-1e-4", 20.0)]

#: Plummer half-mass radius of ``vortexsim.cases.inputs.clustered`` (scale 0.05)
HALF_MASS_RADIUS = 1.305 * 0.05


def case_seed(name):
    """Seed of a named case's inputs (the same inputs in every run)."""
    return sum(map(ord, name))


def case_arrays(case, rng):
    """Host float64 inputs of ``case``: x, alpha (N, 3), sigma (N,), tracers (M, 3) or None."""
    try:
        from vortexsim.cases import inputs
    except ImportError:           # a tree whose inputs sit at the top of the package
        from vortexsim import inputs
    n, m = case.n, case.m
    if case.input == "rings":
        x, alpha, tracers = inputs.rings(n, m or 0, rng)
        if not m:
            tracers = None
    else:
        x, alpha, _ = inputs.uniform(n, rng) if case.input == "uniform" \
            else inputs.clustered(n, rng)
        tracers = None
        if m:
            tracers = rng.random((m, 3)) if case.input == "uniform" \
                else inputs.clustered(m, rng)[0]
    if case.sigma_value is not None:
        sigma = case.sigma_value
    elif isinstance(case.sigma, (int, float)):
        sigma = case.sigma * n ** (-1 / 3)
    elif case.sigma == "rings":
        sigma = 0.01
    elif case.sigma == "half-mass":            # spacing of n/2 points in the half-mass sphere
        sigma = (0.5 * n / (4 / 3 * math.pi * HALF_MASS_RADIUS ** 3)) ** (-1 / 3)
    else:
        raise ValueError(f"unknown sigma rule {case.sigma!r}")
    return x, alpha, np.full(n, sigma), tracers


def fmm_options(args):
    """The FMM constructor options given on the command line (unset ones left out, so
    that each vortexsim tree applies its own defaults)."""
    opts = dict(tree=args.tree, leaf_size=args.leaf_size, near_radius=args.near_radius,
                separation=args.separation, order=args.order)
    return {k: v for k, v in opts.items() if v is not None}


def selected_cases(args):
    """{name: Case} from --input, --cases or --suite, with --n / --m applied."""
    if args.input:
        m = args.m if args.m is not None else (1 << 20 if args.input == "rings" else None)
        n = args.n or (1 << 15 if args.input == "rings" else 1 << 20)
        rule = args.sigma_h if args.sigma_h is not None else \
            {"uniform": 1.0, "rings": "rings", "clustered": "half-mass"}[args.input]
        name = f"{args.input}-{args.kernel}-{args.precision}-{args.tol:g}"
        return {name: Case(args.input, n, m or None, args.kernel, args.tol, args.precision,
                           rule, sigma_value=args.sigma)}
    names = args.cases or SUITES[args.suite]
    out = {}
    for name in names:
        case = CASES[name]
        if args.n or args.m is not None or args.sigma_h is not None or args.sigma is not None:
            case = dataclasses.replace(
                case, n=args.n or case.n, target_ms=None, sigma_value=args.sigma,
                sigma=case.sigma if args.sigma_h is None else args.sigma_h,
                m=case.m if args.m is None else (args.m or None))
        out[name] = case
    return out


def direct_time(kernel, xd, ad, sd, td, device, max_pairs):
    """Seconds of the direct sum of these device arrays (precision of the arrays), and
    "timed" or "est" (from a subset's pairs/s when N·M > ``max_pairs``)."""
    from vortexsim import induced_velocity
    n, m = xd.shape[0], (xd if td is None else td).shape[0]
    prec = str(xd.dtype)

    def run(k=None):
        if k is None:
            return induced_velocity(xd, ad, sd, td, kernel=kernel, precision=prec,
                                    device=device)
        return induced_velocity(xd[:k], ad[:k], sd[:k], None, kernel=kernel, precision=prec,
                                device=device)
    if float(n) * m <= max_pairs:
        return T.time_median(run, device, repeats=1, warmup=0 if device == "cpu" else 1), "timed"
    k = min(n, 1 << 17 if device == "gpu" else 1 << 11)
    sub = T.time_median(lambda: run(k), device, repeats=3)
    return sub * float(n) * m / float(k * k), "est"


def setup_case(name, case, args):
    """Build a case: inputs on the device, the timed evaluator, errors, stages, direct time."""
    from vortexsim import FMM
    dev = args.device
    rng = np.random.default_rng(case_seed(name))
    x, alpha, sigma, tracers = case_arrays(case, rng)
    dt = np.dtype(case.precision)
    xd, ad, sd, td = (T.to_device(a, dev, dt) for a in (x, alpha, sigma, tracers))
    opts = fmm_options(args)
    fmm = FMM(case.kernel, tol=case.tol, precision=case.precision, device=dev, **opts)
    call = lambda: fmm.evaluate(xd, ad, sd, td)          # noqa: E731
    u, g = call()                                       # warm-up: compiles, caches
    T.synchronize(dev)
    n_t = case.n if tracers is None else tracers.shape[0]
    sample = np.sort(rng.choice(n_t, size=min(args.samples, n_t), replace=False))
    ref = T.reference(case.kernel, x, alpha, sigma, sample, tracers, dev)
    err_u, err_g = T.errors(u, g, sample, ref)
    del u, g
    if args.no_stages:
        stages = {}
    elif dev == "gpu":
        # a second evaluator that synchronizes after each stage, so that the timed one
        # runs exactly as a caller's would
        prof = FMM(case.kernel, tol=case.tol, precision=case.precision, device=dev,
                   profile=True, **opts)
        prof.evaluate(xd, ad, sd, td)
        prof.evaluate(xd, ad, sd, td)
        stages = dict(prof.timings)
        del prof
    else:
        stages = {}                     # the CPU's stages: from the last timed call (main)
    if args.no_direct:
        t_direct, how = None, None
    else:
        t_direct, how = direct_time(case.kernel, xd, ad, sd, td, dev, args.direct_max_pairs)
    cfg = fmm.config
    row = dict(case=name, input=case.input, n=case.n, m=n_t, kernel=case.kernel, tol=case.tol,
               precision=case.precision, sigma=float(sigma[0]), fmm_options=opts,
               tree=getattr(cfg, "tree", None), order=getattr(cfg, "order", None),
               depth=getattr(cfg, "depth", None), leaf_size=getattr(cfg, "leaf_size", None),
               near_radius=getattr(cfg, "near_radius", None),
               separation=getattr(fmm, "separation", None), err_u=err_u, err_grad=err_g,
               stages=stages, direct_s=t_direct, direct_how=how, target_ms=case.target_ms,
               times_s=[])
    print(f"{name}: tree {row['tree']}, P {row['order']}, depth {row['depth']}, "
          f"err u {err_u:.2e}, ∇u {err_g:.2e}", flush=True)
    return row, call, fmm


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("Options:")[1].split("Output:")[0])
    g = p.add_mutually_exclusive_group()
    g.add_argument("--suite", choices=list(SUITES), default="standard")
    g.add_argument("--cases", nargs="+", choices=list(CASES), metavar="NAME")
    g.add_argument("--input", choices=("uniform", "rings", "clustered"))
    p.add_argument("--list", action="store_true", help="print the cases and suites, then exit")
    p.add_argument("--n", type=int, default=None)
    p.add_argument("--m", type=int, default=None)
    p.add_argument("--kernel", default="gaussian")
    p.add_argument("--tol", type=float, default=1e-6)
    p.add_argument("--precision", choices=("float64", "float32"), default="float64")
    p.add_argument("--sigma-h", type=float, default=None, help="sigma = this × N^(-1/3)")
    p.add_argument("--sigma", type=float, default=None, help="sigma [L]")
    p.add_argument("--tree", choices=("uniform", "adaptive", "auto"), default=None)
    p.add_argument("--leaf-size", type=int, default=None)
    p.add_argument("--near-radius", type=int, choices=(1, 2), default=None)
    p.add_argument("--separation", type=int, choices=(1, 2), default=None)
    p.add_argument("--order", type=int, default=None)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--samples", type=int, default=200)
    p.add_argument("--direct-max-pairs", type=float, default=4e10)
    p.add_argument("--no-direct", action="store_true")
    p.add_argument("--no-stages", action="store_true")
    T.add_common_options(p, "bench_fmm")
    args = p.parse_args(argv)
    if args.list:
        for name, c in CASES.items():
            print(f"{name:28s} {c}")
        for name, names in SUITES.items():
            print(f"suite {name}: {' '.join(names)}")
        return 0
    dev = args.device
    cases = selected_cases(args)
    rows, calls, evaluators = {}, {}, {}
    for name, case in cases.items():
        rows[name], calls[name], evaluators[name] = setup_case(name, case, args)
    timer = T.times_on(dev)
    for r in range(args.rounds):
        for name, call in calls.items():
            if r == 0:
                call()                                   # warm again after the other builds
            T.synchronize(dev)
            rows[name]["times_s"] += timer(call, args.repeats)
        print(f"round {r + 1}/{args.rounds}: " + ", ".join(
            f"{name} {np.median(rows[name]['times_s'][-args.repeats:]) * 1e3:.1f} ms"
            for name in calls), flush=True)
    if dev == "cpu" and not args.no_stages:
        for name, fmm in evaluators.items():
            rows[name]["stages"] = dict(fmm.timings)
    summary = []
    for name, r in rows.items():
        t = np.array(r["times_s"])
        r.update(time_s=float(np.median(t)), min_s=float(t.min()), max_s=float(t.max()))
        ok_err = r["err_u"] <= r["tol"] and r["err_grad"] <= 10 * r["tol"]
        r["met"] = None if r["target_ms"] is None else bool(
            r["time_s"] * 1e3 <= r["target_ms"] and ok_err)
        summary.append(dict(what=name, ms=r["time_s"] * 1e3, err_u=r["err_u"],
                            err_grad=r["err_grad"], met=r["met"],
                            target=None if r["target_ms"] is None else f"≤ {r['target_ms']} ms"))
    ratios = []
    for a, b, limit in RATIOS:
        if a in rows and b in rows:
            value = rows[a]["time_s"] / rows[b]["time_s"]
            # judged only on the cases as the targets define them (not resized)
            met = None if (cases[a] != CASES[a] or cases[b] != CASES[b]) else bool(
                value <= limit and rows[a]["err_u"] <= rows[a]["tol"]
                and rows[a]["err_grad"] <= 10 * rows[a]["tol"])
            ratios.append(dict(case=a, reference=b, ratio=value, limit=limit, met=met))
            summary.append(dict(what=f"{a} / {b}", ms=None, err_u=None, err_grad=None,
                                target=f"ratio {value:.2f} ≤ {limit:g}", met=met))
    T.write_json(args, "bench_fmm", dev, dict(rounds=args.rounds, repeats=args.repeats,
                                               rows=list(rows.values()), ratios=ratios), summary)
    print(f"\n## bench_fmm on {T.device_name(dev)}"
          + (f" ({args.label})" if args.label else "") + "\n")
    print("| case | N | M | kernel | prec | tol | tree | P | depth | err u | err ∇u | "
          "ms median (min–max) | stages ms (profiled) | direct ms | target |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows.values():
        # per-level laps (m2l_4, ...) are in the JSON; the table keeps the stage sums
        st = " ".join(f"{k} {v * 1e3:.1f}" for k, v in r["stages"].items()
                      if k != "total" and not k.rsplit("_", 1)[-1].isdigit())
        direct = "–" if r["direct_s"] is None else f"{r['direct_s'] * 1e3:.0f} ({r['direct_how']})"
        tgt = "" if r["target_ms"] is None else (
            f"≤ {r['target_ms']} ms: {'met' if r['met'] else 'MISSED'}")
        print(f"| {r['case']} | {r['n']} | {r['m']} | {r['kernel']} | {r['precision']} | "
              f"{r['tol']:g} | {r['tree']} | {r['order']} | {r['depth']} | {r['err_u']:.1e} | "
              f"{r['err_grad']:.1e} | {r['time_s'] * 1e3:.1f} ({r['min_s'] * 1e3:.1f}–"
              f"{r['max_s'] * 1e3:.1f}) | {st} | {direct} | {tgt} |")
    for q in ratios:
        verdict = "not judged (resized)" if q["met"] is None else (
            "met" if q["met"] else "MISSED")
        print(f"\n{q['case']} / {q['reference']} = {q['ratio']:.2f} (target ≤ {q['limit']:g}): "
              f"{verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
