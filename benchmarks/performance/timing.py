"""Shared helpers of the benchmark tools (protocol of docs/benchmarks.md).

Timing (CUDA events on the GPU, ``perf_counter`` on the CPU, median after warm-up), the
float64 reference on sampled targets through the public ``vortexsim.induced_velocity``,
relative L2 errors, the command-line options every tool shares (``--device``, ``--out``,
``--label``) and the JSON file each tool writes.

Every tool imports whatever ``vortexsim`` is first on the Python path, so that one GPU
can A/B two trees::

    PYTHONPATH=/path/to/old python benchmarks/performance/bench_fmm.py --suite standard --label old
    PYTHONPATH=/path/to/new python benchmarks/performance/bench_fmm.py --suite standard --label new

Run as a script, it prints one short table of every result JSON in a folder (the
``summary`` rows each tool writes)::

    python benchmarks/performance/timing.py benchmarks/results/
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import time

import numpy as np

if importlib.util.find_spec("vortexsim") is None:      # a checkout without pip install
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))

from vortexsim.validation import records  # noqa: E402
from vortexsim.validation.records import (device_name, environment, fmt,  # noqa: F401,E402
                                          free_gpu_memory, synchronize, to_host)

#: default folder of new result files: benchmarks/results
RESULTS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "results")


# -- timing ---------------------------------------------------------------------------
def gpu_times(fn, repeats):
    """Seconds of each of ``repeats`` calls of ``fn`` (CUDA events, each synchronized)."""
    import cupy as cp
    times = []
    for _ in range(repeats):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) * 1e-3)
    return times


def cpu_times(fn, repeats):
    """Seconds of each of ``repeats`` calls of ``fn`` (host wall clock)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def times_on(device):
    """The timer of ``device`` ("gpu" or "cpu"): ``f(fn, repeats) -> [seconds]``."""
    return gpu_times if device == "gpu" else cpu_times


def time_median(fn, device, repeats=5, warmup=1):
    """Median seconds of ``repeats`` calls of ``fn`` after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    return float(np.median(times_on(device)(fn, repeats)))


def depth_model_inputs(fmm, x, targets, sigma_max, xp):
    """What ``fmm``'s depth model sees for sources x and targets (device arrays, [L]) with
    core radii up to ``sigma_max`` [L], on the bounding cube as ``FMM.evaluate`` takes it:
    (cube edge [L], deepest admissible depth, near-field pairs per depth (list), leaves
    holding targets per depth (list)), each depth on its own root cube
    (``vortexsim.fmm.plan.depth_counts``)."""
    from vortexsim.fmm.near import near_field_reach  # noqa: PLC0415
    from vortexsim.fmm.plan import depth_counts  # noqa: PLC0415
    from vortexsim.fmm.tree import root_cube  # noqa: PLC0415
    lo, width = root_cube(x, targets, xp)
    width = float(width)
    reach = near_field_reach(fmm.kernel.name, fmm.tol, float(sigma_max))
    depth_max, min_leaf = fmm.planner.depth_limit(width, reach)
    pairs, rows = depth_counts(x, targets, lo, width, depth_max, min_leaf, fmm.near_radius,
                               xp)
    return (width, depth_max, [float(v) for v in pairs],
            [int(rows[d, d]) for d in range(depth_max + 1)])


def pin_depth(sim, depth):
    """Make every later step of ``sim`` use FMM tree depth ``depth`` (the planner's own
    choice, made every refresh, is overridden in each step plan)."""
    choose = sim.planner.step

    def pinned(iteration, dt):
        plan, margin = choose(iteration, dt)
        plan.depth = depth
        return plan, margin
    sim.planner.step = pinned


def profile_once(call, device, cprofile=0, ncu=False):
    """One more ``call()`` under cProfile (printing the ``cprofile`` functions of most own
    time) and/or between cudaProfilerStart/Stop for ``ncu --profile-from-start off``."""
    if cprofile:
        import cProfile
        import pstats
        prof = cProfile.Profile()
        synchronize(device)
        prof.enable()
        call()
        synchronize(device)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(cprofile)
    if ncu and device == "gpu":
        import cupy as cp
        cp.cuda.Device().synchronize()
        cp.cuda.profiler.start()
        call()
        cp.cuda.Device().synchronize()
        cp.cuda.profiler.stop()


# -- arrays and accuracy --------------------------------------------------------------
def to_device(a, device, dtype=np.float64):
    """``a`` (host array or None) as an array of ``device`` with ``dtype``."""
    if a is None:
        return None
    if device == "gpu":
        import cupy as cp
        return cp.asarray(a, dtype=dtype)
    return np.asarray(a, dtype=dtype)


def rel_l2(a, ref):
    """Relative L2 error of ``a`` against ``ref`` (both host arrays)."""
    a = np.asarray(a, dtype=np.float64)
    return float(np.linalg.norm(a - ref) / np.linalg.norm(ref))


def reference(kernel, x, alpha, sigma, sample, targets=None, device="cpu"):
    """Float64 direct-sum u and ∇u (host arrays) at sampled targets, public API only.

    With ``targets`` (tracers): u, ∇u at ``targets[sample]`` from every element.
    Without (sources = targets): u, ∇u at the elements ``x[sample]`` without their own
    contribution, as the sum of the other elements' contribution (targets given) and
    that of the sampled elements among themselves (targets None: self pairs excluded).
    ``x``, ``alpha``, ``sigma`` are float64 host arrays; ``device`` computes the sum.
    """
    from vortexsim import induced_velocity

    def direct(xs, al, sg, tg):
        u, g = induced_velocity(to_device(xs, device), to_device(al, device),
                                to_device(sg, device),
                                None if tg is None else to_device(tg, device),
                                kernel=kernel, method="direct", precision="float64",
                                device=device)
        return to_host(u), to_host(g)

    sample = np.asarray(sample)
    if targets is not None:
        return direct(x, alpha, sigma, targets[sample])
    rest = np.ones(x.shape[0], bool)
    rest[sample] = False
    u_rest, g_rest = direct(x[rest], alpha[rest], sigma[rest], x[sample])
    u_self, g_self = direct(x[sample], alpha[sample], sigma[sample], None)
    return u_rest + u_self, g_rest + g_self


def errors(u, g, sample, ref):
    """(err u, err ∇u): relative L2 of rows ``sample`` of (u, ∇u) against ``ref``."""
    if hasattr(u, "get"):
        import cupy as cp
        idx = cp.asarray(sample)
    else:
        idx = np.asarray(sample)
    return rel_l2(to_host(u[idx]), ref[0]), rel_l2(to_host(g[idx]), ref[1])


def parse_overrides(items):
    """``--set KEY=VALUE`` items as {key: value}, each value a Python literal where it
    parses as one (``method=mesh`` stays the string "mesh")."""
    import ast  # noqa: PLC0415
    out = {}
    for item in items:
        key, _, value = item.partition("=")
        try:
            out[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key] = value
    return out


# -- options and output (the records of vortexsim.validation.records, into RESULTS_DIR) --
def add_common_options(parser, tool, device_default="gpu"):
    """``--device``, ``--out``, ``--label`` of every tool."""
    records.add_common_options(parser, tool, device_default, "benchmarks/results")


def out_path(args, tool):
    """``--out`` or benchmarks/results/TOOL_DATE[_LABEL].json."""
    return records.out_path(args, tool, RESULTS_DIR)


def write_json(args, tool, device, payload, summary):
    """Write ``payload`` with date, tool, label, device, environment and ``summary`` rows
    (:func:`vortexsim.validation.records.write_json`) into ``--out`` or RESULTS_DIR."""
    return records.write_json(args, tool, device, payload, summary, RESULTS_DIR)


def print_summary(paths):
    """One table of the ``summary`` rows of the result JSON files ``paths``."""
    print("| tool | label | device | what | ms | err u | err ∇u | target |")
    print("|---|---|---|---|---|---|---|---|")
    for path in paths:
        try:
            with open(path) as fh:
                meta = json.load(fh)
        except (OSError, ValueError) as exc:
            print(f"| {os.path.basename(path)} | unreadable: {exc} | | | | | | |")
            continue
        for r in meta.get("summary", []):
            target = r.get("target") or ""
            if target and r.get("met") is not None:
                target += ": met" if r["met"] else ": MISSED"
            print(f"| {meta.get('tool')} | {meta.get('label', '')} | {meta.get('device')} | "
                  f"{r.get('what')} | {fmt(r.get('ms'), '.1f')} | {fmt(r.get('err_u'), '.1e')} | "
                  f"{fmt(r.get('err_grad'), '.1e')} | {target} |")


if __name__ == "__main__":
    folder = sys.argv[1] if len(sys.argv) > 1 else RESULTS_DIR
    files = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".json"))
    print_summary(files)
