"""Cost and error of ``Simulation.diagnostics()`` at GPU size.

For the leapfrog case at the resolved-core GPU size (2 rings × n_phi stations × 127
points across the core, sigma 0.05) it times, back to back on one device:

* ``sim.diagnostics()`` by the O(N) fields of the FMM (``FMM.fields``: u, ψ, ω at the
  elements, the symmetric shares; the way the simulation takes beyond
  ``DIRECT_DIAGNOSTICS_PAIRS``), and the fields pass alone, symmetric or not,
* one FMM evaluation of the same elements as a time step makes it (u and ∇u at the
  elements, through the simulation's FMM),
* ``sim.diagnostics()`` by the all-pairs double sums (the reference, and its values),

and reports the ratio diagnostics / FMM evaluation (target ≤ 1.5) and the relative error
of E, Ω₂ and H against the double sums.

Usage::

    python benchmarks/performance/bench_diagnostics.py [--n-phi 129 550] [--device gpu] [--label x]

(``err_u`` of the summary rows holds the energy's error.)  Output: JSON (default ``benchmarks/results/bench_diagnostics_DATE[_LABEL].json``) and a
table printed last.
"""
from __future__ import annotations

import argparse

import numpy as np

import timing as T


def measure(n_phi, device, repeats, direct):
    try:
        from vortexsim.diagnostics.row import DIRECT_DIAGNOSTICS_PAIRS
    except ImportError:           # a tree with the row in the Simulation
        from vortexsim.simulation import DIRECT_DIAGNOSTICS_PAIRS
    from vortexsim.cases.registry import make_case
    sim = make_case("leapfrog", device=device, progress=False, n_phi=n_phi, layers=7,
                    layer_spacing=0.5, sigma=0.05, method="fmm", tracers_per_ring=16)
    el = sim.elements
    kind = sim.device.kind
    times = T.times_on(kind)
    DIRECT_DIAGNOSTICS_PAIRS[kind] = 0
    sim.diagnostics()                                              # warm-up (compile)
    fast_t = times(sim.diagnostics, repeats)
    fast = sim.diagnostics()
    fmm = sim.summation.fmm
    # the fields pass as the diagnostics make it (no images: symmetric shares)
    fields_t = times(lambda: sim.summation.fields(el.x, el.alpha, el.sigma, symmetric=True),
                     repeats)
    full_t = times(lambda: sim.summation.fields(el.x, el.alpha, el.sigma), repeats)

    def evaluate():
        fmm.evaluate(el.x, el.alpha, el.sigma)
    evaluate()
    eval_t = times(evaluate, repeats)
    # where the time goes: each stage synchronized (profile mode), fields then evaluate
    fmm.profile = True
    sim.summation.fields(el.x, el.alpha, el.sigma, symmetric=True)
    stages = {"fields": dict(fmm.timings)}
    sim.summation.fields(el.x, el.alpha, el.sigma)
    stages["fields (not symmetric)"] = dict(fmm.timings)
    evaluate()
    stages["evaluate"] = dict(fmm.timings)
    fmm.profile = False
    row = {"n_phi": n_phi, "elements": len(el), "device": kind,
           "diagnostics_ms": [1e3 * t for t in fast_t], "fmm_eval_ms": [1e3 * t for t in eval_t],
           "fields_ms": [1e3 * t for t in fields_t],
           "fields_not_symmetric_ms": [1e3 * t for t in full_t],
           "stage_ms": {k: {s: round(1e3 * v, 3) for s, v in d.items()}
                        for k, d in stages.items()}}
    row["ratio"] = float(np.median(fast_t) / np.median(eval_t))
    if direct:
        DIRECT_DIAGNOSTICS_PAIRS[kind] = 1 << 62
        ref_t = times(sim.diagnostics, 1)
        ref = sim.diagnostics()
        row["direct_ms"] = 1e3 * ref_t[0]
        scale = float(abs(el.alpha * sim.velocity()[0]).sum())
        row["rel_error"] = {
            "energy": abs(fast["energy"] - ref["energy"]) / abs(ref["energy"]),
            "enstrophy": abs(fast["enstrophy"] - ref["enstrophy"]) / abs(ref["enstrophy"]),
            "helicity (of sum |alpha.u|)": abs(fast["helicity"] - ref["helicity"]) / scale}
        row["values"] = {k: fast[k] for k in ("energy", "enstrophy", "helicity")}
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-phi", type=int, nargs="+", default=[129, 550])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--no-direct", action="store_true", help="skip the all-pairs reference")
    T.add_common_options(ap, "bench_diagnostics")
    args = ap.parse_args()
    rows = []
    for n_phi in args.n_phi:
        row = measure(n_phi, args.device, args.repeats, not args.no_direct)
        rows.append(row)
        print(f"{row['elements']:>8} elements: diagnostics {np.median(row['diagnostics_ms']):.1f} ms,"
              f" (its fields pass {np.median(row['fields_ms']):.1f} ms, not symmetric "
              f"{np.median(row['fields_not_symmetric_ms']):.1f} ms),"
              f" one FMM evaluation {np.median(row['fmm_eval_ms']):.1f} ms, ratio "
              f"{row['ratio']:.2f}; direct {row.get('direct_ms', float('nan')):.0f} ms; "
              f"errors {row.get('rel_error')}\n  stages [ms] {row['stage_ms']}", flush=True)
    T.write_json(args, "bench_diagnostics", args.device, {"rows": rows}, summary=[
        {"what": f"diagnostics N={r['elements']} (/ one FMM eval: {r['ratio']:.2f})",
         "ms": float(np.median(r["diagnostics_ms"])),
         "err_u": (r.get("rel_error") or {}).get("energy"), "target": "ratio <= 1.5",
         "met": r["ratio"] <= 1.5} for r in rows])


if __name__ == "__main__":
    main()
