"""The parts of a P-rank FMM call that do not shrink with P, timed one at a time on one
GPU (issue 37): what a rank of ``scaling_fmm.py`` repeats whatever its share.

What it does: the inputs of ``scaling_fmm.py`` (N Gaussian blobs in the unit cube,
float64); rank 0's Morton share of ``--shares`` ranks; then, each timed alone (CUDA
events, median of ``--repeats``): the Morton shares (``share_targets``), the bounding
cube of the targets, the core-radius range and root cube, the depth model's grids and
counts (``near_pairs_by_depth`` and the source grid alone), the tree, the self pairs of
a share, and the un-permutation of u and ∇u of every target; the depth model's grid,
and the column ranges also as they were made before their kernels (array operations
and ``bincount``; two passes over blocks of rows).  (A kernel for the un-permutation,
a thread an element, took 3.82 ms against CuPy's indexed assignment's 3.70: not kept.)  Prints one JSON line (milliseconds).

Usage (one GPU)::

    python benchmarks/tools/profile_share_overhead.py --n 16777216 --shares 4
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "performance"))
import timing as T  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=1 << 24)
    p.add_argument("--shares", type=int, default=4)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    import cupy as cp

    from vortexsim.backend import resolve_device
    from vortexsim.cases import inputs
    from vortexsim.fmm.plan import near_pairs_by_depth, stretched_width
    from vortexsim.fmm.planning import near_field_reach
    from vortexsim.fmm.tree import build_tree, root_cube
    from vortexsim.kernels import morton
    from vortexsim.kernels.morton import bounding_cube, count_cells, grid_cells
    from vortexsim.kernels.permute import inverse_permutation, unpermute_rows
    from vortexsim.summation import make_summation
    from vortexsim.summation.distributed import share_targets

    dev = resolve_device("gpu")
    n = args.n
    x, alpha, _ = inputs.uniform(n, np.random.default_rng(args.seed))
    sigma = np.full(n, 1.0 * n ** (-1 / 3))
    xd, ad, sd = (cp.asarray(a) for a in (x, alpha, sigma))
    summ = make_summation("fmm", "gaussian", 1e-6, "float64", dev)
    fmm = summ.fmm

    def timed(call):
        call()
        cp.cuda.get_current_stream().synchronize()
        times = []
        for _ in range(args.repeats):
            a, b = cp.cuda.Event(), cp.cuda.Event()
            a.record()
            call()
            b.record()
            b.synchronize()
            times.append(cp.cuda.get_elapsed_time(a, b))
        return round(float(np.median(times)), 3)

    out = dict(tool="profile_share_overhead", n=n, shares=args.shares,
               device=T.device_name("gpu"))
    shares = share_targets(xd, n, 0, args.shares, cp)
    mine = shares.mine
    y = xd[mine]
    out["share_targets"] = timed(lambda: share_targets(xd, n, 0, args.shares, cp))
    out["bounding_cube_all"] = timed(lambda: bounding_cube(xd, cp))
    out["targets_of_share"] = timed(lambda: xd[mine])
    out["sigma_min_max"] = timed(lambda: (sd.min(), sd.max()))
    out["root_cube_share"] = timed(lambda: root_cube(xd, y, cp))
    lo, width = root_cube(xd, xd, cp)
    width = float(width)
    depth_max, min_leaf = fmm.planner.depth_limit(
        width, near_field_reach("gaussian", 1e-6, float(sigma[0])))
    out["depth_max"] = depth_max
    w = stretched_width(width, depth_max, min_leaf)
    side = 1 << depth_max

    def column_range_rows(points):          # the two passes over blocks of rows
        head, _ = morton._row_blocks(points)
        return head.min(axis=1).min(axis=0), head.max(axis=1).max(axis=0)

    def grid(points):                       # the cells by array operations, bincount
        cell = grid_cells(points, lo, w, depth_max, cp)
        flat = (cell[:, 0] * side + cell[:, 1]) * side + cell[:, 2]
        return cp.bincount(flat, minlength=side ** 3)

    out["grid_sources_array_ops"] = timed(lambda: grid(xd))
    out["grid_share_array_ops"] = timed(lambda: grid(y))
    out["count_cells_sources"] = timed(lambda: count_cells(xd, lo, w, depth_max, cp))
    out["count_cells_share"] = timed(lambda: count_cells(y, lo, w, depth_max, cp))
    out["column_range_blocks_of_rows"] = timed(lambda: column_range_rows(xd))
    out["near_pairs_by_depth_share"] = timed(
        lambda: near_pairs_by_depth(xd, y, lo, w, depth_max, 1, cp))
    out["near_pairs_by_depth_all"] = timed(
        lambda: near_pairs_by_depth(xd, xd, lo, w, depth_max, 1, cp))
    out["tree_share"] = timed(lambda: build_tree(xd, y, 6, cp, lo=lo, width=w, check=False))
    g = cp.zeros((mine.shape[0], 3, 3))
    out["self_pairs_share"] = timed(
        lambda: summ.remove_self_pairs_of(g, ad, sd, mine, n, reuse=False))
    u_all = cp.ones((n, 3))
    g_all = cp.ones((n, 3, 3))
    order = shares.order

    def unpermute():
        u = cp.empty((n, 3))
        u[order] = u_all
        gu = cp.empty((n, 3, 3))
        gu[shares.grad_order] = g_all
        return u, gu

    out["unpermute_u_grad_indexed"] = timed(unpermute)

    # the same as gathers through the inverse permutations (coalesced writes, reads of
    # whole rows): CuPy's fancy indexing, and one kernel per array with the row width
    # a literal (one thread per value)
    out["inverse_permutation"] = timed(lambda: inverse_permutation(order, cp))
    inv, ginv = inverse_permutation(order, cp), inverse_permutation(shares.grad_order, cp)
    out["unpermute_u_grad_take"] = timed(lambda: (u_all[inv], g_all[ginv]))

    def take_kernels():                     # vortexsim's gather (kernels/permute.py)
        return (unpermute_rows(u_all, order, cp, inv),
                unpermute_rows(g_all, shares.grad_order, cp, ginv))

    out["unpermute_u_grad_take_kernel"] = timed(take_kernels)
    out["unpermute_u_grad_take_kernel_with_inverse"] = timed(
        lambda: (inverse_permutation(order, cp), inverse_permutation(shares.grad_order, cp),
                 take_kernels()))
    put3, put9 = (cp.ElementwiseKernel(
        "raw T src, raw int64 perm", "raw T dst",
        f"dst[perm[i / {w}] * {w} + i % {w}] = src[i]", f"profile_put_rows_{w}")
        for w in (3, 9))

    def put_kernels():
        u, gu = cp.empty((n, 3)), cp.empty((n, 3, 3))
        put3(u_all, order, u, size=3 * n)
        put9(g_all, shares.grad_order, gu, size=9 * n)
        return u, gu

    out["unpermute_u_grad_put_kernel"] = timed(put_kernels)

    out["copy_u_grad"] = timed(lambda: (u_all.copy(), g_all.copy()))
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
