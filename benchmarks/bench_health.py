"""Cost of a diagnostics row and of its numerical-health measures on a remeshed ring case.

    python benchmarks/bench_health.py [--device gpu] [--case collision] [--repeat 5]

Builds the case at its ``--preset gpu`` discretisation (on the remeshing lattice from the
start), then times, each the median of ``--repeat`` calls after one warm-up: the whole
row (``Simulation.diagnostics``), ``line_spacing`` alone and ``ring_escaped`` alone.
Prints one line per timing, with the element count.
"""
from __future__ import annotations

import argparse
import statistics
import time

import os

import vortexsim
from vortexsim.config import load_case_file, load_presets
from vortexsim.diagnostics.health import line_spacing, ring_escaped

CASE_FILES = os.path.join(os.path.dirname(vortexsim.__file__), "case_files")
OUTPUT_KEYS = ("snapshot_interval", "diagnostics_interval", "plot")


def _timed(func, device, repeat):
    sync = (lambda: None)
    if device.is_gpu:
        import cupy  # noqa: PLC0415
        sync = cupy.cuda.Device().synchronize
    func()
    out = []
    for _ in range(repeat):
        sync()
        start = time.perf_counter()
        func()
        sync()
        out.append(time.perf_counter() - start)
    return statistics.median(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="gpu")
    p.add_argument("--case", default="collision")
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args(argv)
    path = os.path.join(CASE_FILES, f"{args.case}.toml")
    _, params = load_case_file(path)
    params.update(load_presets(path)["gpu"])
    params = {k: v for k, v in params.items() if k not in OUTPUT_KEYS and v != "auto"}
    params.update(device=args.device, progress=False, tracers_per_ring=0)
    sim = vortexsim.make_case(args.case, **params)
    model, dev = sim.model, sim.model.device
    el = model.elements
    row = sim.diagnostics()
    rings = [g for g in model.groups if g.is_ring]
    times = {
        "row": _timed(sim.diagnostics, dev, args.repeat),
        "line_spacing": _timed(lambda: line_spacing(el.x, el.alpha, el.sigma), dev,
                               args.repeat),
        "ring_escaped": _timed(lambda: ring_escaped(
            el.x, el.alpha, [(g.start, g.stop) for g in rings], row["ring_centre"],
            row["ring_axis"], row["ring_radius"]), dev, args.repeat),
    }
    for name, seconds in times.items():
        print(f"{args.case} {dev.describe()} N={len(el)}: {name} {seconds * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
