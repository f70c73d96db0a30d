r"""CUDA backend of the FMM stages (CuPy arrays, kernels from ``kernels/cuda/``).

Each class here is the GPU implementation of a stage whose NumPy implementation (the
specification) lives in that stage's module, with the same call signatures; the
evaluator picks one set of them once, from its device (:mod:`vortexsim.fmm.stages`).

=====================  ==========================================  ========================
stage                  GPU kernels (``kernels/cuda/``)             NumPy implementation
=====================  ==========================================  ========================
:class:`CudaNearField` ``p2p_near`` (fmm.cu),                      :class:`near.NearField`
                       ``p2p_fields`` (fields.cu)
:class:`CudaUpward`    ``p2m_leaf`` (fmm.cu)                       :class:`upward.Upward`
:class:`CudaM2L`       ``vortexsim_m2l_gather`` (m2l_gather.cuh),  :class:`m2l.M2L`
                       ``m2l_gather_sum`` (fmm.cu), cuBLAS GEMMs
:class:`CudaDownward`  ``l2p_coefficients``, ``l2p_targets_tiled``  :class:`downward.Downward`
                       (fmm.cu), ``l2p_values`` (fields.cu)
:func:`stencil_pair_counts` ``stencil_pair_count`` (fmm.cu)        :func:`plan.near_pairs_by_depth`
:func:`shifted_tagged`, :func:`tagged_centres`  adaptive_keys.cuh  :mod:`adaptive`
=====================  ==========================================  ========================

:class:`CudaBackend` holds the streams: the near field of each target set runs on its
own non-blocking stream (:class:`NearLanes`), and the adaptive tree's near field on a
side stream.  CuPy is imported only when one of these runs (never at import time).
"""
from __future__ import annotations

import numpy as np

from ..backend import import_cupy
from ..backend.memory import gpu_total_memory
from ..kernels.direct import source_parameters
from ..kernels.modules import CTYPES, elementwise_kernel, get_function
from . import expansions as E
from .downward import Downward, l2p_coefficient_tables, l2p_loop_order
from .m2l import M2L, PairLists
from .near import NearField, SerialLanes, half_stencil
from .tree import neighbor_table
from .upward import Upward

__all__ = ["CudaBackend", "CudaNearField", "CudaUpward", "CudaM2L", "CudaDownward",
           "NearLanes", "gather_columns", "stencil_pair_counts", "chunk_starts",
           "near_block_for", "block_for", "shifted_tagged", "tagged_centres"]


class NearLanes:
    """The near field of each target set on its own non-blocking stream, forked from the
    current (main) stream after the tree is queued and joined before L2P adds into the
    same sums.  ``n``: the number of target sets; streams are cached in ``cache``."""

    concurrent = True

    def __init__(self, cache, n):
        cp = import_cupy()
        self.cp = cp
        self.main = cp.cuda.get_current_stream()
        tree_ready = cp.cuda.Event(disable_timing=True)
        tree_ready.record(self.main)
        self.streams = [cache.get(("near_stream", i), lambda: cp.cuda.Stream(
            non_blocking=True)) for i in range(n)]
        for stream in self.streams:
            stream.wait_event(tree_ready)
        self.done = []

    def run(self, i, work):
        """``work()`` queued on lane ``i``; returns its result (device arrays)."""
        with self.streams[i]:
            out = work()
        self.done.append(self.cp.cuda.Event(disable_timing=True))
        self.done[-1].record(self.streams[i])
        return out

    def join(self):
        """The main stream waits for every lane's work (queued, not synchronized)."""
        for event in self.done:
            self.main.wait_event(event)


class CudaBackend:
    """Device services of the GPU stages: streams, host scalars, memory size."""

    kind = "gpu"

    def __init__(self, cache):
        self.cache = cache

    def near_lanes(self, n, sync):
        """:class:`NearLanes` for ``n`` target sets; one stream when ``sync`` (profiling
        keeps the stage laps separate)."""
        return SerialLanes() if sync else NearLanes(self.cache, n)

    def side_stream(self, sync):
        """A second, non-blocking CUDA stream of this evaluator (the adaptive tree's
        near field runs there while the host builds the rest of the tree), or None when
        ``sync`` (profiling)."""
        if sync:
            return None
        cp = import_cupy()
        return self.cache.get(("side_stream",), lambda: cp.cuda.Stream(non_blocking=True))

    def host_floats(self, values):
        """Host floats of 0-d device arrays ``values``, in one transfer."""
        cp = import_cupy()
        return [float(v) for v in cp.stack(values).get()]

    def total_memory(self):
        """The GPU's memory [bytes]."""
        return gpu_total_memory()


def near_block_for(n_points, n_leaves):
    """Threads per block of the near-field kernel (one block per chunk of a leaf's
    targets): 32 up to a mean of 32 targets per leaf, 64 up to 256, else 128 (measured
    per mean leaf size: docs/fmm-design.md, "Calibration data")."""
    mean = n_points / max(n_leaves, 1)
    return 32 if mean <= 32 else 64 if mean <= 256 else 128


def block_for(n_points, n_leaves):
    """Threads per block for kernels with one block per leaf (L2P): ~ the mean leaf size."""
    mean = n_points / max(n_leaves, 1)
    return 32 if mean <= 32 else 64 if mean <= 64 else 128


def chunk_starts(tree, block, m):
    """Blocks of ``block`` targets of one leaf each (GPU kernels over crowded leaves):
    chunk_start (n_leaves + 1,) int64, the first block of each leaf, and the grid size,
    bounded by n_leaves + m / block without a host transfer (spare blocks return)."""
    cp = import_cupy()
    chunks = (cp.diff(tree.tgt_start) + (block - 1)) // block
    chunk_start = cp.concatenate([cp.zeros(1, cp.int64), cp.cumsum(chunks)])
    return chunk_start, tree.n_leaves + -(-m // block)


class CudaNearField(NearField):
    """:class:`~vortexsim.fmm.near.NearField` in ``p2p_near`` (one target per thread,
    blocks of one leaf's targets, sources staged through shared memory)."""

    def device_neighbors(self, depth, symmetric=False):
        """:meth:`neighbors` on the GPU, or its :func:`~vortexsim.fmm.near.half_stencil`
        with ``symmetric`` (cached per depth)."""
        cp = import_cupy()
        # made on the device: on the host, the radius-2 table of the diagnostics' fields
        # pass cost ~0.17 s at its first use (32 768 × 125 keys at depth 5)
        full = self.cache.get(("nbr_d", depth, self.radius),
                              lambda: neighbor_table(depth, self.radius, cp))
        if symmetric:
            return self.cache.get(("nbr_half_d", depth, self.radius),
                                  lambda: cp.ascontiguousarray(half_stencil(full)))
        return full

    def prepare(self, depth, symmetric=False):
        """The neighbour table on the device before the streams fork (made lazily inside
        one target set's stream, another set's stream could read it before its copy
        landed)."""
        self.device_neighbors(depth, symmetric)

    def __call__(self, tree, xs, alpha_s, sigma_s, ys, exclude_self, gradient, occupied=None,
                 uniform=False, nbr=None):
        cp = import_cupy()
        dtype = self.dtype
        nbr_d = self.device_neighbors(tree.depth) if nbr is None else nbr
        # one target per thread (two in float32 need more registers and ran slower)
        block = near_block_for(ys.shape[0], occupied or tree.n_leaves)
        name = (f"p2p_near<{CTYPES[dtype.name]},{self.kernel.code},"
                f"{'true' if gradient else 'false'},{block},256,"
                f"{'true' if uniform else 'false'}>")
        fn = get_function("fmm.cu", name)
        m = ys.shape[0]
        u = cp.empty((m, 3), dtype)
        g = cp.empty((m, 3, 3), dtype) if gradient else u
        param = source_parameters(self.kernel, sigma_s.astype(dtype), cp).astype(dtype)
        # blocks of `block` targets of one leaf each (so that a few crowded leaves still
        # fill the GPU); their number is bounded by n_leaves + m / block, which sizes the
        # grid without a host transfer (spare blocks return at once)
        chunk_start, grid = chunk_starts(tree, block, m)
        fn((grid,), (block,),
           (cp.ascontiguousarray(xs, dtype=dtype), cp.ascontiguousarray(alpha_s, dtype=dtype),
            cp.ascontiguousarray(param), tree.src_start, cp.ascontiguousarray(ys, dtype=dtype),
            tree.tgt_start, nbr_d, np.int32(nbr_d.shape[1]), np.int32(1 if exclude_self else 0),
            chunk_start, np.int32(tree.n_leaves), dtype.type(self.table_cut()), u, g))
        return (u.astype(cp.float64, copy=False),
                (g.astype(cp.float64, copy=False) if gradient else None))


    def fields(self, tree, xs, alpha_s, sigma_s, ys, sigma_t, nbr=None, occupied=None,
               uniform=False, symmetric=False):
        """:meth:`NearField.fields <vortexsim.fmm.near.NearField.fields>` in
        ``p2p_fields`` (``kernels/cuda/fields.cu``), float64; ``occupied``: the leaves
        holding targets, when known (block size); ``uniform``: every source and target
        core is the same (records without per-source parameters); ``symmetric``: half
        the stencil, shares (as there)."""
        cp = import_cupy()
        f64 = cp.float64
        if nbr is None:
            nbr_d = self.device_neighbors(tree.depth, symmetric)
        else:
            nbr_d = cp.ascontiguousarray(half_stencil(nbr)) if symmetric else nbr
        m = ys.shape[0]
        block = near_block_for(m, occupied or tree.n_leaves)
        fn = get_function("fields.cu", f"p2p_fields<{self.kernel.code},{block},128,"
                                       f"{'true' if uniform else 'false'}>")
        u, psi, omega = (cp.empty((m, 3), f64) for _ in range(3))
        sigma_s = cp.ascontiguousarray(sigma_s, dtype=f64)
        param = source_parameters(self.kernel, sigma_s, cp).astype(f64)
        chunk_start, grid = chunk_starts(tree, block, m)
        fn((grid,), (block,),
           (cp.ascontiguousarray(xs, dtype=f64), cp.ascontiguousarray(alpha_s, dtype=f64),
            sigma_s, cp.ascontiguousarray(param), tree.src_start,
            cp.ascontiguousarray(ys, dtype=f64), cp.ascontiguousarray(sigma_t, dtype=f64),
            tree.tgt_start, nbr_d, np.int32(nbr_d.shape[1]), chunk_start,
            np.int32(tree.n_leaves), np.float64(self.table_cut()),
            np.float64(self.field_cut() or 0.0), np.int32(1 if symmetric else 0), u, psi,
            omega))
        return u, psi, omega


class CudaUpward(Upward):
    """:class:`~vortexsim.fmm.upward.Upward` with P2M in ``p2m_leaf`` (one block per box)."""

    def p2m(self, xs, alpha_s, src_start, centres, w, P):
        xp = self.device.xp
        mi = E.multi_indices(P)
        B = centres.shape[0]
        kidx = self.operators.cache.get(("kidx", P), lambda: xp.asarray(mi.k.astype(np.int32)))
        M = xp.empty((B, mi.n, 3))
        if B:
            get_function("fmm.cu", f"p2m_leaf<{P},128>")(
                (B,), (128,),
                (xp.ascontiguousarray(xs), xp.ascontiguousarray(alpha_s), src_start,
                 xp.ascontiguousarray(centres), np.float64(1.0 / w), kidx, M))
        return M


class CudaDownward(Downward):
    """:class:`~vortexsim.fmm.downward.Downward` with L2P in two kernels: per-leaf
    coefficients (``l2p_coefficients``), then the targets (``l2p_targets_tiled``)."""

    def l2p(self, Ll, centres, w, tgt_start, parts, P):
        xp = self.device.xp
        n = Ll.shape[1]
        idx, fu, fg = self.operators.cache.get(("l2p_tables", P), lambda: tuple(
            xp.asarray(a) for a in l2p_coefficient_tables(P)))
        B, n_out = Ll.shape[0], idx.shape[1]
        C = xp.empty((B, n_out))
        get_function("fmm.cu", "l2p_coefficients")(
            (B,), (256,),
            (Ll, idx, fu, fg, np.float64(1.0 / w), np.int32(n * 3), np.int32(n_out),
             np.int64(B), tgt_start, C))
        centres = xp.ascontiguousarray(centres)
        for part in parts:
            m = part.ys.shape[0]
            block = block_for(m, part.occupied or B)
            chunk_start, grid = chunk_starts(part.tree, block, m)
            get_function("fmm.cu", f"l2p_targets_tiled<{P},"
                         f"{'true' if part.grad else 'false'},{block},64>")(
                (grid,), (block,),
                (C, centres, np.float64(1.0 / w), part.tree.tgt_start, chunk_start,
                 np.int32(B), part.ys, part.u,
                 part.g if part.grad else part.u))


    def l2p_values(self, Ll, centres, w, tree, ys, P, occupied=None):
        """:meth:`Downward.l2p_values <vortexsim.fmm.downward.Downward.l2p_values>` in
        ``l2p_values`` (``kernels/cuda/fields.cu``)."""
        xp = self.device.xp
        m = ys.shape[0]
        out = xp.zeros((m, 3))
        perm = self.operators.cache.get(("l2p_values_order", P), lambda: xp.asarray(
            l2p_loop_order(P + 1).astype(np.int32)))
        block = block_for(m, occupied or tree.n_leaves)
        chunk_start, grid = chunk_starts(tree, block, m)
        get_function("fields.cu", f"l2p_values<{P},{block}>")(
            (grid,), (block,),
            (xp.ascontiguousarray(Ll), perm, xp.ascontiguousarray(centres),
             np.float64(1.0 / w), tree.tgt_start,
             chunk_start, np.int32(tree.n_leaves), xp.ascontiguousarray(ys), out))
        return out


class CudaM2L(M2L):
    """:class:`~vortexsim.fmm.m2l.M2L` on the GPU: the class GEMMs gather box-major
    multipoles with one kernel (:func:`gather_columns`) against offset-major cores, every
    class's cores are cached, and levels with
    few non-empty boxes may take the sparse M2L (:meth:`sparse`)."""

    sparse_capable = True
    pairs_capable = True
    cache_all_cores = True
    gathered_components = 3

    def pairs(self, level, sep):
        pairs = self.pairs_host(level, sep)
        xp = self.device.xp
        return self.cache.get(("m2l_pairs_d", level, sep),
                              lambda: [(d, xp.asarray(t), xp.asarray(s)) for d, t, s in pairs])

    def gather_copy(self, Mcm):
        """Mcm (r, S + 1, 3) box-major, (S + 1, r, 3): each source box's block is
        contiguous for :func:`gather_columns` (one transposing copy of the level)."""
        return self.device.xp.ascontiguousarray(Mcm.transpose(1, 0, 2))

    def gather_operands(self, Mt, mdt):
        """(None, Mbm): the GPU's product reads only the box-major copy Mbm (S + 1, r, 3)
        in ``mdt`` with its zero row S, made in one transposing copy (no
        coefficient-major copy with a zero column first)."""
        xp = self.device.xp
        r, S = Mt.shape[0], Mt.shape[1]
        Mbm = xp.empty((S + 1, r, 3), mdt)
        Mbm[:S] = Mt.transpose(1, 0, 2)
        Mbm[S] = 0
        return None, Mbm

    def gathered_product(self, Kp, Mcm, Mcc, g, mdt):
        r = Kp.shape[0]
        ns, nj = g.shape
        X = gather_columns(Mcc, g).reshape(3 * nj, ns * r)
        return (Kp @ X.T).reshape(r, nj, 3)

    def pair_device_tables(self, P, sep, mdt):
        """Cached device tables of the sparse M2L by offset: ``offs`` (n, 3) int32 the
        slots' offsets, ``slot_index`` (343,) int32 each OFFSETS_3 offset's slot (−1: none)
        and ``Kt`` [(bucket, first slot, n_b, Kt_b (n_b, r, r))], Kt_b[i] = K_d(i)ᵀ."""
        def build():
            cp = import_cupy()
            slots, bucket = self.pair_slots(sep)
            index = np.full(343, -1, dtype=np.int32)
            index[slots] = np.arange(len(slots), dtype=np.int32)
            K = E.unit_m2l_cores(P, 3, cp)
            r = K.shape[0]
            Kt3 = K.reshape(r, 343, r).transpose(2, 1, 0)        # [j, o, i] = K_o[i, j]
            kt = []
            for b in range(4):
                sel = np.nonzero(bucket == b)[0]
                if sel.size:
                    kt.append((b, int(sel[0]), int(sel.size), cp.ascontiguousarray(
                        Kt3[:, cp.asarray(slots[sel]), :].transpose(1, 0, 2)).astype(
                            mdt, copy=False)))
            return {"offs": cp.asarray(E.OFFSETS_3[slots].astype(np.int32)),
                    "slot_index": cp.asarray(index), "Kt": kt}
        return self.cache.get(("m2l_pair_tables", P, sep, np.dtype(mdt).name), build)

    def pair_counts(self, src_cnt, tgt_cnt, level, sep):
        cp = import_cupy()
        slots, _ = self.pair_slots(sep)
        offs = self.cache.get(("m2l_pair_offs", sep), lambda: cp.asarray(
            E.OFFSETS_3[slots].astype(np.int32)))
        counts = cp.empty(len(slots), dtype=cp.int64)
        get_function("fmm.cu", "m2l_pair_slots")(
            (len(slots),), (256,),
            (src_cnt.astype(cp.int64, copy=False), tgt_cnt.astype(cp.int64, copy=False),
             np.int32(level), offs, 0, 0, 0, 0, counts))
        return counts

    def _sparse_pairs(self, level, sep, Mt, P, info, mdt):
        """Compressed locals Lt (r, B, 3) of the sparse M2L by offset
        (:class:`~vortexsim.fmm.m2l.PairLists`): the pair lists (``m2l_pair_slots``), the
        gathered multipoles (``m2l_pair_gather``), one batched GEMM per bucket of offsets,
        then each target's sum (``m2l_pair_sum``)."""
        cp = import_cupy()
        r, B = Mt.shape[0], Mt.shape[1]
        T = "float" if mdt == np.float32 else "double"
        lay = info.layout
        cap, base, abase = info.tables
        dev = self.pair_device_tables(P, sep, mdt)
        n_slot = len(lay["tables"][0])
        src = info.src_cnt.astype(cp.int64, copy=False)
        tgt = info.tgt_cnt.astype(cp.int64, copy=False)
        slot_src = cp.empty(max(int(lay["tables"][0].sum()), 1), dtype=cp.int64)
        slot_of = cp.empty(n_slot * B, dtype=cp.int32)
        counts = cp.empty(n_slot, dtype=cp.int64)
        get_function("fmm.cu", "m2l_pair_slots")(
            (n_slot,), (256,), (src, tgt, np.int32(level), dev["offs"], cap, base, slot_src,
                                slot_of, counts))
        size = max(lay["y_size"], 1)
        A = cp.empty(size, dtype=mdt)
        widest = int(3 * lay["caps"].max() * r)
        if widest:
            get_function("fmm.cu", f"m2l_pair_gather<{T}>")(
                (min(-(-widest // 256), 1024), n_slot), (256,),
                (Mt, np.int64(B), np.int32(r), cap, base, counts, abase, slot_src, A))
        Y = cp.empty(size, dtype=mdt)
        host_cap, _, host_abase = lay["tables"]
        for _, first, n_b, Kt_b in dev["Kt"]:
            c_b = int(host_cap[first])
            if c_b:
                a0 = int(host_abase[first])
                a1 = a0 + n_b * 3 * c_b * r
                cp.matmul(A[a0:a1].reshape(n_b, 3 * c_b, r), Kt_b,
                          out=Y[a0:a1].reshape(n_b, 3 * c_b, r))
        tables = self.sparse_tables(P, sep, mdt)
        gather = self.cache.get(("m2l_gather_all", level, sep), lambda: cp.ascontiguousarray(
            cp.stack([g for _, g in self.classes(level, sep)])))
        Lt = cp.empty((r, B, 3))
        passes = -(-r // 256)
        threads = 32 * -(-(-(-r // passes)) // 32)
        get_function("fmm.cu", f"m2l_pair_sum<{T}>")(
            (B,), (threads,),
            (Y, abase, cap, slot_of, dev["slot_index"], gather, tables["q_all_raw"][1],
             np.int32(gather.shape[2]), src, tgt, np.int32(r), np.int64(B),
             tables["Kt_all"], Mt, Lt))
        return Lt

    def sparse(self, tree, level, sep, Mt, P, info, mdt=np.float64):
        """Compressed locals Lt (r, B, 3) from the non-empty source boxes only.

        Per source class c one GEMM Y_c = Mt[:, active_c]ᵀ · [C_oᵀ]_{o ∈ O'_c} (O'_c: the
        offsets d for which a box of class c is the source s = t + d of an interacting
        target t), then ``m2l_gather_sum`` sums each target's blocks.  Same operators and
        result as the dense path up to round-off; used where most boxes are empty.
        """
        if isinstance(info, PairLists):
            return self._sparse_pairs(level, sep, Mt, P, info, mdt)
        cp = import_cupy()
        classes, colmap, tgt_cnt, (unified, y_size, ybs) = info
        r, B = Mt.shape[0], Mt.shape[1]
        tables = self.sparse_tables(P, sep, mdt)
        if unified:
            # few active boxes: one GEMM against all 343 cores, read once
            lst = cp.concatenate([lst for _, lst in classes])
            A = Mt[:, lst, :].transpose(1, 2, 0).reshape(-1, r).astype(mdt)
            Y = A @ tables["Kt_all"]
            qcls, qidx = tables["q_all_raw"]
        else:
            Y = cp.empty(max(y_size, 1), dtype=mdt)
            pos = 0
            for c, (n_c, lst) in enumerate(classes):
                if n_c:
                    A = Mt[:, lst, :].transpose(1, 2, 0).reshape(3 * n_c, r).astype(mdt)
                    size = 3 * n_c * tables["Kt"][c].shape[1]
                    cp.matmul(A, tables["Kt"][c], out=Y[pos:pos + size].reshape(3 * n_c, -1))
                    pos += size
            qcls, qidx = tables["q_all"]
        ybase, ystride = ybs[0], ybs[1]
        Lt = cp.empty((r, B, 3))
        fn = get_function("fmm.cu", f"m2l_gather_sum<{'float' if mdt == np.float32 else 'double'}>")
        gather = self.cache.get(("m2l_gather_all", level, sep), lambda: cp.ascontiguousarray(
            cp.stack([g for _, g in self.classes(level, sep)])))
        # threads: r split evenly over ceil(r / 256) passes, rounded up to whole warps
        passes = -(-r // 256)
        threads = 32 * -(-(-(-r // passes)) // 32)
        fn((B,), (threads,),
           (Y, ybase, ystride, gather, qcls, qidx, np.int32(gather.shape[2]), colmap, tgt_cnt,
            np.int32(r), np.int64(B), tables["Kt_all"], Mt, tables["q_all_raw"][1], Lt))
        return Lt


def gather_columns(Mbm, g):
    """X (nj, 3, ns, r) with X[j, c, o, k] = Mbm[g[o, j], k, c] (GPU): the transposed
    right-hand side of the dense M2L's class GEMM, gathered from box-major multipoles
    Mbm (S + 1, r, 3) by one kernel whose reads and writes are all coalesced
    (``vortexsim_m2l_gather``; ``cupy.take`` is far slower)."""
    cp = import_cupy()
    r = Mbm.shape[1]
    gT = cp.ascontiguousarray(g)
    ns, nj = gT.shape
    X = cp.empty((nj, 3, ns, r), Mbm.dtype)
    size = r * ns * nj
    if size >= 1 << 32:
        raise ValueError(f"M2L gather of {size} vectors exceeds the kernel's 32-bit index; "
                         "lower the M2L's chunk_bytes.")
    if size:
        elementwise_kernel("vortexsim_m2l_gather")(
            cp.ascontiguousarray(Mbm), gT, np.int32(ns), np.int32(nj), np.int32(r), X,
            size=size)
    return X


def stencil_pair_counts(cs, ct, same, depth_max, radius):
    """GPU part of :func:`vortexsim.fmm.plan.near_pairs_by_depth`: one counting kernel per
    depth on the integer grids cs, ct (2^depth_max)³, coarsened by 2×2×2 sums; one host
    transfer.  Returns (pairs, occupied), each (depth_max + 1,) float64 on the host."""
    cp = import_cupy()
    fn = get_function("fmm.cu", "stencil_pair_count")
    out = cp.zeros((depth_max + 1, 2), cp.uint64)
    cs = cs.astype(cp.int64, copy=False)
    ct = cs if same else ct.astype(cp.int64, copy=False)
    for depth in range(depth_max, -1, -1):
        side = cs.shape[0]
        fn((-(-side ** 3 // 256),), (256,), (cs, ct, np.int32(side),
                                             np.int32(radius), out[depth]))
        if depth:
            h = side // 2
            cs = cs.reshape(h, 2, h, 2, h, 2).sum(axis=(1, 3, 5))
            ct = cs if same else ct.reshape(h, 2, h, 2, h, 2).sum(axis=(1, 3, 5))
    out = out.get().astype(np.float64)
    return out[:, 0], out[:, 1]


def shifted_tagged(keys, offsets):
    """GPU :func:`vortexsim.fmm.adaptive.shifted`: tagged keys (n, k) of the boxes at
    ``offsets`` (k, 3) from the boxes of tagged keys ``keys`` (n,), −1 outside the grid
    (one ``vortexsim_adaptive_shift_tagged`` launch)."""
    cp = import_cupy()
    d = cp.asarray(offsets, dtype=cp.int64)
    return elementwise_kernel("vortexsim_adaptive_shift_tagged")(
        keys[:, None], d[None, :, 0], d[None, :, 1], d[None, :, 2])


def tagged_centres(keys, lo, width, out):
    """GPU :func:`vortexsim.fmm.adaptive.centres`: centres (n, 3) [L] of the boxes of
    tagged keys ``keys`` (n,) of the cube [lo, lo + width)³, written into ``out``
    (one ``vortexsim_adaptive_centres`` launch)."""
    cp = import_cupy()
    elementwise_kernel("vortexsim_adaptive_centres")(
        keys, cp.asarray(lo, dtype=cp.float64), float(width), out)
    return out
