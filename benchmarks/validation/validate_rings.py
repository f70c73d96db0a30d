"""Physics validations of the simulation driver on vortex rings (CPU or GPU).

What it measures, through ``vortexsim.make_case`` and ``Simulation.run``; one JSON line
per result is printed, and all of them are written to ``--out``:

    python benchmarks/validation/validate_rings.py saffman  [--sigma-eff 0.045 0.065] [--device gpu --method fmm]
    python benchmarks/validation/validate_rings.py leapfrog [--n-phi 32 --layers 2 --dt 0.1]
    python benchmarks/validation/validate_rings.py ground   [--n-phi 48]

saffman   single ring with a resolved Gaussian core (4 layers to 3σ_c, σ = σ_c, stations
          spaced σ), inviscid, RK4: speed of the impulse centre fitted over one radius of
          travel against Saffman's U = Γ/(4πR)[ln(8R/(√2σ_eff)) − 0.558]; drift of Σα
          (relative to Σ|α|), of the linear impulse and of the energy.
leapfrog  the default leapfrog case to t = 20: pass times (ring centres swap order,
          ``vortexsim.validation.ring_events.crossing_times``), impulse and energy drift.
          The same pass times at three resolutions up to ``--preset gpu``:
          ``resolution_study.py``.
ground    ring_ground against the upper ring of the head-on collision of mirror rings
          (same dt, direct sum or FMM): the largest difference over the run, and the
          largest |w| on the plane z = 0.

The time of one RK4 step at GPU size is ``bench_step.py``'s.  Options: --device
auto|cpu|gpu, --method direct|fmm|auto, --tol, --dt, --n-phi, --layers, --tracers (per
ring), --sigma-eff, --travel, --out PATH (default
``benchmarks/results/validate_rings_CHECK_DATE[_LABEL].json``), --label TEXT.
"""
from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np

import os
import sys

import vortexsim
from vortexsim.validation.records import to_host
from vortexsim.validation.ring_events import crossing_times

# the shared helpers of benchmarks/performance/ (timing.py: the JSON result file)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "performance"))
import timing as T  # noqa: E402


def saffman_speed(circulation, radius, sigma_eff):
    return circulation / (4 * math.pi * radius) * (
        math.log(8 * radius / (math.sqrt(2) * sigma_eff)) - 0.558)


def _run_kw(args):
    return dict(device=args.device, method=args.method, tol=args.tol, progress=False)


def saffman(args):
    out = []
    for sigma_eff in args.sigma_eff:
        core = sigma_eff / math.sqrt(2)
        n_phi = math.ceil(2 * math.pi / core)
        dt = args.dt or 0.6 * core          # ≈ 0.8 rad of core rotation per step
        sim = vortexsim.make_case("single_ring", core=core, sigma=core, layers=4,
                                  layer_spacing=1.0, n_phi=n_phi, tracers_per_ring=0, dt=dt,
                                  **_run_kw(args))
        d0 = sim.diagnostics()
        scale = float(np.abs(to_host(sim.elements.alpha)).sum())
        expect = saffman_speed(1.0, 1.0, sigma_eff)
        t_end = args.travel / expect
        times, z = [0.0], [d0["ring_centre"][0, 2]]
        start = time.perf_counter()
        while sim.t < t_end - 1e-12:
            sim.run(t_end=min(t_end, sim.t + 5 * dt))
            times.append(sim.t)
            z.append(sim.diagnostics()["ring_centre"][0, 2])
        wall = time.perf_counter() - start
        d = sim.diagnostics()
        speed = float(np.polyfit(times, z, 1)[0])
        res = {"sigma_eff": sigma_eff, "n_elements": len(sim.elements), "dt": dt,
               "t_end": sim.t, "travel": z[-1] - z[0], "speed_fit": speed,
               "speed_mean": (z[-1] - z[0]) / sim.t, "saffman": expect,
               "error_percent": 100 * (speed / expect - 1),
               "sum_alpha_drift": float(np.abs(d["total_vorticity"] - d0["total_vorticity"]).max()
                                        / scale),
               "impulse_drift": float(np.linalg.norm(d["linear_impulse"] - d0["linear_impulse"])
                                      / np.linalg.norm(d0["linear_impulse"])),
               "energy_drift": (d["energy"] - d0["energy"]) / d0["energy"],
               "wall_s": wall, "device": sim.device.describe(), "method": sim.config["method"]}
        print(json.dumps(res), flush=True)
        out.append(res)
    return out


def leapfrog(args):
    sim = vortexsim.make_case("leapfrog", n_phi=args.n_phi or 32, layers=args.layers or 2,
                              dt=args.dt or 0.1, tracers_per_ring=args.tracers,
                              **_run_kw(args))
    d0 = sim.diagnostics()
    times, gap = [0.0], [float(np.diff(d0["ring_centre"][:, 2])[0])]
    start = time.perf_counter()
    while sim.t < 20.0 - 1e-9:
        sim.run(t_end=min(20.0, sim.t + 0.2))
        d = sim.diagnostics()
        times.append(sim.t)
        gap.append(float(d["ring_centre"][1, 2] - d["ring_centre"][0, 2]))
    passes = crossing_times(times, gap)
    res = {"n_elements": len(sim.elements), "n_tracers": len(sim.tracers),
           "sigma": float(to_host(sim.elements.sigma[:1])[0]),
           "pass_times": [round(p, 3) for p in passes],
           "impulse_drift": float(np.linalg.norm(d["linear_impulse"] - d0["linear_impulse"])
                                  / np.linalg.norm(d0["linear_impulse"])),
           "energy_drift": (d["energy"] - d0["energy"]) / d0["energy"],
           "wall_s": time.perf_counter() - start, "device": sim.device.describe(),
           "method": sim.config["method"]}
    print(json.dumps(res), flush=True)
    return res


def ground(args):
    kw = dict(n_phi=args.n_phi or 48, layers=args.layers or 2, dt=args.dt or 0.05,
              tracers_per_ring=args.tracers, **_run_kw(args))
    g = vortexsim.make_case("ring_ground", height=1.0, **kw)
    c = vortexsim.make_case("collision", spacing=2.0, **kw)
    n, m = len(g.elements), len(g.tracers)
    plane = np.column_stack([np.random.default_rng(0).uniform(-2, 2, (200, 2)), np.zeros(200)])
    worst, w_plane = 0.0, 0.0
    start = time.perf_counter()
    while g.t < 6.0 - 1e-9:
        g.run(t_end=min(6.0, g.t + 0.5))
        c.run(t_end=min(6.0, c.t + 0.5))
        diff = float(np.abs(to_host(g.elements.x) - to_host(c.elements.x)[:n]).max())
        if m:
            diff = max(diff, float(np.abs(to_host(g.tracers.x) - to_host(c.tracers.x)[:m]).max()))
        worst = max(worst, diff)
        u = to_host(g.velocity(plane)[0])
        w_plane = max(w_plane, float(np.abs(u[:, 2]).max() / np.abs(u).max()))
    res = {"n_elements": n, "t_end": g.t, "max_difference": worst,
           "max_w_on_plane_relative": w_plane, "ring_radius_end": float(g.diagnostics()["ring_radius"][0]),
           "wall_s": time.perf_counter() - start, "device": g.device.describe(),
           "method": g.config["method"]}
    print(json.dumps(res), flush=True)
    return res


def _summary(check, res):
    """Short rows of the results for the JSON's summary table."""
    rows = res if isinstance(res, list) else [res]
    out = []
    for r in rows:
        if check == "saffman":
            what = f"saffman σ_eff={r['sigma_eff']}: speed {r['error_percent']:+.2f} % vs Saffman"
        elif check == "leapfrog":
            what = f"leapfrog passes {r['pass_times']}, impulse drift {r['impulse_drift']:.1e}"
        else:
            what = f"ground vs mirror collision: max difference {r['max_difference']:.1e}"
        out.append(dict(what=what, ms=r["wall_s"] * 1e3, err_u=None, err_grad=None,
                        target=None, met=None))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("check", choices=["saffman", "leapfrog", "ground"])
    p.add_argument("--device", default="auto")
    p.add_argument("--method", default="direct")
    p.add_argument("--tol", type=float, default=1e-6)
    p.add_argument("--sigma-eff", type=float, nargs="+", default=[0.045, 0.065])
    p.add_argument("--travel", type=float, default=1.0, help="saffman: distance in radii")
    p.add_argument("--dt", type=float, default=None)
    p.add_argument("--n-phi", type=int, default=None)
    p.add_argument("--layers", type=int, default=None)
    p.add_argument("--tracers", type=int, default=0, help="tracers per ring")
    p.add_argument("--out", "--output", dest="out", default=None, help="JSON path")
    p.add_argument("--label", default="", help="free text stored in the JSON and the file name")
    args = p.parse_args(argv)
    res = {"saffman": saffman, "leapfrog": leapfrog, "ground": ground}[args.check](args)
    device = "gpu" if "gpu" in str((res[0] if isinstance(res, list) and res else res)
                                   .get("device", "")) else "cpu"
    T.write_json(args, f"validate_rings_{args.check}", device,
                 dict(check=args.check, results=res), _summary(args.check, res))
    return res


if __name__ == "__main__":
    main()
