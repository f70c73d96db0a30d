"""Strong scaling of the free-space FMM over MPI ranks (issue 37): u and ∇u of N Gaussian
blobs in a uniform cube at the blobs themselves, one rank against P ranks of the same
machine, one GPU per rank (NCCL) or CPU ranks.

Run under the MPI launcher, one line of JSON printed by rank 0 per run::

    mpiexec -n 1 python benchmarks/performance/scaling_fmm.py --n 16777216 --tol 1e-6
    mpiexec -n 4 python benchmarks/performance/scaling_fmm.py --n 16777216 --tol 1e-6
    mpiexec -n 2 python benchmarks/performance/scaling_fmm.py --device cpu --n 20000 --samples 256  # CPU

(``benchmarks/tools/scaling_gpu.sh`` runs P = 1, 2, 4 with the machine's ``mpiexec`` into
``$OUT/scaling_fmm.jsonl``.)

What it does: the inputs of ``bench_fmm.py``'s uniform case (``vortexsim.cases.inputs
.uniform``: N points in the unit cube, α ~ N(0, 1)³, σ = ``--sigma-h`` × N^(-1/3), fixed
seed; the same arrays on every rank), float64; ``make_summation("fmm", ...,
communicator=comm)`` with ``comm = make_communicator(device=...)`` (several ranks: each
sums its share of the targets along the Morton curve, the shares gathered by NCCL on
GPU ranks); the call ``summation(x, alpha, sigma, x, n_self=N, gradient=True)``.  One
warm-up call, then ``--repeats`` calls, each started after a barrier and ended by a
device synchronisation; a call's time is the slowest rank's, and ``seconds`` is their
median.

The JSON line: ranks, n, tol, seconds (and every call's), the device and
communicator; per rank (``per_rank``, unless ``--no-breakdown``): its targets, the
median seconds of its own share's evaluation alone (the rest of a call is the Morton
sort, the gather and the un-permutation, ``gather_s`` ≈ seconds − the slowest share), the
FMM's depth and order, and the stage times of one profiled evaluation of its share
(each stage synchronised); ``gpu_pool_bytes``: the bytes CuPy's memory pool of each
rank holds after the timed calls (its high-water mark: freed blocks stay in the pool);
the error of the result against the float64 direct sum at ``--samples`` sampled
targets (relative L2 and largest error over the largest value, of u and of ∇u; the
elements' own pairs out, ``timing.reference``), which the one-rank run's line gives for
comparison; ``ranks_agree``: every rank holds the same bits of u and ∇u.

Where the time goes: every rank builds the whole source tree and runs the upward pass,
and the FMM's dense M2L (the uniform cube's levels: every box holds sources) translates
into every box, holding targets or not, on every rank; the near field and L2P shrink
with the rank's share.  ``--m2l-pairs`` tries the GPU's sparse M2L by offset instead,
which skips boxes without targets (see the per-rank ``m2l`` stage).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import timing as T  # noqa: E402

TOOL = "scaling_fmm"


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=1 << 24, help="blobs (default 2^24)")
    p.add_argument("--tol", type=float, default=1e-6)
    p.add_argument("--kernel", default="gaussian")
    p.add_argument("--sigma-h", type=float, default=1.0, help="sigma = this × N^(-1/3)")
    p.add_argument("--seed", type=int, default=2024)
    p.add_argument("--repeats", type=int, default=3, help="timed calls (median)")
    p.add_argument("--samples", type=int, default=4096, help="targets of the error check")
    p.add_argument("--no-check", action="store_true", help="skip the error check")
    p.add_argument("--no-breakdown", action="store_true",
                   help="skip the per-rank share evaluations and profiled stages")
    p.add_argument("--m2l-pairs", action="store_true",
                   help="the GPU's sparse M2L by offset on every level it can take "
                        "(FMM.SPARSE_M2L_FRACTION = 2, SPARSE_M2L_PAIRS = True): it "
                        "translates only into boxes that hold targets, which a rank's "
                        "Morton share leaves mostly empty; the dense M2L translates into "
                        "every box on every rank")
    p.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    p.add_argument("--out", default=None, help="append the JSON line to this file (rank 0)")
    p.add_argument("--label", default="")
    return p.parse_args(argv)


def timed(call, device, comm, repeats):
    """Seconds of ``repeats`` calls of ``call`` (each after a barrier, ended by a device
    synchronisation), each the slowest rank's; and the last call's result."""
    times, out = [], None
    for _ in range(repeats):
        out = None                                   # the previous result freed first
        comm.barrier()
        t0 = time.perf_counter()
        out = call()
        T.synchronize(device)
        times.append(max(comm.allgather(time.perf_counter() - t0)))
    return times, out


def checksum(a, xp):
    """An integer of the bits of float64 array ``a`` (the sum of its words mod 2^64):
    equal on two ranks when their arrays are (and, but for collisions, only then)."""
    return int(xp.ascontiguousarray(a).view(xp.uint64).sum(dtype=xp.uint64))


def pool_bytes(device):
    """Bytes held by CuPy's memory pool of this rank's GPU (None on the CPU)."""
    if device != "gpu":
        return None
    import cupy as cp
    return int(cp.get_default_memory_pool().total_bytes())


def breakdown(summation, xd, ad, sd, device, repeats):
    """This rank's share alone: its targets, the median seconds of its evaluation, the
    FMM's depth and order, and the stages of one profiled evaluation."""
    inner = getattr(summation, "inner", summation)
    if inner is summation:                           # one rank: its share is every target
        mine = xd
    else:
        mine = xd[summation.shares(xd, True).mine]
        # as in the shared call: the ranks share the FMM's upward pass (every rank
        # makes this call)
        inner.sharing_ranks = summation.communicator
    call = lambda: inner(xd, ad, sd, mine, n_self=0, gradient=True)   # noqa: E731
    fmm = inner.fmm
    try:
        call()
        T.synchronize(device)
        seconds = T.times_on(device)(call, repeats)
        fmm.profile = True
        call()
        stages = {k: float(v) for k, v in fmm.timings.items()}
    finally:
        fmm.profile = False
        inner.sharing_ranks = None
    cfg = fmm.config
    return dict(targets=int(mine.shape[0]), eval_s=float(np.median(seconds)),
                depth=getattr(cfg, "depth", None), order=getattr(cfg, "order", None),
                stages=stages)


def errors(u, g, x, alpha, sigma, kernel, device, samples, seed):
    """Errors of u, ∇u at ``samples`` sampled targets against the float64 direct sum."""
    rng = np.random.default_rng(seed + 1)
    sample = np.sort(rng.choice(x.shape[0], size=min(samples, x.shape[0]), replace=False))
    ref_u, ref_g = T.reference(kernel, x, alpha, sigma, sample, None, device)
    err_u, err_g = T.errors(u, g, sample, (ref_u, ref_g))
    idx = T.to_device(sample, device, np.int64)
    du = np.abs(T.to_host(u[idx]) - ref_u).max() / np.abs(ref_u).max()
    dg = np.abs(T.to_host(g[idx]) - ref_g).max() / np.abs(ref_g).max()
    return dict(samples=int(sample.size), err_u=err_u, err_grad=err_g,
                max_err_u=float(du), max_err_grad=float(dg))


def main(argv=None):
    args = parse(argv)
    from vortexsim.backend import make_communicator, resolve_device
    from vortexsim.cases import inputs
    from vortexsim.summation import make_summation
    # the communicator first: a GPU rank takes its GPU before anything is allocated
    comm = make_communicator(device=args.device)
    dev = resolve_device(args.device)
    xp = dev.xp
    n = args.n
    x, alpha, _ = inputs.uniform(n, np.random.default_rng(args.seed))
    sigma = np.full(n, args.sigma_h * n ** (-1 / 3))
    xd, ad, sd = (T.to_device(a, args.device) for a in (x, alpha, sigma))
    summation = make_summation("fmm", args.kernel, args.tol, "float64", dev,
                               communicator=comm)
    if args.m2l_pairs:
        fmm = getattr(summation, "inner", summation).fmm
        fmm.SPARSE_M2L_FRACTION, fmm.SPARSE_M2L_PAIRS = 2.0, True
    call = lambda: summation(xd, ad, sd, xd, n_self=n, gradient=True)   # noqa: E731
    t0 = time.perf_counter()
    call()                                           # warm-up: compiles, caches
    T.synchronize(args.device)
    warmup = max(comm.allgather(time.perf_counter() - t0))
    times, (u, g) = timed(call, args.device, comm, args.repeats)
    pools = comm.allgather(pool_bytes(args.device))
    sums = comm.allgather((checksum(u, xp), checksum(g, xp)))
    row = dict(tool=TOOL, label=args.label, ranks=comm.size, n=n, tol=args.tol,
               m2l_pairs=args.m2l_pairs,
               kernel=args.kernel, sigma=float(sigma[0]), precision="float64",
               seconds=float(statistics.median(times)), times_s=times, warmup_s=warmup,
               device=T.device_name(args.device), communicator=comm.describe(),
               gpu_pool_bytes=pools, ranks_agree=all(s == sums[0] for s in sums))
    if not args.no_breakdown:
        mine = breakdown(summation, xd, ad, sd, args.device, args.repeats)
        mine.update(rank=comm.rank, gpu=getattr(comm, "gpu", None))
        row["per_rank"] = comm.allgather(mine)
        row["gather_s"] = row["seconds"] - max(r["eval_s"] for r in row["per_rank"])
    if not args.no_check and comm.is_root:
        row.update(errors(u, g, x, alpha, sigma, args.kernel, args.device, args.samples,
                          args.seed))
    if comm.is_root:
        line = json.dumps(row, default=T.records.jsonable)
        print(line, flush=True)
        if args.out:
            with open(args.out, "a") as fh:
                fh.write(line + "\n")
    comm.barrier()
    if hasattr(comm, "close"):
        comm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
