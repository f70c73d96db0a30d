"""The FMM's depth model against measured evaluations: the data behind ``COST_RATES``.

What it measures: for point sets that a run meets, the time of one FMM evaluation at
each admissible depth of the level-uniform tree (``FMM.evaluate(..., depth=d)``, median
of ``--repeats`` after a warm-up; the step's call: targets = elements then tracers, ∇u
at the elements), one profiled evaluation's stages at each depth, the near-field pair
counts and occupied boxes per depth (``depth_counts``), and the depth the cost
model (``Planner.cheapest_depth``) picks.  The point sets:

* ``uniform``: bench_fmm's ``uniform-gauss-1e-6`` (2^20 points, σ = h, no tracers);
* ``leapfrog-t0`` and ``leapfrog-tT``: the resolved-core leapfrog case of bench_step
  (32 766 elements, 2^20 tracers) at t = 0 and after running to t = ``--advance``
  (steps of 0.1, as cases/leapfrog.toml), where the tracers left behind and the
  travelling rings have stretched the points' bounding cube.

A model is right when the depth it picks is (within a few per cent) the fastest one.

Usage::

    python benchmarks/tools/calibrate_depth.py [--advance 20] [--sets uniform leapfrog-t0 leapfrog-tT]
    python benchmarks/tools/calibrate_depth.py --device cpu --n 20000 --tracers 4096 --n-phi 16 \\
        --layers 2 --advance 0.2 --repeats 1                           # smoke test

Options: --sets, --advance T (20), --n (uniform points, 2^20), --n-phi (129), --layers (7),
--tracers (2^20), --depths (default: 2..the deepest admissible), --repeats (5), --device,
--out, --label.

Output: JSON (default ``benchmarks/results/calibrate_depth_DATE[_LABEL].json``): per set
and depth the median time, the stages, pairs and occupied boxes; a table printed last.
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


def point_sets(args):
    """Yield (name, x, alpha, sigma, targets or None, gradient) on the host (float64)."""
    import vortexsim
    from vortexsim.cases import inputs
    if "uniform" in args.sets:
        x, alpha, _ = inputs.uniform(args.n, np.random.default_rng(1))
        yield "uniform", x, alpha, np.full(args.n, args.n ** (-1 / 3)), None, True
    want = [s for s in args.sets if s.startswith("leapfrog")]
    if not want:
        return
    sim = vortexsim.make_case("leapfrog", n_phi=args.n_phi, layers=args.layers,
                              layer_spacing=0.5, sigma=0.05, tracers_per_ring=args.tracers // 2,
                              dt=0.1, device=args.device, method="fmm", tol=1e-6,
                              progress=False)

    def current(name):
        el, tr = sim.elements, sim.tracers
        x, alpha, sigma = (np.asarray(vortexsim.backend.to_host(a), dtype=np.float64)
                           for a in (el.x, el.alpha, el.sigma))
        y = np.asarray(vortexsim.backend.to_host(tr.x), dtype=np.float64)
        return name, x, alpha, sigma, np.concatenate([x, y]), x.shape[0]

    if "leapfrog-t0" in want:
        yield current("leapfrog-t0")
    if "leapfrog-tT" in want:
        sim.run(steps=int(round(args.advance / 0.1)))
        yield current(f"leapfrog-t{sim.t:g}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sets", nargs="+", default=["uniform", "leapfrog-t0", "leapfrog-tT"],
                   choices=["uniform", "leapfrog-t0", "leapfrog-tT"])
    p.add_argument("--advance", type=float, default=20.0)
    p.add_argument("--n", type=int, default=1 << 20)
    p.add_argument("--n-phi", type=int, default=129)
    p.add_argument("--layers", type=int, default=7)
    p.add_argument("--tracers", type=int, default=1 << 20)
    p.add_argument("--depths", type=int, nargs="+", default=None)
    p.add_argument("--repeats", type=int, default=5)
    T.add_common_options(p, "calibrate_depth")
    args = p.parse_args(argv)
    from vortexsim.backend import Device
    from vortexsim.fmm.evaluator import FMM

    dev = args.device
    device = Device(dev)
    xp = device.xp
    timer = T.times_on(dev)
    rows = []
    for name, x, alpha, sigma, y, grad in point_sets(args):
        fmm = FMM("gaussian", tol=1e-6, device=dev, tree="uniform")
        prof = FMM("gaussian", tol=1e-6, device=dev, tree="uniform", profile=True)
        X, A, S = (xp.asarray(a) for a in (x, alpha, sigma))
        Y = None if y is None else xp.asarray(y)
        fmm.evaluate(X, A, S, Y, gradient=grad)                   # the model's own choice
        chosen = fmm.config.depth
        width, depth_max, pairs, occupied = T.depth_model_inputs(
            fmm, X, X if Y is None else Y, sigma.max(), xp)
        depths = args.depths or list(range(2, depth_max + 1))
        print(f"{name}: N = {x.shape[0]}, M = {0 if y is None else y.shape[0]}, cube "
              f"{width:.3f}, model picks depth {chosen}; pairs {np.asarray(pairs).tolist()}, "
              f"occupied {np.asarray(occupied).tolist()}", flush=True)
        for d in depths:
            if d > depth_max:
                continue
            def call(d=d):
                fmm.evaluate(X, A, S, Y, gradient=grad, depth=d)
            call()
            ms = float(np.median(timer(call, args.repeats))) * 1e3
            prof.evaluate(X, A, S, Y, gradient=grad, depth=d)
            stages = {k: round(v * 1e3, 3) for k, v in prof.timings.items()}
            rows.append(dict(set=name, depth=d, ms=ms, chosen=chosen, pairs=float(pairs[d]),
                             occupied=float(occupied[d]), width=width,
                             stages_ms=stages))
            print(f"  depth {d}: {ms:.2f} ms  stages {stages}", flush=True)
    summary = []
    for name in dict.fromkeys(r["set"] for r in rows):
        mine = [r for r in rows if r["set"] == name]
        best = min(mine, key=lambda r: r["ms"])
        pick = [r for r in mine if r["depth"] == r["chosen"]]
        summary.append(dict(what=f"{name}: chosen depth {mine[0]['chosen']}, fastest "
                            f"{best['depth']}", ms=pick[0]["ms"] if pick else None,
                            err_u=None, err_grad=None, met=None, target=None))
    T.write_json(args, "calibrate_depth", dev, dict(rows=rows), summary)
    print(f"\n## calibrate_depth on {T.device_name(dev)}\n")
    print("| set | depth | ms | pairs | occupied | chosen |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['set']} | {r['depth']} | {r['ms']:.2f} | {r['pairs']:.3g} | "
              f"{r['occupied']:.0f} | {'←' if r['depth'] == r['chosen'] else ''} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
