"""Host-side profile of one GPU FMM evaluation (where the Python time goes).

    python benchmarks/profile_fmm.py [--case uniform-gauss-1e-6] [--top 30]

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

from bench_fmm import CASES
from vortexsim.fmm.evaluator import FMM
from vortexsim.inputs import clustered, rings, uniform


def main(argv=None):
    import cupy as cp
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--case", default="uniform-gauss-1e-6", choices=list(CASES))
    p.add_argument("--top", type=int, default=30)
    args = p.parse_args(argv)
    kind, n, m, kname, tol, prec, sh, _ = CASES[args.case]
    rng = np.random.default_rng(0)
    if kind == "rings":
        x, alpha, tracers = rings(n, m, rng)
        sigma = np.full(n, 0.01)
    else:
        x, alpha, tracers = uniform(n, rng) if kind == "uniform" else clustered(n, rng)
        sigma = np.full(n, sh * n ** (-1 / 3))
    dt = np.dtype(prec)
    xd, ad, sd = (cp.asarray(a, dtype=dt) for a in (x, alpha, sigma))
    td = None if tracers is None else cp.asarray(tracers, dtype=dt)
    fmm = FMM(kname, tol=tol, precision=prec, device="gpu")
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
