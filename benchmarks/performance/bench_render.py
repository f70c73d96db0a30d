"""Time per frame of the tracer renderer (``vortexsim.viz.render_points``).

2^``--log2n`` random tracers in a ring-like cloud (radius 1, Gaussian core 0.1, a second
ring 0.8 above: two leapfrogging rings) splatted into a ``--size`` image (default
1920x1080, camera fitted once), colour map inferno.  Median of ``--repeats`` renders after
one warm-up (colour map, CuPy kernels), synchronized; the time includes the copy of the
finished image to the host, not the copy of the tracers to the device.

Usage::

    python benchmarks/performance/bench_render.py [--device cpu|gpu] [--log2n 20] [--size 1920x1080]

Output: JSON (default ``benchmarks/results/bench_render_DATE[_LABEL].json``) and a table.
Targets: <= 10 s per frame on 2 CPU cores, <= 1 s on an H100.
"""
from __future__ import annotations

import argparse

import numpy as np

import timing as T

TARGET_S = {"cpu": 10.0, "gpu": 1.0}


def ring_cloud(n, seed=0):
    """(n, 3) tracers around two coaxial rings (axis z) of radius 1 at z = 0 and 0.8."""
    rng = np.random.default_rng(seed)
    phi = rng.uniform(0, 2 * np.pi, n)
    r = 1.0 + 0.1 * rng.standard_normal(n)
    z = 0.8 * (rng.random(n) < 0.5) + 0.1 * rng.standard_normal(n)
    return np.column_stack([r * np.cos(phi), r * np.sin(phi), z])


def main():
    from vortexsim.viz import Camera, render_points
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log2n", type=int, default=20)
    ap.add_argument("--size", default="1920x1080")
    ap.add_argument("--repeats", type=int, default=5)
    T.add_common_options(ap, "bench_render", device_default="cpu")
    args = ap.parse_args()
    w, h = (int(v) for v in args.size.lower().split("x"))
    n = 1 << args.log2n
    x_h = ring_cloud(n)
    x = T.to_device(x_h, args.device)
    xp = np if args.device == "cpu" else __import__("cupy")
    camera = Camera().fit(x_h, size=(w, h))
    image = render_points(x, size=(w, h), camera=camera, xp=xp)          # warm-up
    s = T.time_median(lambda: render_points(x, size=(w, h), camera=camera, xp=xp),
                      args.device, args.repeats, warmup=0)
    lit = float((image.max(axis=2) > 0).mean())
    row = {"tracers": n, "width": w, "height": h, "s_per_frame": s, "lit_fraction": lit,
           "device": args.device}
    target = TARGET_S[args.device]
    print(f"{n} tracers at {w}x{h} on {args.device}: {s:.3f} s per frame "
          f"({100 * lit:.0f} % of the pixels lit; target <= {target:g} s)", flush=True)
    T.write_json(args, "bench_render", args.device, {"rows": [row]}, summary=[
        {"what": f"render 2^{args.log2n} tracers {w}x{h}", "ms": 1e3 * s,
         "target": f"<= {target:g} s", "met": s <= target}])
    T.print_summary([T.out_path(args, "bench_render")])


if __name__ == "__main__":
    main()
