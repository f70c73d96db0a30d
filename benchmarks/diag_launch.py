"""Is a sync-free GPU FMM evaluation launch-bound?  (diagnostic, GPU only)

    python benchmarks/diag_launch.py [--cases rings-gauss-1e-6 uniform-gauss-f32-1e-4]

For each case: the default call; the sync-free call a time stepper makes (sigma_range,
root, depth given, check_root=False) timed with CUDA events and by the host alone (the
time to enqueue, no synchronize); and the same sync-free call captured once into a CUDA
graph (private memory pool) and replayed.  Prints the times and the largest difference
between graph and plain results.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from _timing import time_gpu
from bench_fmm import gpu_case


def main(argv=None):
    import cupy as cp
    p = argparse.ArgumentParser()
    p.add_argument("--cases", nargs="+", default=["rings-gauss-1e-6", "uniform-gauss-f32-1e-4"])
    p.add_argument("--leapfrog", action="store_true", help="also profile a leapfrog step")
    p.add_argument("--near-radius", type=int, nargs="+", default=[1],
                   help="FMM near-field stencil half-widths to profile the leapfrog step with")
    p.add_argument("--depth", type=int, default=None,
                   help="force the leapfrog tree depth (instead of the cost model's choice)")
    args = p.parse_args(argv)
    for name in args.cases:
        arrays, (xd, ad, sd, td), fmm = gpu_case(name, np.random.default_rng(0))
        t_default = time_gpu(lambda: fmm.evaluate(xd, ad, sd, td))
        depth = fmm.config.depth
        pts = xd if td is None else cp.concatenate([xd, td])
        lo = pts.min(axis=0).astype(cp.float64) - 1e-3
        edge = float((pts.max(axis=0) - pts.min(axis=0)).max()) + 2e-3
        kw = dict(sigma_range=(float(arrays[2].min()), float(arrays[2].max())), root=(lo, edge),
                  check_root=False, depth=depth)
        call = lambda: fmm.evaluate(xd, ad, sd, td, **kw)   # noqa: E731
        t_free = time_gpu(call)
        cp.cuda.Device().synchronize()
        host = []
        for _ in range(5):
            t0 = time.perf_counter()
            call()
            host.append(time.perf_counter() - t0)
            cp.cuda.Device().synchronize()
        fmm.profile = True
        call()
        laps = {k: round(v * 1e3, 2) for k, v in fmm.timings.items()}
        fmm.profile = False
        u0, g0 = call()
        # CUDA graph of the sync-free call, with a private pool kept alive with the graph
        pool = cp.cuda.MemoryPool()
        stream = cp.cuda.Stream(non_blocking=True)
        try:
            with cp.cuda.using_allocator(pool.malloc), stream:
                call()                       # warm the private pool on this stream
                stream.synchronize()
                stream.begin_capture()
                u1, g1 = call()
                graph = stream.end_capture()
            graph.launch(stream)
            stream.synchronize()
            du = float(cp.abs(u1 - u0).max() / cp.abs(u0).max())
            dg = float(cp.abs(g1 - g0).max() / cp.abs(g0).max())
            with stream:
                t_graph = time_gpu(lambda: graph.launch(stream))
            graph_msg = f"graph {t_graph * 1e3:.1f} ms (max rel diff u {du:.1e}, grad {dg:.1e})"
        except Exception as exc:                            # noqa: BLE001
            import traceback
            traceback.print_exc(limit=-6)
            try:
                stream.end_capture()
            except Exception:                               # noqa: BLE001
                pass
            graph_msg = f"graph failed: {type(exc).__name__}: {exc}"
        print(f"{name}: depth {depth}; default {t_default * 1e3:.1f} ms; sync-free "
              f"{t_free * 1e3:.1f} ms (host enqueue {np.median(host) * 1e3:.1f} ms); {graph_msg}")
        print(f"   sync-free profiled laps (ms): {laps}", flush=True)
    if args.leapfrog:
        for radius in args.near_radius:
            leapfrog(radius, args.depth)
    return 0


def leapfrog(near_radius=1, depth=None):
    """Stage laps of each FMM call in one RK4 step of the resolved-core leapfrog case."""
    import cupy as cp
    import vortexsim
    from vortexsim.fmm.evaluator import FMM
    sim = vortexsim.make_case("leapfrog", n_phi=126, layers=7, layer_spacing=0.5, sigma=0.05,
                              tracers_per_ring=1 << 19, dt=0.01, device="gpu", method="fmm",
                              tol=1e-6, progress=False)
    if near_radius != 1:
        sim.summation.fmm = FMM("gaussian", tol=1e-6, device="gpu", near_radius=near_radius)
    if depth is not None:
        sim.summation.fmm._cheapest_depth = lambda pairs, green: depth
    sim.run(steps=2)
    fmm = sim.summation.fmm
    print(f"near_radius {near_radius}")
    fmm.profile = True
    plain = fmm.evaluate
    laps = []

    def wrapped(*a, **k):
        out = plain(*a, **k)
        laps.append({key: round(v * 1e3, 2) for key, v in fmm.timings.items()})
        return out
    fmm.evaluate = wrapped
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    sim.step()
    cp.cuda.Device().synchronize()
    print(f"leapfrog step (profiled) {(time.perf_counter() - t0) * 1e3:.1f} ms, depth "
          f"{fmm.config.depth}, P {fmm.config.order}, reach {fmm.config.reach:.3f}")
    for lap in laps:
        print("   ", lap)
    fmm.profile = False
    fmm.evaluate = plain
    for _ in range(2):
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        sim.step()
        cp.cuda.Device().synchronize()
        print(f"leapfrog step {(time.perf_counter() - t0) * 1e3:.1f} ms", flush=True)


if __name__ == "__main__":
    sys.exit(main())
