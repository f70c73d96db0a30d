"""Where a periodic run's peak GPU memory goes: the live CuPy allocations at the peak,
grouped by the line of vortexsim that made them.

    python benchmarks/tools/memory_peak_gpu.py --case taylor_green --n 64

Builds the case (``--set key=value`` overrides; the ``gpu`` preset's method), takes
``--steps`` steps and one diagnostics row under a memory hook that keeps every live
allocation of CuPy's pool with the innermost vortexsim frame that asked for it, and at
the largest total in use prints those allocations by line (bytes per element), then
the pool's own peak (what the run log reports: the pool's held bytes, free blocks
included), and the wall time of each step (the first one's own-time profile: what a
run's first step pays once).
"""
from __future__ import annotations

import argparse
import collections
import sys
import traceback


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--case", default="taylor_green")
    p.add_argument("--n", type=int, default=64)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args(argv)
    import ast

    import cupy as cp
    from cupy.cuda import memory_hook

    import vortexsim
    extra = {}
    for item in args.set:
        k, v = item.split("=", 1)
        try:
            extra[k] = ast.literal_eval(v)
        except (ValueError, SyntaxError):
            extra[k] = v
    sim = vortexsim.make_case(args.case, n=args.n, device="gpu", progress=False, **extra)
    n_el = len(sim.elements)

    class Peak(memory_hook.MemoryHook):
        name = "PeakHook"

        def __init__(self):
            self.live, self.used, self.peak, self.at_peak = {}, 0, 0, None

        def malloc_postprocess(self, device_id, size, mem_size, mem_ptr, pmem_id):
            where = "?"
            for f in reversed(traceback.extract_stack(limit=40)[:-1]):
                if "vortexsim" in f.filename and "cupy" not in f.filename:
                    where = f"{f.filename.split('vortexsim/')[-1]}:{f.lineno} {f.name}"
                    break
            self.live[mem_ptr] = (mem_size, where)
            self.used += mem_size
            if self.used > self.peak:
                self.peak = self.used
                self.at_peak = dict(self.live)

        def free_postprocess(self, device_id, mem_size, mem_ptr, pmem_id):
            if mem_ptr in self.live:
                self.used -= self.live.pop(mem_ptr)[0]

    pool = cp.get_default_memory_pool()
    hook = Peak()
    hook.used = pool.used_bytes()          # the state and caches made before the hook
    hook.live[0] = (hook.used, "(allocated before the first timed step)")
    import cProfile
    import pstats
    import time
    walls = []
    with hook:
        for i in range(args.steps):
            t0 = time.perf_counter()
            if i == 0:
                prof = cProfile.Profile()
                prof.enable()
            sim.step()
            cp.cuda.Device().synchronize()
            if i == 0:
                prof.disable()
            walls.append(time.perf_counter() - t0)
        sim.diagnostics()
        cp.cuda.Device().synchronize()
    print("step walls (s, synchronised):", " ".join(f"{w:.3f}" for w in walls))
    pstats.Stats(prof).sort_stats("tottime").print_stats(12)
    by_line = collections.Counter()
    for size, where in hook.at_peak.values():
        by_line[where] += size
    print(f"{args.case} n = {args.n} ({n_el} elements): peak in use {hook.peak / 1e6:.1f} MB "
          f"({hook.peak / n_el:.0f} B per element; held before the first step included); "
          f"pool held {pool.total_bytes() / 1e6:.1f} MB now")
    for where, size in by_line.most_common(args.top):
        print(f"  {size / n_el:8.1f} B/el  {where}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
