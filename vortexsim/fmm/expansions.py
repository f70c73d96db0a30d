r"""Cartesian Taylor expansions of the vector potential of vortex elements.

The far field expands the vector potential

    ψ(x) = (1/4π) Σ_p G(|x − y_p|) α_p,         u = ∇ × ψ,   ∂_d u_a = ε_abc ∂_d ∂_b ψ_c,

where G is the Green's function whose curl reproduces the kernel's velocity
(G'(r) = −q(ρ)/r², ``physics.md``):

=============  ======================================  =====================
kernel         G(r)                                    far field
=============  ======================================  =====================
singular       1/r                                     exact
gaussian       erf(r/√2σ)/r                            singular 1/r beyond ρ*(tol)·σ
polynomial     –                                       singular 1/r beyond σ (exact)
algebraic      (r² + σ²)^{−1/2}                        regularized, exact for uniform σ
winckelmans    (r² + σ²)^{−1/2} + ½σ²(r² + σ²)^{−3/2}  regularized, exact for uniform σ
=============  ======================================  =====================

Every G above is a sum of terms c (|x|² + σ²)^{−ν}; their Taylor coefficients
T_k = D^k G / k! about a point R obey the recurrence (Lindsay & Krasny,
J. Comput. Phys. 172 (2001), generalized to any ν; checked in the tests)

    |k| t₀ a_k + (2|k| + 2ν − 2) Σ_i R_i a_{k−e_i} + (|k| + 2ν − 2) Σ_i a_{k−2e_i} = 0,
    t₀ = |R|² + σ²,  a_0 = t₀^{−ν}.

Expansions (multi-indices k, m with |k|, |m| ≤ P; h^k = h_x^{k_x} h_y^{k_y} h_z^{k_z}):

    multipole about c:  M_m = Σ_p (−(y_p − c))^m α_p          ψ(x) = Σ_m T_m(G; x − c) M_m
    local about c:      ψ(c + h) = Σ_k L_k h^k
    M2L:                L_k = Σ_m C(k+m, k) T_{k+m}(G; c_L − c_M) M_m
    M2M (c' → c):       M_m = Σ_{j ≤ m} C(m, j) (−(c' − c))^{m−j} M'_j       (exact)
    L2L (c → c'):       L'_j = Σ_{k ≥ j} C(k, j) (c' − c)^{k−j} L_k           (exact)

Coefficient arrays have shape (..., n_coef, 3): the last axis is the component
of ψ (of α).  The factor 1/4π is applied in L2P / M2P.  All functions are
array code for NumPy and CuPy alike (``xp``).
"""
from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

__all__ = ["MultiIndexSet", "GreenFunction", "green_function", "kernel_taylor",
           "m2l_matrices", "harmonic_bases", "shift_matrices", "p2m", "m2p", "l2p", "l2p_box",
           "monomials"]

INV_4PI = 1.0 / (4.0 * math.pi)


@dataclasses.dataclass(frozen=True)
class MultiIndexSet:
    """All multi-indices k ∈ ℕ³ with |k| ≤ order, ordered by degree then lexicographically.

    Attributes
    ----------
    order : int
    k : ndarray (n, 3) int64
    index : ndarray (order+1, order+1, order+1) int64, position of k in ``k`` or −1
    degree_start : ndarray (order + 2,) int64, k[degree_start[d]:degree_start[d+1]] have |k| = d
    """

    order: int
    k: np.ndarray
    index: np.ndarray
    degree_start: np.ndarray

    @property
    def n(self) -> int:
        return self.k.shape[0]


@functools.lru_cache(maxsize=None)
def multi_indices(order: int) -> MultiIndexSet:
    """The :class:`MultiIndexSet` of ``order`` (cached; immutable)."""
    rows, starts = [], [0]
    for d in range(order + 1):
        for kx in range(d, -1, -1):
            for ky in range(d - kx, -1, -1):
                rows.append((kx, ky, d - kx - ky))
        starts.append(len(rows))
    k = np.array(rows, dtype=np.int64).reshape(-1, 3)
    index = -np.ones((order + 1,) * 3, dtype=np.int64)
    index[k[:, 0], k[:, 1], k[:, 2]] = np.arange(len(k))
    for a in (k, index):
        a.setflags(write=False)
    return MultiIndexSet(order, k, index, np.array(starts))


@dataclasses.dataclass(frozen=True)
class GreenFunction:
    """G(x) = Σ_j c_j (|x|² + σ²)^{−ν_j}: ``terms`` = ((c_j, ν_j), …), ``sigma2`` = σ² [L²]."""

    terms: tuple
    sigma2: float

    @property
    def harmonic(self) -> bool:
        """G = 1/r: harmonic away from 0, scale-invariant, its M2L compressible exactly."""
        return self.sigma2 == 0.0 and self.terms == ((1.0, 0.5),)


def green_function(kernel_name: str, sigma: float | None) -> GreenFunction:
    """The far-field Green's function of a kernel (see the module table).

    ``gaussian``, ``polynomial`` and ``singular`` use 1/r (the caller must keep
    pairs closer than ρ*(tol)·σ in the near field); ``algebraic`` and
    ``winckelmans`` need the uniform core radius ``sigma``.
    """
    if kernel_name in ("singular", "gaussian", "polynomial"):
        return GreenFunction(((1.0, 0.5),), 0.0)
    if sigma is None or not sigma > 0:
        raise ValueError(f"kernel {kernel_name!r} needs a uniform sigma > 0 for its expansions.")
    s2 = float(sigma) ** 2
    if kernel_name == "algebraic":
        return GreenFunction(((1.0, 0.5),), s2)
    if kernel_name == "winckelmans":
        return GreenFunction(((1.0, 0.5), (0.5 * s2, 1.5)), s2)
    raise ValueError(f"no far-field expansion for kernel {kernel_name!r}.")


@functools.lru_cache(maxsize=None)
def _recurrence_tables(order: int):
    """Gather indices for the Taylor recurrence: a_{k−e_i}, a_{k−2e_i} (n → slot n = zero)."""
    mi = multi_indices(order)
    n = mi.n
    back1 = np.full((n, 3), n, dtype=np.int64)
    back2 = np.full((n, 3), n, dtype=np.int64)
    for i in range(3):
        e = np.zeros(3, dtype=np.int64)
        e[i] = 1
        ok1 = mi.k[:, i] >= 1
        k1 = mi.k[ok1] - e
        back1[ok1, i] = mi.index[k1[:, 0], k1[:, 1], k1[:, 2]]
        ok2 = mi.k[:, i] >= 2
        k2 = mi.k[ok2] - 2 * e
        back2[ok2, i] = mi.index[k2[:, 0], k2[:, 1], k2[:, 2]]
    return back1, back2


def kernel_taylor(green: GreenFunction, R, order: int, xp):
    """Taylor coefficients T_k(G; R) = D^k G(R)/k! for |k| ≤ order.

    Parameters
    ----------
    green : GreenFunction
    R : array (B, 3) [L], expansion points (|R|² + σ² > 0)
    order : int
    xp : numpy or cupy

    Returns
    -------
    array (B, n(order)) in the ordering of :func:`multi_indices`.
    """
    mi = multi_indices(order)
    back1, back2 = (xp.asarray(a) for a in _recurrence_tables(order))
    B = R.shape[0]
    t0 = (R * R).sum(axis=1) + green.sigma2
    total = xp.zeros((B, mi.n), dtype=R.dtype)
    for coef, nu in green.terms:
        a = xp.zeros((B, mi.n + 1), dtype=R.dtype)       # last column: the zero slot
        a[:, 0] = t0 ** (-nu)
        for d in range(1, order + 1):
            lo, hi = int(mi.degree_start[d]), int(mi.degree_start[d + 1])
            b1, b2 = back1[lo:hi], back2[lo:hi]
            s1 = (R[:, None, :] * a[:, b1]).sum(axis=2)   # Σ_i R_i a_{k−e_i}
            s2 = a[:, b2].sum(axis=2)                     # Σ_i a_{k−2e_i}
            a[:, lo:hi] = -((2 * d + 2 * nu - 2) * s1 + (d + 2 * nu - 2) * s2) / (d * t0[:, None])
        total += coef * a[:, :mi.n]
    return total


def _multi_binomial(k, j):
    """C(k, j) = Π_i C(k_i, j_i) for integer arrays (…, 3); 0 where j_i > k_i."""
    out = np.ones(np.broadcast_shapes(k.shape, j.shape)[:-1])
    for i in range(3):
        ki, ji = np.broadcast_arrays(k[..., i], j[..., i])
        c = np.vectorize(math.comb, otypes=[float])(ki, np.clip(ji, 0, None))
        out *= np.where((ji >= 0) & (ji <= ki), c, 0.0)
    return out


@functools.lru_cache(maxsize=None)
def m2l_tables(order: int):
    """Index of k+m in the order-2P set and C(k+m, k), each (n, n) for |k|, |m| ≤ P."""
    mi = multi_indices(order)
    big = multi_indices(2 * order)
    km = mi.k[:, None, :] + mi.k[None, :, :]
    idx = big.index[km[..., 0], km[..., 1], km[..., 2]]
    return idx, _multi_binomial(km, mi.k[:, None, :])


def m2l_matrices(green: GreenFunction, R, order: int, xp):
    """M2L operators A (B, n, n): L_k = Σ_m A[b, k, m] M_m for the offsets R (B, 3) = c_L − c_M."""
    idx, binom = m2l_tables(order)
    T = kernel_taylor(green, R, 2 * order, xp)
    return T[:, xp.asarray(idx)] * xp.asarray(binom)


@functools.lru_cache(maxsize=None)
def harmonic_bases(order: int):
    """Orthonormal bases (U, V), each (n, (order+1)²), that compress the 1/r M2L exactly.

    For a harmonic G (the 1/r far field), every local expansion is a harmonic
    polynomial degree by degree, so L lies in span(U) (U_d: the null space of the
    Laplacian on degree-d polynomials, dimension 2d + 1), and every multipole
    vector in N = span{Σ_i (m' + 2e_i)! e_{m'+2e_i}} produces no potential (from
    Σ_i ∂_i² G = 0), so only its component in V = N^⊥ matters.  Hence
    A = U (Uᵀ A V) Vᵀ exactly, and M2L costs (P+1)⁴ instead of n(P)² per box pair
    (P = 16: 8.4e4 instead of 9.4e5).  Not valid for the regularized kernels.
    """
    mi = multi_indices(order)
    n = mi.n
    r = (order + 1) ** 2
    U = np.zeros((n, r))
    V = np.zeros((n, r))
    col = 0
    fact = np.vectorize(math.factorial)
    for d in range(order + 1):
        lo, hi = int(mi.degree_start[d]), int(mi.degree_start[d + 1])
        k = mi.k[lo:hi]
        width = 2 * d + 1
        if d < 2:
            U[lo:hi, col:col + width] = np.eye(hi - lo)
            V[lo:hi, col:col + width] = np.eye(hi - lo)
            col += width
            continue
        lo2 = int(mi.degree_start[d - 2])
        lap = np.zeros((int(mi.degree_start[d - 1]) - lo2, hi - lo))   # Laplacian, degree d → d−2
        trace = np.zeros_like(lap)                                      # rows: the null vectors z
        for j, kk in enumerate(k):
            for i in range(3):
                if kk[i] >= 2:
                    km = kk.copy()
                    km[i] -= 2
                    row = mi.index[km[0], km[1], km[2]] - lo2
                    lap[row, j] += kk[i] * (kk[i] - 1)
                    trace[row, j] = float(np.prod(fact(kk)))
        for mat, basis in ((lap, U), (trace, V)):
            _, _, vt = np.linalg.svd(mat)
            basis[lo:hi, col:col + width] = vt[-width:].T                # null space of mat
        col += width
    for a in (U, V):
        a.setflags(write=False)
    return U, V


@functools.lru_cache(maxsize=None)
def offsets_cube(radius: int):
    """Offsets ((2R+1)³, 3) of the boxes within R boxes of a box, dx slowest, dz fastest
    (the column order of :func:`vortexsim.fmm.tree.neighbor_table` with radius R)."""
    out = np.stack(np.meshgrid(*(np.arange(-radius, radius + 1),) * 3, indexing="ij"),
                   axis=-1).reshape(-1, 3)
    out.setflags(write=False)
    return out


#: offsets (343, 3) of the boxes within three boxes of a box (:func:`offsets_cube`)
OFFSETS_3 = offsets_cube(3)


def unit_m2l_cores(order: int, radius: int = 3, xp=np):
    """[C_0 … C_{K−1}] (r, K r), r = (order+1)², K = (2·radius+1)³: compressed 1/r M2L
    operators for the offsets of :func:`offsets_cube` (radius 3: the standard FMM's
    interaction lists; 5: the wide separation's).

    C_o = Uᵀ A(R_o) V for a source box at offset d_o (in box widths) from the
    target box, R_o = −d_o (unit box width); zero blocks for the 27 near offsets.
    Scale by w^−(1+|k|+|m|) for boxes of width w (see the evaluator).  Made with ``xp``
    (NumPy: read-only and cached; CuPy: on the GPU, where the ~160 products of
    n(P)² × r take milliseconds instead of ~2 s on the host at P = 16, the latest two
    orders cached).
    """
    return (_unit_m2l_cores_host(order, radius) if xp is np
            else _unit_m2l_cores_device(order, radius, xp))


@functools.lru_cache(maxsize=None)
def _unit_m2l_cores_host(order, radius):
    K = _build_unit_m2l_cores(order, radius, np)
    K.setflags(write=False)
    return K


@functools.lru_cache(maxsize=2)
def _unit_m2l_cores_device(order, radius, xp):
    return _build_unit_m2l_cores(order, radius, xp)


def _build_unit_m2l_cores(order, radius, xp):
    offsets = offsets_cube(radius)
    U, V = (xp.asarray(a) for a in harmonic_bases(order))
    idx, binom = (xp.asarray(a) for a in m2l_tables(order))
    # 1/|R| is even, so A(−R)[k, m] = (−1)^(|k|+|m|) A(R)[k, m]; U and V keep degrees
    # apart, so C(−R) = D C(R) D with D = diag((−1)^degree) on the compressed space.
    # Half of the offsets are computed, the other half by those signs.
    n_off = len(offsets)                         # offsets[n_off − 1 − o] = −offsets[o]
    far = np.abs(offsets).max(axis=1) >= 2
    half = np.nonzero(far & (np.arange(n_off) < n_off // 2))[0]
    T = xp.asarray(kernel_taylor(green_function("singular", None),
                                 -offsets[half].astype(np.float64), 2 * order, np))
    r = U.shape[1]
    deg = np.concatenate([np.full(2 * d + 1, d) for d in range(order + 1)])
    sign = xp.asarray(np.where(deg % 2 == 0, 1.0, -1.0))
    K = xp.zeros((r, n_off * r))
    for t, o in enumerate(half):
        C = U.T @ ((T[t][idx] * binom) @ V)
        K[:, o * r:(o + 1) * r] = C
        o2 = n_off - 1 - o
        K[:, o2 * r:(o2 + 1) * r] = sign[:, None] * C * sign[None, :]
    return K


def monomials(h, order: int, xp):
    """h^k for |k| ≤ order: array (B, n) from h (B, 3)."""
    mi = multi_indices(order)
    powers = xp.ones((h.shape[0], order + 1, 3), dtype=h.dtype)
    for j in range(1, order + 1):
        powers[:, j, :] = powers[:, j - 1, :] * h
    k = mi.k
    return (powers[:, k[:, 0], 0] * powers[:, k[:, 1], 1] * powers[:, k[:, 2], 2])


@functools.lru_cache(maxsize=None)
def _shift_tables(order: int):
    """For M2M/L2L: C(m, j) and the index of m − j (−1 where j ≰ m), each (n, n)."""
    mi = multi_indices(order)
    diff = mi.k[:, None, :] - mi.k[None, :, :]                 # m − j
    valid = (diff >= 0).all(axis=2)
    dcl = np.clip(diff, 0, order)
    idx = np.where(valid, mi.index[dcl[..., 0], dcl[..., 1], dcl[..., 2]], -1)
    return idx, _multi_binomial(mi.k[:, None, :], mi.k[None, :, :]) * valid


def shift_matrices(d, order: int, xp, kind: str):
    """Exact translation operators for offsets d (B, 3).

    kind="m2m": d = c_child − c_parent, M_parent = S @ M_child with
                S[m, j] = C(m, j) (−d)^{m−j};
    kind="l2l": d = c_child − c_parent, L_child = S @ L_parent with
                S[j, k] = C(k, j) d^{k−j}.
    Returns array (B, n, n).
    """
    idx, binom = _shift_tables(order)
    mono = monomials(-d if kind == "m2m" else d, order, xp)        # (B, n)
    mono = xp.concatenate([mono, xp.zeros((mono.shape[0], 1), mono.dtype)], axis=1)
    gathered = mono[:, xp.asarray(np.where(idx >= 0, idx, mono.shape[1] - 1))]
    S = gathered * xp.asarray(binom)                              # [m, j]
    if kind == "m2m":
        return S
    if kind == "l2l":
        return S.transpose(0, 2, 1)                               # [j, k] = C(k,j) d^{k−j}
    raise ValueError(f"kind must be 'm2m' or 'l2l', got {kind!r}.")


def p2m(y, alpha, centre, order: int, xp):
    """Multipole coefficients (n, 3) of sources y (N, 3), alpha (N, 3) about ``centre`` (3,)."""
    mono = monomials(centre[None, :] - y, order, xp)              # (−(y − c))^m
    return mono.T @ alpha


@functools.lru_cache(maxsize=None)
def _derivative_tables(order: int):
    """For L2P: first and second derivative maps of a degree-``order`` polynomial.

    Returns (idx1, fac1, idx2, fac2): for the n' = n(order − 1) monomials j,
    ∂_b p = Σ_j fac1[b, j] L[idx1[b, j]] h^j, and for n'' = n(order − 2),
    ∂_a ∂_b p = Σ_j fac2[a, b, j] L[idx2[a, b, j]] h^j.
    """
    mi = multi_indices(order)
    m1 = multi_indices(max(order - 1, 0))
    m2 = multi_indices(max(order - 2, 0))
    idx1 = np.zeros((3, m1.n), dtype=np.int64)
    fac1 = np.zeros((3, m1.n))
    for b in range(3):
        k = m1.k.copy()
        k[:, b] += 1
        ok = k.sum(axis=1) <= order
        idx1[b, ok] = mi.index[k[ok, 0], k[ok, 1], k[ok, 2]]
        fac1[b, ok] = k[ok, b]
    idx2 = np.zeros((3, 3, m2.n), dtype=np.int64)
    fac2 = np.zeros((3, 3, m2.n))
    for a in range(3):
        for b in range(3):
            k = m2.k.copy()
            k[:, a] += 1
            k[:, b] += 1
            ok = k.sum(axis=1) <= order
            idx2[a, b, ok] = mi.index[k[ok, 0], k[ok, 1], k[ok, 2]]
            f = k[ok, a] * (k[ok, b] - (1 if a == b else 0)) if a == b else k[ok, a] * k[ok, b]
            fac2[a, b, ok] = f
    return idx1, fac1, idx2, fac2


_EPS = np.zeros((3, 3, 3))
_EPS[0, 1, 2] = _EPS[1, 2, 0] = _EPS[2, 0, 1] = 1.0
_EPS[0, 2, 1] = _EPS[2, 1, 0] = _EPS[1, 0, 2] = -1.0


def l2p(L, h, order: int, xp, gradient=True):
    """Velocity and gradient at targets from local coefficients.

    Parameters
    ----------
    L : array (M, n, 3), local coefficients of ψ (without 1/4π) of each target's box
    h : array (M, 3), target − box centre
    Returns u (M, 3) and grad_u (M, 3, 3) (or None), including 1/4π.
    """
    idx1, fac1, idx2, fac2 = _derivative_tables(order)
    mono1 = monomials(h, max(order - 1, 0), xp)                   # (M, n1)
    # dpsi[t, b, c] = ∂_b ψ_c
    d1 = L[:, xp.asarray(idx1), :] * xp.asarray(fac1)[None, :, :, None]   # (M, 3, n1, 3)
    dpsi = xp.einsum("tj,tbjc->tbc", mono1, d1)
    eps = xp.asarray(_EPS, dtype=L.dtype)
    u = INV_4PI * xp.einsum("abc,tbc->ta", eps, dpsi)
    if not gradient:
        return u, None
    mono2 = monomials(h, max(order - 2, 0), xp)
    d2 = L[:, xp.asarray(idx2), :] * xp.asarray(fac2)[None, :, :, :, None]  # (M,3,3,n2,3)
    ddpsi = xp.einsum("tj,tdbjc->tdbc", mono2, d2)                # ∂_d ∂_b ψ_c
    grad = INV_4PI * xp.einsum("abc,tdbc->tad", eps, ddpsi)
    return u, grad


def l2p_box(L, h, order: int, xp, gradient=True):
    """:func:`l2p` for targets that share one box: L (n, 3), h (k, 3) → u (k, 3), ∇u (k, 3, 3).

    Derivative coefficients are formed once for the box, so the evaluation is two GEMMs
    (the CPU evaluator's L2P, one call per leaf).
    """
    idx1, fac1, idx2, fac2 = _derivative_tables(order)
    eps = xp.asarray(_EPS, dtype=L.dtype)
    n1, n2 = idx1.shape[1], idx2.shape[2]
    d1 = (L[xp.asarray(idx1)] * xp.asarray(fac1)[:, :, None])          # (3 b, n1, 3 c)
    dpsi = (monomials(h, max(order - 1, 0), xp) @ d1.transpose(1, 0, 2).reshape(n1, 9))
    u = INV_4PI * xp.einsum("abc,tbc->ta", eps, dpsi.reshape(-1, 3, 3))
    if not gradient:
        return u, None
    d2 = (L[xp.asarray(idx2)] * xp.asarray(fac2)[:, :, :, None])       # (3 d, 3 b, n2, 3 c)
    ddpsi = (monomials(h, max(order - 2, 0), xp) @ d2.transpose(2, 0, 1, 3).reshape(n2, 27))
    grad = INV_4PI * xp.einsum("abc,tdbc->tad", eps, ddpsi.reshape(-1, 3, 3, 3))
    return u, grad


def m2p(green: GreenFunction, M, centre, targets, order: int, xp, gradient=True):
    """Velocity and gradient at targets (T, 3) straight from one multipole M (n, 3) about centre.

    Uses ψ(x) = Σ_m T_m(G; x − c) M_m and its derivatives, via the Taylor
    coefficients of G at x − c up to order + 2 (for tests and treecode use).
    """
    mi = multi_indices(order)
    big = multi_indices(order + 2)
    T = kernel_taylor(green, targets - centre[None, :], order + 2, xp)   # (T, n_big)
    k = mi.k

    def coef(e):
        kk = k + np.asarray(e)
        idx = big.index[kk[:, 0], kk[:, 1], kk[:, 2]]
        fac = np.prod([[math.factorial(a) // math.factorial(b) for a, b in zip(r1, r2)]
                       for r1, r2 in zip(kk, k)], axis=1).astype(float)
        return T[:, xp.asarray(idx)] * xp.asarray(fac)              # D^e T_m(G; x−c)

    dpsi = xp.stack([coef(np.eye(3, dtype=int)[b]) @ M for b in range(3)], axis=1)  # (T,3,3)
    eps = xp.asarray(_EPS, dtype=M.dtype)
    u = INV_4PI * xp.einsum("abc,tbc->ta", eps, dpsi)
    if not gradient:
        return u, None
    ddpsi = xp.stack([xp.stack([coef(np.eye(3, dtype=int)[d] + np.eye(3, dtype=int)[b]) @ M
                                for b in range(3)], axis=1) for d in range(3)], axis=1)
    grad = INV_4PI * xp.einsum("abc,tdbc->tad", eps, ddpsi)
    return u, grad
