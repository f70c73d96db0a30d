"""Run one bench_fmm case a few times (for external profilers such as ncu).

    python benchmarks/one_case.py rings-gauss-1e-6 [repeats] [--tree adaptive] [--ncu]

With ``--ncu`` the last evaluation alone runs between cudaProfilerStart and Stop:

    ncu --profile-from-start off --metrics gpu__time_duration.sum --csv \\
        python3 benchmarks/one_case.py clustered-gauss-1e-6-local 1 --tree adaptive --ncu \\
        > k.csv; python3 benchmarks/one_leapfrog.py --summary k.csv
"""
import argparse

import numpy as np

from bench_fmm import CASES, gpu_case


def main(argv=None):
    import cupy as cp
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("case", choices=list(CASES))
    p.add_argument("repeats", type=int, nargs="?", default=3)
    p.add_argument("--tree", choices=("auto", "uniform", "adaptive"), default="auto")
    p.add_argument("--ncu", action="store_true", help="profile the last evaluation only")
    args = p.parse_args(argv)
    _, (xd, ad, sd, td), fmm = gpu_case(args.case, np.random.default_rng(0), tree=args.tree)
    for _ in range(1 + args.repeats):
        fmm.evaluate(xd, ad, sd, td)
    cp.cuda.Device().synchronize()
    if args.ncu:
        cp.cuda.profiler.start()
    fmm.evaluate(xd, ad, sd, td)
    cp.cuda.Device().synchronize()
    if args.ncu:
        cp.cuda.profiler.stop()


if __name__ == "__main__":
    main()
