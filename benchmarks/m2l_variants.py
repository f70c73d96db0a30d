"""Per-level M2L time of each variant on the leapfrog GPU state (diagnostic, GPU only).

    python benchmarks/m2l_variants.py

Variants: dense (per-class GEMMs over all boxes), sparse with one GEMM per source class,
sparse with one GEMM against all 343 cores; the sparse ones forced on every level
(SPARSE_M2L_FRACTION > 1).  Profiled laps (the GPU synchronized per stage), median of 5.
"""
from __future__ import annotations

import numpy as np


def main():
    import cupy as cp
    import vortexsim
    from vortexsim.fmm.evaluator import FMM
    sim = vortexsim.make_case("leapfrog", n_phi=126, layers=7, layer_spacing=0.5, sigma=0.05,
                              tracers_per_ring=1 << 19, device="gpu", method="fmm", tol=1e-6,
                              progress=False)
    x, a, s = sim.elements.x, sim.elements.alpha, sim.elements.sigma
    t = cp.concatenate([x, sim.tracers.x])
    variants = {"dense": (0.0, None), "sparse-class": (1.01, False),
                "sparse-all": (1.01, True), "default": (0.5, None)}
    for name, (frac, unified) in variants.items():
        fmm = FMM("gaussian", tol=1e-6, device="gpu", profile=True)
        fmm.SPARSE_M2L_FRACTION, fmm.SPARSE_M2L_UNIFIED = frac, unified
        laps = []
        for _ in range(6):
            fmm.evaluate(x, a, s, t, gradient=x.shape[0])
            laps.append(fmm.timings)
        keys = [k for k in laps[-1] if k.startswith("m2l")]
        med = {k: round(float(np.median([lp[k] for lp in laps[1:]])) * 1e3, 2) for k in keys}
        print(f"{name:13s} depth {fmm.config.depth}: {med}", flush=True)


if __name__ == "__main__":
    main()
