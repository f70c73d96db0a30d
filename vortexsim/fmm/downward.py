r"""Downward pass: L2L from level 2 to the leaves, then L2P at the targets.

Locals are normalized (L̃_k = L_k w^|k|) and, for the 1/r far field, arrive compressed
(L̂, r = (P+1)² per box) from the M2L; they are expanded once, at the leaves
(:meth:`~vortexsim.fmm.operators.Operators.decompress`).  L2P evaluates u = ∇×ψ and
∇u = ∇∇×ψ of the local expansion of ψ.  :class:`Downward` is the NumPy implementation;
:class:`vortexsim.fmm.cuda.CudaDownward` runs L2P in ``l2p_coefficients`` and
``l2p_targets_tiled`` (``kernels/cuda/fmm.cu``).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from . import expansions as E
from .operators import leaf_boxes

__all__ = ["Downward", "TargetPart", "l2p_coefficient_tables", "l2p_loop_order"]


@dataclasses.dataclass(eq=False)
class TargetPart:
    """One target set of an evaluation: its tree (own leaf order and CSR offsets), the
    index of its first target in the caller's array, its sorted points ys (m, 3) [L],
    whether it needs ∇u, and its sorted results u (m, 3), g (m, 3, 3) or None."""

    tree: object
    first: int
    ys: object
    grad: bool
    u: object = None
    g: object = None
    occupied: object = None          # leaves holding its targets, when known (host int)


class Downward:
    """L2L and L2P of the level-uniform tree; ``operators``: the evaluator's
    :class:`~vortexsim.fmm.operators.Operators`."""

    def __init__(self, operators):
        self.operators = operators
        self.device = operators.device

    def __call__(self, tree, locals_, parts, P, clock, harmonic=False, leaf_count="auto",
                 top=2, targets=None):
        """L2L to the leaves, then L2P added into each target part's u, g (sorted targets).

        ``locals_``: the M2L's normalized locals per level, compressed (r, 8^level, 3)
        with ``harmonic`` (1/r far field), else L̃ (8^level, n, 3).
        ``tree`` holds the union of the parts' targets (its ``tgt_start`` only marks
        which leaves need coefficients); each :class:`TargetPart` has its own tree.
        ``leaf_count``: the leaves holding targets (:meth:`to_leaves`); ``top``: the
        coarsest level of ``locals_`` (0 in the periodic box); ``targets``: the boxes
        leading to targets (:func:`~vortexsim.fmm.targets.target_boxes`) or None."""
        Ll = self.to_leaves(tree, locals_, P, clock, harmonic, leaf_count, top, targets)
        self.l2p(Ll, self.operators.box_centers(tree, tree.depth),
                 float(tree.box_width(tree.depth)), tree.tgt_start, parts, P)
        clock.lap("l2p")

    def to_leaves(self, tree, locals_, P, clock, harmonic=False, leaf_count="auto", top=2,
                  targets=None):
        """L2L from level ``top`` down: the leaves' normalized locals L̃ (8^L, n, 3) (adds
        into ``locals_``; arguments as :meth:`__call__`).  With ``harmonic``, leaves
        without targets get zero locals when few leaves hold targets (``leaf_count``:
        "auto", a host bound or None, :func:`~vortexsim.fmm.operators.leaf_boxes`).

        ``targets``: the boxes leading to targets per level
        (:func:`~vortexsim.fmm.targets.target_boxes`) or None (all).  With them, each
        level's L2L starts from the listed parents only (their children hold every
        listed child), and only the listed leaves are expanded: the other boxes' locals
        are not carried down (they lead to no target) and the other leaves' are zero."""
        ops = self.operators
        L = tree.depth
        n = E.multi_indices(P).n
        if harmonic:
            # compressed locals L̂ (r, 8^level, 3): L2L at r² per child, then L̃ = U L̂
            _, Rc = ops.compressed_shift(P)
            r = Rc.shape[1]
            boxes = leaf_boxes(tree.tgt_start, self.device.xp, leaf_count)
            for level in range(top + 1, L + 1):
                if level == L and boxes is not None:   # a sparse leaf level: its listed leaves
                    ops.l2l_to_leaves(locals_[level - 1], locals_[level], P, boxes)
                    continue
                parents = None if targets is None else targets.get(level - 1)
                if parents is not None:                # only the parents leading to targets
                    self.l2l_listed(Rc, locals_[level - 1], locals_[level], parents.boxes,
                                    harmonic=True)
                    continue
                bp = 8 ** (level - 1)
                Y = Rc @ locals_[level - 1].reshape(r, bp * 3)     # (8r, bp·3)
                locals_[level] += Y.reshape(8, r, bp, 3).transpose(1, 2, 0, 3) \
                    .reshape(r, 8 * bp, 3)
            leaves = None if targets is None else targets.get(L)
            if boxes is None and leaves is not None:   # the listed leaves, the others zero
                boxes = (leaves.boxes, None)
            Ll = ops.decompress(locals_[L], P, boxes)
        else:
            _, R = ops.shift(P)
            for level in range(top + 1, L + 1):                    # L2L: one GEMM per level
                parents = None if targets is None else targets.get(level - 1)
                if parents is not None:                # only the parents leading to targets
                    self.l2l_listed(R, locals_[level - 1], locals_[level], parents.boxes,
                                    harmonic=False)
                    continue
                bp = 8 ** (level - 1)
                Y = (R @ locals_[level - 1].transpose(1, 0, 2).reshape(n, bp * 3))
                locals_[level] += Y.reshape(8, n, bp, 3).transpose(2, 0, 1, 3) \
                    .reshape(8 * bp, n, 3)
            Ll = locals_[L]
        clock.lap("l2l")
        return Ll

    def l2l_listed(self, R, Lp, Lc, parents, harmonic):
        """L2L from the listed ``parents`` (k,) only: adds R L_parent into their 8
        children of the child level's locals ``Lc`` (in place).  ``harmonic``: compressed
        locals (r, B, 3) and R = Rc (8r, r); else L̃ (B, n, 3) and R (8n, n).  One GEMM
        over the gathered parents, scattered to children 8·parent + c (distinct)."""
        xp = self.device.xp
        k = parents.shape[0]
        if k == 0:
            return
        kids = (8 * parents[None, :] + xp.arange(8)[:, None]).reshape(-1)   # (8k,) c-major
        if harmonic:
            r = R.shape[1]
            Y = (R @ Lp[:, parents, :].reshape(r, k * 3)).reshape(8, r, k, 3)
            Lc[:, kids, :] += Y.transpose(1, 0, 2, 3).reshape(r, 8 * k, 3)
        else:
            n = R.shape[1]
            Y = (R @ Lp[parents].transpose(1, 0, 2).reshape(n, k * 3)).reshape(8, n, k, 3)
            Lc[kids] += Y.transpose(0, 2, 1, 3).reshape(8 * k, n, 3)

    def l2p_values(self, Ll, centres, w, tree, ys, P, occupied=None):
        """The value ψ = (1/4π) Σ_k L̃_k ĥ^k (M, 3) of the expanded field itself (not its
        curl) at the sorted targets ys (M, 3) [L] of ``tree`` (ĥ = (y − c)/w); float64
        (``occupied``: GPU block sizing)."""
        out = np.zeros((ys.shape[0], 3))
        ts = tree.tgt_start
        for box in np.nonzero(ts[1:] > ts[:-1])[0]:                # one GEMM per leaf
            t0, t1 = ts[box], ts[box + 1]
            out[t0:t1] = E.monomials((ys[t0:t1] - centres[box]) / w, P, np) @ Ll[box]
        return E.INV_4PI * out

    def l2p(self, Ll, centres, w, tgt_start, parts, P):
        """L2P: the locals L̃ (B, n, 3) of B leaves (centres (B, 3), edge w [L]) added
        into each target part's u, g; ``tgt_start`` (B + 1,): the union of the parts'
        targets per leaf (leaves without targets are skipped); each part's tree holds
        its own CSR over the same B leaves."""
        for part in parts:
            ts, ys = part.tree.tgt_start, part.ys
            for box in np.nonzero(ts[1:] > ts[:-1])[0]:            # two GEMMs per leaf
                t0, t1 = ts[box], ts[box + 1]
                uc, gc = E.l2p_box(Ll[box], (ys[t0:t1] - centres[box]) / w, P, np,
                                   gradient=part.grad)
                part.u[t0:t1] += uc / w
                if part.grad:
                    part.g[t0:t1] += gc / (w * w)


def l2p_coefficient_tables(order):
    """Gather tables of the GPU L2P: per-leaf coefficients C from normalized locals L̃.

    For the n1 = n(order − 1) monomials ĥ^j, row j of C holds 12 values: the
    coefficients of u_a (a = 0..2) and of ∂_d u_a (3a + d, zero at degree order − 1),
    each the sum of two terms ± f · L̃[k, c] (from u_a = ε_abc ∂_b ψ_c / 4π):

        u_a[j]     = Σ_bc ε_abc (j_b + 1) L̃[j + e_b, c] / (4π w)
        ∂_d u_a[j] = Σ_bc ε_abc (j_d + 1)((j + e_d)_b + 1) L̃[j + e_d + e_b, c] / (4π w²)

    Returns idx (2, n1·12) int64 into L̃ flattened as (n·3), and fu, fg (2, n1·12):
    the factors are fu / w + fg / w² (fu holds the u rows, fg the ∂u rows).  Rows (j)
    come in the order of the kernel loops, :func:`l2p_loop_order` (l2p_targets_tiled
    stages contiguous ranges of rows).
    """
    mi = E.multi_indices(order)
    k = E.multi_indices(max(order - 1, 0)).k                       # (n1, 3): j
    n1 = k.shape[0]
    idx = np.zeros((2, n1, 12), dtype=np.int64)
    fu = np.zeros((2, n1, 12))
    fg = np.zeros((2, n1, 12))
    terms = {0: ((1, 2, 1.0), (2, 1, -1.0)), 1: ((2, 0, 1.0), (0, 2, -1.0)),
             2: ((0, 1, 1.0), (1, 0, -1.0))}
    eye = np.eye(3, dtype=np.int64)
    grad = k.sum(axis=1) <= order - 2                    # rows with a gradient term

    def index(kk):
        return mi.index[kk[:, 0], kk[:, 1], kk[:, 2]]

    # whole columns at once (a Python loop over rows cost ~50 ms at order 16, at the
    # first evaluation of every order)
    for a in range(3):
        for t, (b, c, sign) in enumerate(terms[a]):
            idx[t, :, a] = index(k + eye[b]) * 3 + c
            fu[t, :, a] = sign * (k[:, b] + 1) * E.INV_4PI
            for d in range(3):
                kd = k[grad] + eye[d]
                col = 3 + 3 * a + d
                idx[t, grad, col] = index(kd + eye[b]) * 3 + c
                fg[t, grad, col] = sign * (k[grad, d] + 1) * (kd[:, b] + 1) * E.INV_4PI
    perm = l2p_loop_order(order)
    return (idx[:, perm].reshape(2, -1), fu[:, perm].reshape(2, -1),
            fg[:, perm].reshape(2, -1))


def l2p_loop_order(order):
    """Indices (n1,) into multi_indices(order − 1) in the order of the L2P kernel loops
    (kx = 0..D, ky = 0..D − kx, kz = 0..D − kx − ky; D = order − 1)."""
    m1 = E.multi_indices(max(order - 1, 0))
    top = max(order - 1, 0)
    return np.array([m1.index[kx, ky, kz] for kx in range(top + 1)
                     for ky in range(top + 1 - kx) for kz in range(top + 1 - kx - ky)])
