r"""Translation operators of the level-uniform passes and the evaluator's cache.

Expansions are kept normalized at every level: M̃_m = M_m / w^|m| and L̃_k = L_k w^|k|
(w: the box edge of the level [L]), so that one M2M and one L2L operator per order
serve every level (:func:`shift_operators_host`).  For the 1/r far field they are
compressed onto the (P+1)² harmonic components (:meth:`Operators.compress`,
:meth:`Operators.compressed_shift`; exact, docs/fmm-design.md).
"""
from __future__ import annotations

import functools

import numpy as np

from . import expansions as E
from .tree import morton_decode

__all__ = ["Cache", "Operators", "shift_operators_host", "child_offsets", "occupied_boxes",
           "leaf_boxes", "SPARSE_TRANSFORM_FRACTION"]

#: a leaf level whose occupied boxes are at most this fraction of its 8^L boxes compresses
#: its multipoles and decompresses its locals on those boxes only (gathered, one GEMM,
#: scattered); denser levels run one GEMM over every box.  Stretched clouds (rings that
#: travel, tracers left behind) leave most boxes of the deepest level empty.
SPARSE_TRANSFORM_FRACTION = 0.25


class Cache:
    """Position-independent tables of one evaluator (operators, index tables, streams),
    keyed by a tuple plus the device kind and built on first use."""

    def __init__(self, device):
        self.device = device
        self._items = {}

    def get(self, key, build):
        """The value cached under ``key``, made by ``build()`` on first use."""
        key = key + (self.device.kind,)
        if key not in self._items:
            self._items[key] = build()
        return self._items[key]


class Operators:
    """M2M and L2L operators, harmonic bases and box centres on the evaluator's device
    (cached per order in ``cache``, a :class:`Cache`)."""

    def __init__(self, device, cache):
        self.device = device
        self.cache = cache

    def shift(self, P):
        """Level-independent M2M and L2L operators on normalized expansions (cached).

        With M̃_m = M_m / w^|m| and L̃_k = L_k w^|k| (w: the box width of the level), a
        child → parent M2M is M̃_p = Σ_c T_c M̃_c with T_c = diag(2^−|m|) S_c and a
        parent → child L2L is L̃_c = R_c diag(2^−|k|) L̃_p, where S_c, R_c are the exact
        shifts for a unit child width (:func:`expansions.shift_matrices`).  Returns
        T (n, 8n) = [T_0 … T_7] and R (8n, n) = [R_0; …; R_7] on the evaluator's device.
        """
        xp = self.device.xp
        return self.cache.get(("shift", P), lambda: tuple(
            xp.asarray(a) for a in shift_operators_host(P)))

    def harmonic_bases(self, P):
        """(U, V) of :func:`expansions.harmonic_bases` on the evaluator's device (cached)."""
        xp = self.device.xp
        return self.cache.get(("harmonic", P),
                              lambda: tuple(xp.asarray(a) for a in E.harmonic_bases(P)))

    def compress(self, M, P, boxes=None):
        """Compressed multipoles M̂ = Vᵀ M̃ (r, B, 3), coefficient-major, of normalized
        ones M̃ (B, n, 3) (1/r far field, :meth:`harmonic_bases`).

        ``boxes``: None (every box), or ``(idx, spill)`` of :func:`occupied_boxes`: only
        those boxes are transformed, the others are zero (their M̃ is)."""
        _, V = self.harmonic_bases(P)
        n, r = V.shape
        B = M.shape[0]
        if boxes is None:
            return (V.T @ M.transpose(1, 0, 2).reshape(n, B * 3)).reshape(r, B, 3)
        out = self.device.xp.zeros((r, B, 3))

        def into(b):                        # the boxes b (k,): gather, one GEMM, scatter
            k = b.shape[0]
            out[:, b] = (V.T @ M[b].transpose(1, 0, 2).reshape(n, k * 3)).reshape(r, k, 3)
        self._each_listed(boxes, into, V.T, M, (n * 3, 3), out, (3, B * 3))
        return out

    def decompress(self, Lh, P, boxes=None):
        """Normalized locals L̃ = U L̂ (B, n, 3), box-major and contiguous (for L2P), of
        compressed ones L̂ (r, B, 3).

        ``boxes``: None (every box), or ``(idx, spill)`` of :func:`occupied_boxes`: only
        those boxes (the leaves with targets) get their locals, the others zero."""
        U, _ = self.harmonic_bases(P)
        n, r = U.shape
        B = Lh.shape[1]
        xp = self.device.xp
        if boxes is None:
            return xp.ascontiguousarray(
                (U @ Lh.reshape(r, B * 3)).reshape(n, B, 3).transpose(1, 0, 2))
        out = xp.zeros((B, n, 3))

        def into(b):                        # the boxes b (k,): gather, one GEMM, scatter
            k = b.shape[0]
            out[b] = (U @ Lh[:, b].reshape(r, k * 3)).reshape(n, k, 3).transpose(1, 0, 2)
        self._each_listed(boxes, into, U, Lh, (3, B * 3), out, (n * 3, 3))
        return out

    def _each_listed(self, boxes, into, A, X, x_strides, out, out_strides):
        """Run ``into`` on the boxes of an :func:`occupied_boxes` pair ``(idx, spill)``:
        on idx, and on the spilled boxes (rare: the points entered more boxes than a
        step plan counted).  On the CPU ``into`` takes those too; on the GPU, where
        listing them would cost a transfer, one CUDA block per box computes out[b] = A
        X[b] (X's and out's box b, row j, component c at b·s_box + j·s_row + c,
        ``*_strides`` = (s_box, s_row), float64, C-contiguous)."""
        idx, spill = boxes
        into(idx)
        if spill is None:
            return
        if not self.device.is_gpu:
            into(np.flatnonzero(spill))
            return
        from ..kernels.modules import get_function  # noqa: PLC0415
        A = self.device.xp.ascontiguousarray(A)
        B = spill.shape[0]
        get_function("fmm.cu", "transform_spilled")(
            (B,), (128,),
            (A, np.int32(A.shape[0]), np.int32(A.shape[1]), X, np.int64(x_strides[0]),
             np.int64(x_strides[1]), out, np.int64(out_strides[0]),
             np.int64(out_strides[1]), spill, np.int64(B)))

    def m2m_from_leaves(self, Mh, P, boxes):
        """M2M out of the leaf level on the occupied leaves' parents only: compressed
        multipoles (r, B/8, 3) of the parents from the leaves' Mh (r, B, 3) (1/r far
        field, :meth:`compressed_shift`).

        ``boxes``: the :func:`occupied_boxes` pair ``(idx, spill)`` of the leaves
        holding sources; every other parent has only empty children, so zero.  The
        listed leaves' parents are translated in one GEMM (a parent listed twice is
        translated twice, the same way); parents of spilled leaves by one CUDA block
        each (``m2m_spilled``), or on the CPU by the same GEMM."""
        xp = self.device.xp
        Tc, _ = self.compressed_shift(P)
        r, B = Mh.shape[0], Mh.shape[1]
        out = xp.zeros((r, B // 8, 3))

        def into(parents):                  # the parents (k,): their 8 children, one GEMM
            k = parents.shape[0]
            kids = (parents[:, None] * 8 + xp.arange(8)).ravel()
            X = Mh[:, kids, :].reshape(r, k, 8, 3).transpose(2, 0, 1, 3).reshape(8 * r, k * 3)
            out[:, parents] = (Tc @ X).reshape(r, k, 3)
        idx, spill = boxes
        into(idx // 8)
        if spill is not None:
            if not self.device.is_gpu:
                into(np.unique(np.flatnonzero(spill) // 8))
            else:
                from ..kernels.modules import get_function  # noqa: PLC0415
                get_function("fmm.cu", "m2m_spilled")(
                    (B // 8,), (128,), (xp.ascontiguousarray(Tc), np.int32(r),
                                        xp.ascontiguousarray(Mh), out, spill,
                                        np.int64(B // 8)))
        return out

    def l2l_to_leaves(self, Lp, Lh, P, boxes):
        """L2L into the leaf level on the listed leaves only: adds R_c L̂_parent into the
        compressed leaf locals Lh (r, B, 3) (in place) from the parents' Lp (r, B/8, 3)
        at the boxes of ``boxes``, the :func:`occupied_boxes` pair ``(idx, spill)`` of
        the leaves holding targets (the others are never read).  One GEMM gives each
        listed leaf's parent all 8 children, of which the leaf's is kept; spilled leaves
        take one CUDA block each (``l2l_spilled``), or on the CPU the same GEMM."""
        xp = self.device.xp
        _, Rc = self.compressed_shift(P)
        r, B = Lh.shape[0], Lh.shape[1]

        def into(b):                        # the leaves b (k,)
            k = b.shape[0]
            Y = (Rc @ Lp[:, b // 8, :].reshape(r, k * 3)).reshape(8, r, k, 3)
            Lh[:, b, :] += Y[b % 8, :, xp.arange(k), :].transpose(1, 0, 2)
        idx, spill = boxes
        into(idx)
        if spill is not None:
            if not self.device.is_gpu:
                into(np.flatnonzero(spill))
            else:
                from ..kernels.modules import get_function  # noqa: PLC0415
                get_function("fmm.cu", "l2l_spilled")(
                    (B,), (128,), (xp.ascontiguousarray(Rc), np.int32(r),
                                   xp.ascontiguousarray(Lp), Lh, spill, np.int64(B)))
        return Lh

    def compressed_shift(self, P):
        """M2M and L2L of the 1/r far field on compressed expansions (cached).

        With the bases of :func:`expansions.harmonic_bases` (orthonormal, r = (P+1)²
        columns), multipoles enter the M2L only through M̂ = Vᵀ M̃ and locals are
        L̃ = U L̂.  A shift maps potential-free multipoles (span V^⊥, degree by degree)
        to potential-free ones and harmonic local polynomials to harmonic ones, so
        M̂_p = Σ_c (Vᵀ T_c V) M̂_c and L̂_c = (Uᵀ R_c U) L̂_p exactly (round-off only):
        r² instead of n² per box and child.  Returns Tc (r, 8r) and Rc (8r, r) on the
        evaluator's device.
        """
        def build():
            T, R = shift_operators_host(P)
            U, V = E.harmonic_bases(P)
            n = U.shape[0]
            Tc = np.concatenate([V.T @ T[:, c * n:(c + 1) * n] @ V for c in range(8)], axis=1)
            Rc = np.concatenate([U.T @ R[c * n:(c + 1) * n] @ U for c in range(8)], axis=0)
            xp = self.device.xp
            return xp.asarray(Tc), xp.asarray(Rc)
        return self.cache.get(("shift_compressed", P), build)

    def box_centers(self, tree, level):
        """Box centres (8^level, 3) [L] of a level-uniform ``tree``: its
        ``box_centers(level)`` from cached integer cell coordinates (no decode)."""
        xp = self.device.xp
        ijk = self.cache.get(("ijk", level), lambda: xp.asarray(np.stack(
            morton_decode(np.arange(8 ** level, dtype=np.uint64), level, np), axis=1) + 0.5))
        return tree.lo + ijk * tree.box_width(level)


def occupied_boxes(start, xp, capacity=None):
    """The boxes b holding points of a CSR ``start`` (B + 1,) (start[b + 1] > start[b]),
    for :meth:`Operators.compress` and :meth:`Operators.decompress`: ``(idx, spill)``.

    capacity None: idx (k,) int64 holds exactly those boxes (on the GPU its size costs a
    transfer), spill is None.  capacity (host int ≥ 1): no transfer; idx (capacity,) holds
    the first ``capacity`` of them in order, padded with repeats of its first entry (box
    0 when there is none: an empty box transforms to zero), and spill (B,) bool marks the
    occupied boxes beyond them (none unless the points fill more boxes than counted).
    """
    mask = start[1:] > start[:-1]
    if capacity is None:
        return xp.flatnonzero(mask), None
    capacity = max(int(capacity), 1)
    B = mask.shape[0]
    pos = xp.cumsum(mask) - 1
    # every box outside the list writes into the spare slot `capacity`, dropped below
    slot = xp.where(mask & (pos < capacity), pos, capacity)
    idx = xp.full(capacity + 1, -1, dtype=xp.int64)
    idx[slot] = xp.arange(B, dtype=xp.int64)
    idx = idx[:capacity]
    idx = xp.where(idx < 0, xp.maximum(idx[0], 0), idx)
    return idx, mask & (pos >= capacity)


def leaf_boxes(start, xp, count="auto"):
    """The leaf transforms' boxes for a CSR ``start`` (B + 1,): an :func:`occupied_boxes`
    pair when the level is sparse (at most :data:`SPARSE_TRANSFORM_FRACTION` of its boxes
    occupied), else None (all boxes).  ``count``: a host upper bound on the occupied
    boxes (a step plan's: no transfer; boxes beyond it are still transformed, by the
    spill path), "auto" (counted here on the CPU; all boxes on the GPU, where counting
    would stall the queue) or None (all boxes)."""
    if count is None or (count == "auto" and xp is not np):
        return None
    limit = SPARSE_TRANSFORM_FRACTION * (start.shape[0] - 1)
    if count == "auto":
        boxes = occupied_boxes(start, xp)
        return boxes if boxes[0].shape[0] <= limit else None
    return occupied_boxes(start, xp, count) if count <= limit else None


@functools.lru_cache(maxsize=4)
def shift_operators_host(P):
    """NumPy T (n, 8n) and R (8n, n) of :meth:`Operators.shift`."""
    mi = E.multi_indices(P)
    half = 2.0 ** -mi.k.sum(axis=1).astype(np.float64)
    S = E.shift_matrices(child_offsets(1.0), P, np, "m2m")
    R = E.shift_matrices(child_offsets(1.0), P, np, "l2l")
    T = np.concatenate([half[:, None] * S[c] for c in range(8)], axis=1)
    Rc = np.concatenate([R[c] * half[None, :] for c in range(8)], axis=0)
    return T, Rc


def child_offsets(child_width):
    """Offsets (8, 3) [L] of the 8 child centres from their parent centre (Morton child
    order) for children of edge ``child_width``."""
    c = np.arange(8)
    bits = np.stack([c & 1, (c >> 1) & 1, (c >> 2) & 1], axis=1)
    return (bits - 0.5) * float(child_width)
