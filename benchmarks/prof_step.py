"""Is the time stepper host-bound or GPU-bound?  (diagnostic, GPU only)

    python3 benchmarks/prof_step.py

Builds the resolved-core leapfrog case at GPU size (2 × 126 × 127 elements, 2^20
tracers, FMM tol 1e-6), and after three warm-up steps prints, for three RK4 steps, the
synchronized step time next to the host time each right-hand-side evaluation takes to
enqueue (session 5: ~8 ms per evaluation against a ~60 ms step: GPU-bound), then a
cProfile of one step (host time per function; time in ``get`` is waiting for the GPU).
"""
from __future__ import annotations

import cProfile
import pstats
import time


def main():
    import cupy as cp
    import vortexsim
    sim = vortexsim.make_case("leapfrog", n_phi=126, layers=7, layer_spacing=0.5, sigma=0.05,
                              tracers_per_ring=1 << 19, dt=0.01, device="gpu", method="fmm",
                              tol=1e-6, progress=False)
    sim.run(steps=3)
    cp.cuda.Device().synchronize()
    cls = type(sim.summation)
    plain = cls.__call__
    enqueue = []

    def timed(self, *a, **k):
        t0 = time.perf_counter()
        out = plain(self, *a, **k)
        enqueue.append(time.perf_counter() - t0)
        return out
    cls.__call__ = timed
    try:
        for _ in range(3):
            enqueue.clear()
            cp.cuda.Device().synchronize()
            t0 = time.perf_counter()
            sim.step()
            cp.cuda.Device().synchronize()
            print(f"step {1e3 * (time.perf_counter() - t0):.1f} ms; evaluations enqueued in "
                  f"{[round(1e3 * e, 1) for e in enqueue]} ms", flush=True)
    finally:
        cls.__call__ = plain
    prof = cProfile.Profile()
    cp.cuda.Device().synchronize()
    prof.enable()
    sim.step()
    cp.cuda.Device().synchronize()
    prof.disable()
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(30)
    stats.sort_stats("cumulative").print_stats(40)


if __name__ == "__main__":
    main()
