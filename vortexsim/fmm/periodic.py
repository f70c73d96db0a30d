r"""The periodic FMM's own pieces: wrapped points, ghost sources, the far lattice, tin-foil.

In the periodic box [0, L)³ the level-uniform tree's root cube is the box itself and
every level's grid is read as an infinite periodic lattice of boxes (docs/periodic.md,
"The periodic FMM"):

* **near field**: each leaf's (2r+1)³ stencil wraps around the box.  The sources of the
  leaves within r leaves of a face are copied, shifted by ±L, into *ghost boxes* of an
  extended (n + 2r)³ source grid (:func:`ghost_sources`); a target leaf's stencil is
  read from it (:func:`ghost_tables`), so the P2P kernels run unchanged.  Ghost
  copies are other sources, so with the elements as targets each element's own pair is
  still the only one left out (its periodic images stay in).
* **M2L** at every level l ≥ 1: the interaction lists wrap (box index mod 2^l) while
  the operator is that of the unwrapped offset (:func:`~vortexsim.fmm.tree.neighbor_table`
  with ``periodic=True``): the same class cores as in free space.
* **far lattice**: the images of the root beyond its (2ρ+1)³ block (ρ: the separation)
  reach the root's local expansion through one precomputed operator,
  L̂_root += T̂ M̂_root / L (:func:`lattice_operator`): super-cells of f = 2ρ+1 cells
  per axis, level k summing the cells of width f^k L at offsets
  {−(fρ+ρ)..fρ+ρ}³ \ {−ρ..ρ}³ (exafmm's periodic FMM, with the levels folded into one
  r × r matrix).
* **tin-foil**: summed in growing cubes, the lattice gives the velocity plus the uniform
  field of a uniformly polarized cube (depolarization factor 1/3, as a sphere):
  u_cube − u_tinfoil = (1/3L³) Σ_p x_p × α_p (:func:`tinfoil_shift`), which is removed
  so that the box mean of u is zero, as in the spectral sum.  ∇u is unaffected.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ..kernels.morton import column_sums
from . import expansions as E
from .tree import morton_decode, morton_encode

__all__ = ["check_box", "ghost_tables",
           "ghost_sources", "lattice_operator", "tinfoil_shift",
           "LATTICE_LEVELS", "PERIODIC_MIN_DEPTH", "PERIODIC_LEAF_SLACK"]

#: the shallowest periodic tree: the root's M2L partners (level 1) and the near
#: stencil must stay inside the children of the root's (2ρ+1)³ image block
PERIODIC_MIN_DEPTH = 2
#: the periodic tree's leaves may be this fraction of reach / near_radius wide (its root
#: cannot be stretched as the free-space one is): the pairs of the shell 0.99–1 reach
#: that fall outside the stencil see 1/r where the Gaussian deviates from it by at most
#: 0.15 tol (ρ*(tol) is where both deviations fall below 0.1 tol).  At 2^20 uniform
#: elements with σ = h in the unit box this keeps the depth-4 leaves (reach 1.006×
#: their width at tol 1e-6) that the free-space FMM uses.
PERIODIC_LEAF_SLACK = 0.99
#: super-cell levels of the far lattice: the part left out falls as f^(−2K) (the odd
#: and the cubic-isotropic degree-2 terms of every cubic shell vanish), below 1e-16
LATTICE_LEVELS = {1: 17, 2: 12}


def check_box(box):
    """The box edge L [L] as a positive finite float (a ValueError otherwise)."""
    try:
        value = float(box)
    except (TypeError, ValueError):
        raise ValueError(f"box must be the edge L of the periodic cube [0, L)^3, a positive "
                         f"length, got {box!r}.") from None
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"box must be a positive finite length, got {box!r}.")
    return value


# -- the near field: ghost boxes ----------------------------------------------------

@functools.lru_cache(maxsize=16)
def ghost_tables(depth, radius):
    """Host tables of the extended source grid of a periodic tree (position independent).

    The extended grid has (n + 2r)³ boxes, n = 2^depth: the n³ leaves (indices 0..8^depth
    − 1, their Morton keys) and G = (n + 2r)³ − n³ ghost boxes (indices 8^depth + g)
    around them, each a copy of the leaf (c mod n) shifted by floor(c / n) L.

    Returns (origin (G,) int64: the leaf each ghost copies, shift (G, 3) float64: its
    shift in box edges, stencil (8^depth, (2r+1)³) int64: every leaf's stencil as
    extended-grid indices, offsets in the order of
    :func:`~vortexsim.fmm.tree.neighbor_table`)."""
    n, r = 1 << depth, int(radius)
    side = n + 2 * r
    c = np.stack(np.meshgrid(*(np.arange(-r, n + r),) * 3, indexing="ij"), axis=-1)
    c = c.reshape(-1, 3)
    inside = np.all((c >= 0) & (c < n), axis=1)
    ghosts = c[~inside]
    G = ghosts.shape[0]
    origin = morton_encode(*(ghosts % n).T, np).astype(np.int64)
    shift = np.floor_divide(ghosts, n).astype(np.float64)
    # extended-grid index of every cell: leaves by Morton key, ghosts after them
    index = np.empty((side,) * 3, dtype=np.int64)
    cin = c[inside]
    index[tuple((cin + r).T)] = morton_encode(*cin.T, np).astype(np.int64)
    index[tuple((ghosts + r).T)] = 8 ** depth + np.arange(G)
    ijk = np.stack(morton_decode(np.arange(8 ** depth, dtype=np.uint64), depth, np), axis=1)
    w = 2 * r + 1
    s = np.arange(w ** 3)
    off = np.stack([s // (w * w) - r, (s // w) % w - r, s % w - r], axis=1)
    cells = ijk[:, None, :] + off[None, :, :] + r                  # (8^d, w³, 3) in 0..side
    stencil = index[cells[..., 0], cells[..., 1], cells[..., 2]]
    for a in (origin, shift, stencil):
        a.setflags(write=False)
    return origin, shift, stencil


def ghost_sources(xs, alpha_s, sigma_s, src_start, origin, shift, box, xp):
    """The sorted sources with their ghost copies appended, for the near field.

    xs, alpha_s (N, 3), sigma_s (N,): the sources in leaf order; src_start (8^d + 1,):
    their CSR; origin, shift: :func:`ghost_tables` on the device.  Returns (x, alpha,
    sigma) of N + N_g sources and their CSR start (8^d + G + 1,) over the extended grid.
    One host transfer (the number of ghost sources, which sizes the arrays); memory
    O(N + N_g), N_g ≈ ((1 + 2r/n)³ − 1) N for uniform points.
    """
    n = xs.shape[0]
    counts = src_start[origin + 1] - src_start[origin]
    gstart = xp.concatenate([xp.zeros(1, xp.int64), xp.cumsum(counts)])
    total = int(gstart[-1])                                       # host sync
    start = xp.concatenate([src_start, n + gstart[1:]])
    if total == 0:
        return xs, alpha_s, sigma_s, start
    j = xp.arange(total, dtype=xp.int64)
    g = xp.searchsorted(gstart[1:], j, side="right")              # ghost box of each copy
    src = src_start[origin[g]] + (j - gstart[g])
    x = xp.concatenate([xs, xs[src] + box * shift[g]])
    return (x, xp.concatenate([alpha_s, alpha_s[src]]),
            xp.concatenate([sigma_s, sigma_s[src]]), start)


# -- the far lattice ------------------------------------------------------------------

@functools.lru_cache(maxsize=8)
def lattice_operator(order, separation=1, levels=None):
    r"""T̂ (r, r), r = (order+1)²: the compressed local expansion at the root (normalized
    by the box edge) of every image of the root beyond its (2ρ+1)³ block, from the
    root's compressed multipole: L̂ = T̂ M̂ / L (the scaling of the in-box M2L).

    With f = 2ρ + 1 and cells of width f^k at level k (unit box), the cell of level
    k + 1 is f³ cells of level k (M2M, normalized: S = diag(f^−|m|) Σ_d S(d)), and
    level k translates its cell from the offsets D = {−(fρ+ρ)..fρ+ρ}³ \ {−ρ..ρ}³
    (in its own width) into the root: A = Σ_{d∈D} A(d), scaled by f^{−k(1+|k|)}.
    Levels 0..K cover every image outside the (2ρ+1)³ block once, in growing cubes:
        T = Σ_k f^{−k} diag(f^{−k|k|}) A S^k,   compressed as Uᵀ A V, Vᵀ S V (exact).
    NumPy, cached."""
    rho = int(separation)
    f = 2 * rho + 1
    K = LATTICE_LEVELS[rho] if levels is None else int(levels)
    mi = E.multi_indices(order)
    U, V = E.harmonic_bases(order)
    deg = mi.k.sum(axis=1).astype(np.float64)
    # Σ_d A(d): the Taylor coefficients of 1/r summed over the offsets first.  The
    # offset set is symmetric under each sign flip d_i → −d_i, which multiplies T_k by
    # (−1)^{k_i}: the sum is that over the octant d ≥ 0, each offset weighted by its
    # 2^(non-zero components) mirror images, on the indices k with every k_i even
    span = f * rho + rho
    d = E.offsets_cube(span)
    d = d[(np.abs(d).max(axis=1) > rho) & (d >= 0).all(axis=1)].astype(np.float64)
    weight = 2.0 ** (d != 0).sum(axis=1)
    green = E.green_function("singular", None)
    big = E.multi_indices(2 * order)
    tsum = np.zeros(big.n)
    for i in range(0, d.shape[0], 256):
        tsum += weight[i:i + 256] @ E.kernel_taylor(green, d[i:i + 256], 2 * order, np)
    tsum *= (big.k % 2 == 0).all(axis=1)
    idx, binom = E.m2l_tables(order)
    A = U.T @ ((tsum[idx] * binom) @ V)                           # compressed (r, r)
    cells = E.offsets_cube(rho).astype(np.float64)
    S = sum(E.shift_matrices(cells[i:i + 8], order, np, "m2m").sum(axis=0)
            for i in range(0, cells.shape[0], 8))                # unit child width
    S = (f ** -deg)[:, None] * S
    Sc = V.T @ S @ V
    dc = np.concatenate([np.full(2 * k + 1, float(f) ** -k) for k in range(order + 1)])
    T = np.zeros_like(A)
    X = np.eye(A.shape[0])
    scale = np.ones(A.shape[0])
    for k in range(K + 1):
        T += (scale / f ** k)[:, None] * (A @ X)
        X = Sc @ X
        scale = scale * dc
    T.setflags(write=False)
    return T


def tinfoil_shift(x, alpha, box, xp):
    """The uniform velocity (3,) [L/T] by which the cubic summation of the lattice
    exceeds the tin-foil (zero-mean) field: (1/3L³) Σ_p x_p × α_p, x wrapped into the
    box (the dipole of the box's vorticity; Σα = 0 makes it independent of the origin)."""
    if x.shape[0] == 0:
        return xp.zeros(3)
    return column_sums(xp.cross(x, alpha)) / (3.0 * box ** 3)
