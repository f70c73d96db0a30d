"""Where a rank's share of the FMM's time goes, on one GPU: the M2L into the boxes of a
Morton share (issue 37), by level and by part (gather, GEMM, the rest).

What it does: the inputs of ``scaling_fmm.py`` (N Gaussian blobs, uniform cube, float64,
tol 1e-6, the summation's own FMM); for each share count P in ``--shares`` it takes rank
0's Morton share of the targets (``summation.distributed.share_targets``, as a P-rank run
does) and evaluates u and ∇u there with every source, as that rank would, with the
FMM's profile on.  Printed per P: the stages (ms), and per level of the M2L its time,
the boxes receiving translations (the share's target boxes, ``fmm.targets``), the path
it took (dense, sparse by class or unified, pairs), and the milliseconds in the gather
kernel and in the GEMMs (CUDA events around each, the stream synchronised: the rest of
the level is the scatter into the locals and the launch overhead).  ``--variants``
repeats each P with an attribute of the FMM's M2L stage object set (``NAME=VALUE``,
e.g. ``sparse_pairs=False``), a setting of the FMM (``fmm.SPARSE_M2L_FRACTION=0.0``:
the dense M2L at every level), or ``targets=off`` (the M2L into every box, no target
lists), to compare them in the same call.

Usage (one GPU)::

    python benchmarks/tools/profile_share_m2l.py --n 16777216 --shares 1 2 4 \\
        --out $OUT/profile_share_m2l.jsonl
"""
from __future__ import annotations

import argparse
import ast
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
    p.add_argument("--tol", type=float, default=1e-6)
    p.add_argument("--shares", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--repeats", type=int, default=2, help="profiled calls (the last kept)")
    p.add_argument("--variants", nargs="*", default=[],
                   help="NAME=VALUE class attributes of the M2L to compare")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)

    import cupy as cp
    from vortexsim.backend import resolve_device
    from vortexsim.cases import inputs
    from vortexsim.fmm import cuda as fcuda
    from vortexsim.fmm import evaluator as fev
    from vortexsim.summation import make_summation
    from vortexsim.summation.distributed import share_targets

    dev = resolve_device("gpu")
    n = args.n
    x, alpha, _ = inputs.uniform(n, np.random.default_rng(2024))
    sigma = np.full(n, n ** (-1 / 3))
    xd, ad, sd = (cp.asarray(a) for a in (x, alpha, sigma))
    summation = make_summation("fmm", "gaussian", args.tol, "float64", dev)
    fmm = summation.fmm

    parts = {}
    lists = {}
    original_product = fcuda.CudaM2L.gathered_product
    original_boxes = fev.target_boxes

    def product(self, Kp, Mcm, Mcc, g, mdt):
        level = parts.setdefault("level", {})
        e = [cp.cuda.Event() for _ in range(3)]
        r = Kp.shape[0]
        ns, nj = g.shape
        e[0].record()
        X = fcuda.gather_columns(Mcc, g).reshape(3 * nj, ns * r)
        e[1].record()
        Y = (Kp @ X.T).reshape(r, nj, 3)
        e[2].record()
        e[2].synchronize()
        level["gather"] = level.get("gather", 0.0) + cp.cuda.get_elapsed_time(e[0], e[1])
        level["gemm"] = level.get("gemm", 0.0) + cp.cuda.get_elapsed_time(e[1], e[2])
        level["calls"] = level.get("calls", 0) + 1
        level["widths"] = sorted(set(level.get("widths", [])) | {nj})
        return Y

    def boxes(*a, **k):
        if parts.get("targets_off"):
            lists.clear()
            return {}
        out = original_boxes(*a, **k)
        lists.clear()
        for lev, tb in out.items():
            if tb is not None:
                rows = [cp.asnumpy(r) for r in tb.rows]
                runs = sum(int(1 + np.count_nonzero(np.diff(r) != 1)) if r.size else 0
                           for r in rows)
                lists[lev] = dict(boxes=int(tb.boxes.shape[0]), runs=runs)
        return out

    original_level = fcuda.CudaM2L.level
    original_sparsity = fcuda.CudaM2L.sparsity
    paths = {}

    def sparsity(self, *a, **k):
        out = original_sparsity(self, *a, **k)
        paths.clear()
        for lev, info in out.items():
            paths[lev] = ("dense" if info is None else "pairs" if hasattr(info, "layout")
                          else "unified" if info[3][0] else "by class")
        return out

    def level(self, tree, multipoles, green, P, clock, sparse, lev, *a, **k):
        parts["level"] = {}
        out = original_level(self, tree, multipoles, green, P, clock, sparse, lev, *a, **k)
        parts[lev] = parts.pop("level")
        return out

    fcuda.CudaM2L.gathered_product = product
    fev.target_boxes = boxes
    fcuda.CudaM2L.level = level
    fcuda.CudaM2L.sparsity = sparsity
    variants = [None] + list(args.variants)
    rows = []
    try:
        for size in args.shares:
            shares = share_targets(xd, n, 0, size, cp)
            mine = xd[shares.mine]
            for variant in variants:
                saved = None
                parts_flag = variant == "targets=off"
                if variant and not parts_flag:
                    name, value = variant.split("=")
                    # the FMM's settings, or the attributes of its M2L stage object
                    owner = fmm if name.startswith("fmm.") else fmm.stages.m2l
                    name = name.removeprefix("fmm.")
                    saved = (owner, name, getattr(owner, name))
                    setattr(owner, name, ast.literal_eval(value))
                fmm.profile = True
                try:
                    for _ in range(args.repeats):
                        parts.clear()
                        parts["targets_off"] = parts_flag
                        summation(xd, ad, sd, mine, n_self=0, gradient=True)
                    stages = {k: round(v * 1e3, 2) for k, v in fmm.timings.items()}
                    profiled = {k: v for k, v in parts.items()}
                    fmm.profile = False
                    fcuda.CudaM2L.gathered_product = original_product   # no event syncs
                    plain = T.time_median(
                        lambda: summation(xd, ad, sd, mine, n_self=0, gradient=True), "gpu",
                        repeats=3)
                finally:
                    fmm.profile = False
                    fcuda.CudaM2L.gathered_product = product
                    if saved:
                        setattr(*saved)
                    cp.get_default_memory_pool().free_all_blocks()
                parts.clear()
                parts.update(profiled)
                levels = {}
                for lev, d in sorted((k, v) for k, v in parts.items() if isinstance(k, int)):
                    levels[lev] = dict(ms=stages.get(f"m2l_{lev}"),
                                       gather_ms=round(d.get("gather", 0.0), 2),
                                       gemm_ms=round(d.get("gemm", 0.0), 2),
                                       calls=d.get("calls", 0), widths=d.get("widths", [])[:6],
                                       boxes=lists.get(lev, {}).get("boxes", 8 ** lev),
                                       runs=lists.get(lev, {}).get("runs"),
                                       path=paths.get(lev))
                row = dict(tool="profile_share_m2l", n=n, shares=size, variant=variant,
                           targets=int(mine.shape[0]), depth=fmm.config.depth,
                           order=fmm.config.order, eval_ms=round(plain * 1e3, 2),
                           stages=stages, m2l_levels=levels, device=T.device_name("gpu"))
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        fcuda.CudaM2L.gathered_product = original_product
        fev.target_boxes = original_boxes
        fcuda.CudaM2L.level = original_level
        fcuda.CudaM2L.sparsity = original_sparsity
    if args.out:
        with open(args.out, "a") as fh:
            for row in rows:
                fh.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
