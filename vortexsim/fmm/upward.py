r"""Upward pass: P2M at the leaves, then M2M up to level 2.

Multipoles are normalized (M̃_m = M_m / w^|m|, :mod:`vortexsim.fmm.operators`) and, for
the 1/r far field, compressed to M̂ = Vᵀ M̃ right after P2M, so that M2M costs r² per
box and child (r = (P+1)²).  :class:`Upward` is the NumPy implementation;
:class:`vortexsim.fmm.cuda.CudaUpward` runs P2M in ``p2m_leaf`` (``kernels/cuda/fmm.cu``).

Ranks that hold the same sources and the same tree may share the leaves' work
(``ranks``, 1/r far field): each makes P2M and the compression of its run of the
occupied leaves (equal counts, in Morton order), the runs are gathered in rank order
(about (P+1)² · 24 bytes a leaf: 480 MB for 2^24 blobs at P = 16), and every rank makes
the M2M from the whole leaf level, so that every rank holds the same bits.
"""
from __future__ import annotations

import numpy as np

from ..backend import to_host
from . import expansions as E
from .operators import leaf_boxes, occupied_boxes

__all__ = ["Upward"]


class Upward:
    """P2M and M2M of the level-uniform tree; ``operators``: the evaluator's
    :class:`~vortexsim.fmm.operators.Operators`."""

    def __init__(self, operators):
        self.operators = operators
        self.device = operators.device

    def __call__(self, tree, xs, alpha_s, P, clock, harmonic=False, leaf_count="auto",
                 top=2, ranks=None):
        """Normalized multipoles per level, float64: dict level → M̃ (8^level, n, 3), or
        with ``harmonic`` (1/r far field) the compressed M̂ = Vᵀ M̃ (r, 8^level, 3),
        coefficient-major, whose M2M is r² per child (:meth:`Operators.compressed_shift`).

        xs [L], alpha_s [L³/T] (N, 3): the sources in the tree's order; P: the order;
        leaf_count: the leaves holding sources, for compressing only those where few
        are (:func:`~vortexsim.fmm.operators.leaf_boxes`: "auto", a host bound, None);
        top: the coarsest level made (2; the periodic box's M2L and far lattice need
        levels 1 and 0); ranks: a communicator whose ranks all make this call on the
        same sources and tree (1/r far field), to share the leaves (:meth:`shared_leaves`),
        or None."""
        ops = self.operators
        L = tree.depth
        mi = E.multi_indices(P)
        if harmonic and ranks is not None and ranks.size > 1:
            leaves, parents = self.shared_leaves(tree, xs, alpha_s, P, ranks, clock)
            out = {L: leaves}
            if L > top:                            # the occupied parents only
                out[L - 1] = ops.m2m_from_leaves(leaves, P, (parents * 8, None))
            self.m2m_above(out, L - 1, top, P)
            clock.lap("m2m")
            return out
        M = self.p2m(xs, alpha_s, tree.src_start, ops.box_centers(tree, L),
                     float(tree.box_width(L)), P)
        clock.lap("p2m")
        n = mi.n
        if harmonic:
            boxes = leaf_boxes(tree.src_start, self.device.xp, leaf_count)
            out = {L: ops.compress(M, P, boxes)}
            if boxes is not None and L > top:      # a sparse leaf level: its parents
                out[L - 1] = ops.m2m_from_leaves(out[L], P, boxes)
            self.m2m_above(out, L if boxes is None else L - 1, top, P)
            clock.lap("m2m")
            return out
        T, _ = ops.shift(P)
        out = {L: M}
        for level in range(L, top, -1):                            # M2M: one GEMM per level
            bp = 8 ** (level - 1)
            X = out[level].reshape(bp, 8, n, 3).transpose(1, 2, 0, 3).reshape(8 * n, bp * 3)
            out[level - 1] = (T @ X).reshape(n, bp, 3).transpose(1, 0, 2)
        clock.lap("m2m")
        return out

    def m2m_above(self, out, level, top, P):
        """Compressed M2M from ``level`` up to level ``top`` + 1 … ``top``: one GEMM per
        level over every box, into ``out`` (dict level → M̂ (r, 8^level, 3))."""
        Tc, _ = self.operators.compressed_shift(P)
        r = Tc.shape[0]
        for lev in range(level, top, -1):
            bp = 8 ** (lev - 1)
            X = out[lev].reshape(r, bp, 8, 3).transpose(2, 0, 1, 3).reshape(8 * r, bp * 3)
            out[lev - 1] = (Tc @ X).reshape(r, bp, 3)

    def shared_leaves(self, tree, xs, alpha_s, P, ranks, clock):
        """The compressed leaf multipoles M̂ (r, 8^L, 3) of every leaf, each rank making
        those of its run of the occupied leaves, and the occupied parents (k,) (level
        L − 1, int64), on every rank alike.

        The occupied leaves are listed on the device and counted on the host (one
        transfer); rank q takes the q-th of ``ranks.size`` runs of nearly equal counts.
        A run's sources are contiguous in the tree's order (the leaves between
        occupied ones are empty), so its P2M takes the run's own CSR starts.  The runs
        go to every rank box-major, (k, r, 3) each, through ``ranks.allgather_array``
        (NCCL on GPU ranks) or, without one, pickled host arrays."""
        ops = self.operators
        xp = self.device.xp
        L = tree.depth
        start = tree.src_start
        idx, _ = occupied_boxes(start, xp)
        k_all = int(idx.shape[0])
        bounds = [q * k_all // ranks.size for q in range(ranks.size + 1)]
        mine = idx[bounds[ranks.rank]:bounds[ranks.rank + 1]]
        _, V = ops.harmonic_bases(P)
        r = V.shape[1]
        if mine.shape[0]:
            run_start = xp.concatenate([start[mine], start[mine[-1:] + 1]])
            M = self.p2m(xs, alpha_s, run_start, ops.box_centers(tree, L)[mine],
                         float(tree.box_width(L)), P)
            part = xp.ascontiguousarray(ops.compress(M, P).transpose(1, 0, 2))
        else:
            part = xp.zeros((0, r, 3))
        clock.lap("p2m")
        counts = [hi - lo for lo, hi in zip(bounds[:-1], bounds[1:])]
        gather = getattr(ranks, "allgather_array", None)
        if gather is not None:
            runs = gather(part, counts=counts)
        else:
            runs = xp.asarray(np.concatenate(ranks.allgather(to_host(part))))
        leaves = xp.zeros((r, 8 ** L, 3))
        leaves[:, idx, :] = runs.transpose(1, 0, 2)
        clock.lap("p2m_gather")
        parents, _ = occupied_boxes(start[::8], xp)
        return leaves, parents

    def p2m(self, xs, alpha_s, src_start, centres, w, P):
        """Normalized multipoles M̃ (B, n, 3) of B boxes (centres (B, 3), edge w [L])
        from their sources xs, alpha_s[src_start[b]:src_start[b + 1]] (float64)."""
        mi = E.multi_indices(P)
        B = centres.shape[0]
        M = np.zeros((B, mi.n, 3))
        for box in np.nonzero(src_start[1:] > src_start[:-1])[0]:   # one GEMM per box
            s0, s1 = src_start[box], src_start[box + 1]
            M[box] = E.monomials((centres[box] - xs[s0:s1]) / w, P, np).T @ alpha_s[s0:s1]
        return M
