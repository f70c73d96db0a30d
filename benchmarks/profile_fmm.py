"""Host-side profile of one GPU FMM evaluation (where the Python time goes).

    python benchmarks/profile_fmm.py [--case uniform-gauss-1e-6] [--top 30] [--tree adaptive]

Runs the case of ``bench_fmm.py`` once to warm up, then one evaluation under cProfile
with a synchronize at the end, and prints the functions with the most own time.  GPU
waits show up in the synchronizing calls (``float()`` of device scalars, ``.get()``).
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import sys

import numpy as np

from bench_fmm import CASES, gpu_case


def main(argv=None):
    import cupy as cp
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--case", default="uniform-gauss-1e-6", choices=list(CASES))
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--tree", choices=("auto", "uniform", "adaptive"), default="auto")
    args = p.parse_args(argv)
    _, (xd, ad, sd, td), fmm = gpu_case(args.case, np.random.default_rng(0), tree=args.tree)
    for _ in range(2):
        fmm.evaluate(xd, ad, sd, td)
    cp.cuda.Device().synchronize()
    prof = cProfile.Profile()
    prof.enable()
    fmm.evaluate(xd, ad, sd, td)
    cp.cuda.Device().synchronize()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
