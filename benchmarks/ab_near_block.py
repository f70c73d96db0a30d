"""A/B in one process: the near field's threads per block on bench_fmm cases
(clustered ones on the adaptive tree), by overriding ``FMM._near_block_for``
(default: 32/64/128 from the mean leaf size).  Session 7 forced L2P's block too
(``_block_for``); that slowed rings with tracers (13.8 → 16.0 ms), so L2P keeps its rule.

    python benchmarks/ab_near_block.py [--rounds 3] [--blocks default 64 128] [--cases ...]
"""
import argparse

import numpy as np

from _timing import gpu_times
from bench_fmm import gpu_case

from vortexsim.fmm.evaluator import FMM


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--blocks", nargs="+", default=["default", "64", "128"])
    p.add_argument("--cases", nargs="+", default=["clustered-gauss-1e-6-local",
                                                  "uniform-gauss-1e-6"],
                   help="bench_fmm cases; clustered ones run on the adaptive tree")
    args = p.parse_args()
    default = FMM.__dict__["_near_block_for"]
    runs = {}
    for name in args.cases:
        opts = {"tree": "adaptive"} if name.startswith("clustered") else {}
        _, dev, fmm = gpu_case(name, np.random.default_rng(0), **opts)
        runs[name] = (tuple(a for a in dev if a is not None), fmm)
    res = {(n, b): [] for n in runs for b in args.blocks}
    near = {(n, b): [] for n in runs for b in args.blocks}
    for _ in range(args.rounds):
        for b in args.blocks:
            FMM._near_block_for = default if b == "default" else staticmethod(
                lambda n_points, n_leaves, b=int(b): b)
            for name, (dev, fmm) in runs.items():
                fmm.evaluate(*dev)
                res[(name, b)] += gpu_times(lambda: fmm.evaluate(*dev), 5)
                fmm.profile = True
                fmm.evaluate(*dev)
                near[(name, b)].append(fmm.timings["near"])
                fmm.profile = False
    FMM._near_block_for = default
    for key, t in res.items():
        print(f"{key[0]:28s} block {key[1]:8s} median {np.median(t) * 1e3:6.1f} ms "
              f"(min {np.min(t) * 1e3:6.1f})  near (profiled) {np.median(near[key]) * 1e3:5.1f} ms")


if __name__ == "__main__":
    main()
