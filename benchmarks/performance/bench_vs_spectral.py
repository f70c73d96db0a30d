"""One step of a periodic case against one step of the pseudo-spectral solver, back to back.

For each ``--n``: the case (``taylor_green`` or ``isotropic_turbulence``, its case file's
settings with ``--set`` overrides, e.g. ``method=mesh``) is built through the public API
(``vortexsim.make_case``) and stepped ``--warm`` times, then ``--steps`` steps are timed
one by one (CUDA events on the GPU); then ``spectral_ns``'s solver
(:class:`vortexsim.validation.spectral_ns.solver.SpectralNS`, RK4 with integrating
factors, 2/3 dealiasing) with the same n, box and ν, from the case's own initial
velocity, the same way.  Reported per n: the median
ms per step of each and their ratio; the peak GPU memory of each (CuPy's memory pool
after the steps, emptied before each: what the pool held at most, cuFFT's plans and work
areas included) per lattice point; and the time to t_end that each step count implies
(vortexsim at the case's dt, the spectral code at its CFL 0.5 step of the initial field,
dt = 0.5 h / max(|u| + |v| + |w|), which stays near the run's for Taylor–Green and
shrinks as turbulence develops), which a whole run compares (``vortexsim run`` against
``spectral_ns.py``).

Usage::

    python benchmarks/performance/bench_vs_spectral.py --case taylor_green --n 128 256 \\
        --set method=mesh --device gpu

Output: JSON (default ``benchmarks/results/bench_vs_spectral_DATE[_LABEL].json``).
"""
from __future__ import annotations

import argparse
import gc
import math

import numpy as np

import timing as T


def _pool_reset(device):
    if device == "gpu":
        import cupy as cp
        gc.collect()
        cp.get_default_memory_pool().free_all_blocks()


def _pool_peak(device):
    if device != "gpu":
        return None
    import cupy as cp
    return int(cp.get_default_memory_pool().total_bytes())


def _time_steps(step, device, warm, steps):
    for _ in range(warm):
        step()
    T.synchronize(device)
    return [1e3 * s for s in T.times_on(device)(step, steps)]


def vortexsim_steps(case, n, device, overrides, warm, steps):
    import vortexsim
    _pool_reset(device)
    sim = vortexsim.make_case(case, n=n, device=device, progress=False, **overrides)
    ms = _time_steps(sim.step, device, warm, steps)
    cfg = sim.config
    out = {"ms": ms, "ms_median": float(np.median(ms)), "peak_bytes": _pool_peak(device),
           "dt": float(cfg["dt"]), "t_end": float(cfg["t_end"]), "nu": float(cfg["nu"]),
           "box": float(cfg["box"]), "elements": len(sim.elements), "method": cfg["method"],
           "viscous": cfg["viscous"],
           "field": {k: cfg[k] for k in ("k_peak", "energy", "seed") if k in cfg}}
    del sim
    return out


def spectral_steps(case, n, nu, box, field, device, warm, steps):
    from vortexsim.validation.spectral_ns.solver import SpectralNS, taylor_green
    xp = np
    if device == "gpu":
        import cupy as xp
    if case == "isotropic_turbulence":
        from vortexsim.cases.isotropic_turbulence import isotropic_turbulence_field
        u0 = np.moveaxis(isotropic_turbulence_field(n, **field), -1, 0)    # (3, n, n, n)
    else:
        u0 = taylor_green(n, box)
    _pool_reset(device)
    solver = SpectralNS(n, nu, box, xp=xp)
    solver.set_velocity(xp.asarray(u0))
    u = T.to_host(solver.velocity())
    dt = 0.5 * (box / n) / float(np.abs(u).sum(axis=0).max())
    ms = _time_steps(lambda: solver.step(dt), device, warm, steps)
    out = {"ms": ms, "ms_median": float(np.median(ms)), "peak_bytes": _pool_peak(device),
           "dt_cfl": dt}
    del solver
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--case", default="taylor_green",
                   choices=("taylor_green", "isotropic_turbulence"))
    p.add_argument("--n", type=int, nargs="+", default=[128], help="lattice points per side")
    p.add_argument("--warm", type=int, default=2, help="steps before timing (default 2)")
    p.add_argument("--steps", type=int, default=5, help="timed steps (default 5)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a case parameter (a Python literal), e.g. method=mesh")
    T.add_common_options(p, "bench_vs_spectral")
    args = p.parse_args(argv)
    overrides = T.parse_overrides(args.set)

    results, summary = [], []
    for n in args.n:
        vs = vortexsim_steps(args.case, n, args.device, overrides, args.warm, args.steps)
        sp = spectral_steps(args.case, n, vs["nu"], vs["box"], vs["field"], args.device,
                            args.warm, args.steps)
        ratio = vs["ms_median"] / sp["ms_median"]
        steps_vs = math.ceil(vs["t_end"] / vs["dt"] - 1e-9)
        steps_sp = math.ceil(vs["t_end"] / sp["dt_cfl"] - 1e-9)
        row = {"n": n, "vortexsim": vs, "spectral": sp, "ratio_per_step": ratio,
               "steps_to_t_end": {"vortexsim": steps_vs, "spectral": steps_sp},
               "implied_time_ratio": ratio * steps_vs / steps_sp}
        results.append(row)
        per_point = {k: (None if r["peak_bytes"] is None else r["peak_bytes"] / n ** 3)
                     for k, r in (("vortexsim", vs), ("spectral", sp))}
        row["peak_bytes_per_point"] = per_point
        print(f"{args.case} n={n} {vs['method']}: vortexsim {vs['ms_median']:.2f} ms/step "
              f"(dt {vs['dt']:g}, {steps_vs} steps), spectral {sp['ms_median']:.2f} ms/step "
              f"(dt {sp['dt_cfl']:.4g}, {steps_sp} steps); ratio per step {ratio:.2f}, "
              f"implied time to t_end {row['implied_time_ratio']:.2f}; peak memory per point "
              f"{per_point['vortexsim']} / {per_point['spectral']} B", flush=True)
        summary.append({"what": f"{args.case} {n}^3 {vs['method']} step",
                        "ms": vs["ms_median"], "target": "spectral " + T.fmt(sp["ms_median"], ".3g") + " ms"})
    T.write_json(args, "bench_vs_spectral", args.device,
                 {"case": args.case, "overrides": overrides, "results": results}, summary)


if __name__ == "__main__":
    main()
