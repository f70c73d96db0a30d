r"""Upward pass: P2M at the leaves, then M2M up to level 2.

Multipoles are normalized (M̃_m = M_m / w^|m|, :mod:`vortexsim.fmm.operators`) and, for
the 1/r far field, compressed to M̂ = Vᵀ M̃ right after P2M, so that M2M costs r² per
box and child (r = (P+1)²).  :class:`Upward` is the NumPy implementation;
:class:`vortexsim.fmm.cuda.CudaUpward` runs P2M in ``p2m_leaf`` (``kernels/cuda/fmm.cu``).
"""
from __future__ import annotations

import numpy as np

from . import expansions as E
from .operators import leaf_boxes

__all__ = ["Upward"]


class Upward:
    """P2M and M2M of the level-uniform tree; ``operators``: the evaluator's
    :class:`~vortexsim.fmm.operators.Operators`."""

    def __init__(self, operators):
        self.operators = operators
        self.device = operators.device

    def __call__(self, tree, xs, alpha_s, P, clock, harmonic=False, leaf_count="auto",
                 top=2):
        """Normalized multipoles per level, float64: dict level → M̃ (8^level, n, 3), or
        with ``harmonic`` (1/r far field) the compressed M̂ = Vᵀ M̃ (r, 8^level, 3),
        coefficient-major, whose M2M is r² per child (:meth:`Operators.compressed_shift`).

        xs [L], alpha_s [L³/T] (N, 3): the sources in the tree's order; P: the order;
        leaf_count: the leaves holding sources, for compressing only those where few
        are (:func:`~vortexsim.fmm.operators.leaf_boxes`: "auto", a host bound, None);
        top: the coarsest level made (2; the periodic box's M2L and far lattice need
        levels 1 and 0)."""
        ops = self.operators
        L = tree.depth
        mi = E.multi_indices(P)
        M = self.p2m(xs, alpha_s, tree.src_start, ops.box_centers(tree, L),
                     float(tree.box_width(L)), P)
        clock.lap("p2m")
        n = mi.n
        if harmonic:
            boxes = leaf_boxes(tree.src_start, self.device.xp, leaf_count)
            out = {L: ops.compress(M, P, boxes)}
            Tc, _ = ops.compressed_shift(P)
            r = Tc.shape[0]
            for level in range(L, top, -1):                        # M2M: one GEMM per level
                if level == L and boxes is not None:   # a sparse leaf level: its parents
                    out[level - 1] = ops.m2m_from_leaves(out[level], P, boxes)
                    continue
                bp = 8 ** (level - 1)
                X = out[level].reshape(r, bp, 8, 3).transpose(2, 0, 1, 3).reshape(8 * r, bp * 3)
                out[level - 1] = (Tc @ X).reshape(r, bp, 3)
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
