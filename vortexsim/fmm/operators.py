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

__all__ = ["Cache", "Operators", "shift_operators_host", "child_offsets"]


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

    def compress(self, M, P):
        """Compressed multipoles M̂ = Vᵀ M̃ (r, B, 3), coefficient-major, of normalized
        ones M̃ (B, n, 3) (1/r far field, :meth:`harmonic_bases`)."""
        _, V = self.harmonic_bases(P)
        n, r = V.shape
        B = M.shape[0]
        return (V.T @ M.transpose(1, 0, 2).reshape(n, B * 3)).reshape(r, B, 3)

    def decompress(self, Lh, P):
        """Normalized locals L̃ = U L̂ (B, n, 3), box-major and contiguous (for L2P), of
        compressed ones L̂ (r, B, 3)."""
        U, _ = self.harmonic_bases(P)
        n, r = U.shape
        B = Lh.shape[1]
        return self.device.xp.ascontiguousarray(
            (U @ Lh.reshape(r, B * 3)).reshape(n, B, 3).transpose(1, 0, 2))

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
