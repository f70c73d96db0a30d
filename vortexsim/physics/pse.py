r"""Viscous diffusion by particle strength exchange (PSE), Gaussian-based exchange kernels
of second and fourth order.

The operator (``physics.md``, "Viscous diffusion"; Degond & Mas-Gallic 1989; Cottet &
Koumoutsakos, *Vortex Methods*, ch. 5)::

    dα_p/dt = (ν/ε²) Σ_q (V_p α_q − V_q α_p) η_ε(x_p − x_q),
    η_ε(r) = ε⁻³ η(|r|/ε),      η(ρ) = (4π)^{−3/2} e^{−ρ²/4}             (order 2),
                                 η(ρ) = (4π)^{−3/2} (7/2 − ρ²/4) e^{−ρ²/4}  (order 4).

**Normalisation.**  The order-2 η is the density of N(0, 2 I₃): ∫ η dz = 1, ∫ z_i η dz = 0 and
∫ z_i z_j η dz = 2 δ_ij, so for smooth f

    (1/ε²) ∫ (f(y) − f(x)) η_ε(x − y) dy = ∇²f(x) + (ε²/2) ∇⁴f(x) + O(ε⁴),

second order in ε; with α_q = ω(x_q) V_q the sum is the quadrature of that integral, and
dα_p/dt / V_p → ν ∇²ω(x_p).  In fact η_ε is the heat kernel at time ε², so the
continuous operator is exactly ν (e^{ε²∇²} − 1)/ε²: a Gaussian G_s of variance s² per
axis goes to ν (G_{s'} − G_s)/ε² with s'² = s² + 2ε² (the tests check the constants
against this to 1e-9).  Winckelmans & Leonard (1993) write the same operator with the
blob's own cutoff, (2ν/σ²) Σ_q (…) ζ_σ, ζ(ρ) = (2π)^{−3/2} e^{−ρ²/2}: that is ε = σ/√2.

**Fourth order.**  In Fourier space the continuous operator is ν (η̂(εk) − η̂(0))/ε²
(η̂(κ) = ∫ η(z) e^{−iκ·z} dz), so it is of order m when η̂(κ) − η̂(0) = −|κ|² + O(|κ|^{m+2}):
the kernel's second moments are 2 δ_ij and its odd moments and its moments of order
4, …, m vanish (Eldredge, Leonard & Colonius 2002, J. Comput. Phys. 180, the moment
conditions for derivatives in particle methods; Cottet & Koumoutsakos ch. 5).  The
Gaussian G (η̂ = e^{−κ²}) and |z|² G (FT: (6 − 4κ²) e^{−κ²} in 3-D) span a fourth-order
kernel: (a + b|z|²) G has η̂ = (a + 6b − 4bκ²) e^{−κ²}, whose κ² and κ⁴ coefficients are −1
and 0 for b = −1/4, a = 7/2: η̂(κ) = (2 + κ²) e^{−κ²} = 2 − κ² + κ⁶/6 + O(κ⁸).  The
continuous operator is ν ((2 + ε²k²) e^{−ε²k²} − 2)/ε²: on a Gaussian G_s it gives
ν (2 G_{s'} − ε² ∇²G_{s'} − 2 G_s)/ε² with s'² = s² + 2ε² (tested on a lattice to the
cut's 1e-6), and on a
Fourier mode of wavenumber k its rate is ν k² (1 − ε⁴k⁴/6 + O(ε⁶k⁶)), against the second
order's ν k² (1 − ε²k²/2 + …).  The kernel changes sign at ρ = √14 (its zeroth moment is
2: only the differences f(y) − f(x) enter, so the operator still conserves Σα).

**Quadrature.**  On a lattice of spacing h (V = h³) the sum replaces η̂(εk) by its
periodisation Σ_m η̂(ε(k + 2πm/h)), an error in η̂ of order e^{−4π²ε²/h²}
(× (2 + 4π²ε²/h²) at order 4) against the rate's η̂(0) − η̂(εk) ≈ ε²k²: at ε = h/√2
(σ = h) it is 2.7e-9 (order 2) and 6e-8 (order 4).  On the Taylor–Green mode at n = 16
(order 4) the aliases cost < 5e-6 of the rate at ε = h/√2 (the cut included), 0.05 % at
0.6 h and 1.7 % at 0.5 h, against consistency errors of 0.80 %, 0.43 % and 0.21 %:
ε ≳ 0.6 h.
``physics.md`` takes ε of the order of h to 2 h.

**Cut.**  Only pairs closer than the reach ρ_c(tol) ε are summed, ρ_c the smallest ρ at
which the truncated second moment of |η| has lost the fraction tol of its value:
∫_{|z|>ρ} |z|² |η| dz / ∫ |z|² |η| dz ≤ tol.  Order 2: Q(5/2, ρ²/4) (Q: the regularised
upper incomplete gamma function; ρ_c = 8.47 at tol = 1e-6, 9.57 at 1e-8, where η/η(0) is
1.6e-8 and 1.1e-10).  Order 4 (ρ > √14, where η < 0): (15 Q(7/2, ρ²/4) − 21 Q(5/2, ρ²/4))
/ (6 + 2 T₀), T₀ = 15 Q(7/2, 7/2) − 21 Q(5/2, 7/2) (ρ_c = 9.07 at 1e-6).

Pairs are found through a cell list (cells of edge ≥ the reach, a 27-cell stencil).  A
cell meets its own elements (each pair in both orders) and the forward half of its
stencil, 13 cells whose pairs are evaluated once and give their exchange to both
elements, so Σ_p dα_p/dt = 0 up to round-off of the sums.  Memory O(N): no N×N array,
blocks of at most 2^18 pairs.

**Periodic box** [0, L)³: positions are wrapped, pairs take the minimum image.  The
box must exceed twice the reach (each pair then has at most one image within it).

**Cores.**  One ε for all elements (a scalar).  Elements of several core sizes would
need a symmetric pair width, e.g. ε_pq² = (ε_p² + ε_q²)/2, to keep the exchange
antisymmetric; not provided.

:func:`pse_rate` is the NumPy implementation (the specification); the cell sort is
written with ``xp`` operations, the pair loop on the host.  CuPy inputs go to
:mod:`vortexsim.physics.pse_gpu` (the same cells, one thread per element gathering from
its 27 neighbour cells: deterministic, no atomics).
"""
from __future__ import annotations

import numpy as np

from ..backend import is_cupy_array
from .pse_common import (PERIODIC_MARGIN, PSE_ORDERS, PSE_TOL, cell_grid, check_host_elements,
                         cell_neighbors, check_pse_order, checked_arguments, pse_constant,
                         pse_cutoff, pse_kernel, pse_reach)

__all__ = ["pse_rate", "pse_kernel", "pse_cutoff", "pse_reach", "pse_constant",
           "check_pse_order", "PSE_TOL", "PSE_ORDERS", "PERIODIC_MARGIN"]


#: pairs per block (one block's temporaries: a few arrays of this many float64)
_PAIRS_PER_BLOCK = 1 << 18


# the 13 stencil offsets after (0, 0, 0) in lexicographic order: of two cells in each
# other's stencils exactly one holds the other in this forward half
_FORWARD = np.array([(i, j, k) for i in (-1, 0, 1) for j in (-1, 0, 1) for k in (-1, 0, 1)
                     if (i, j, k) > (0, 0, 0)], dtype=np.int64)


def pse_rate(x, alpha, volume, epsilon, nu, *, box=None, tol=PSE_TOL, order=2):
    r"""Rate of change of the vector strengths by viscous diffusion (PSE).

        dα_p/dt = (ν/ε²) Σ_q (V_p α_q − V_q α_p) η_ε(x_p − x_q),   η_ε(r) = ε⁻³ η(|r|/ε),

    η of :func:`pse_kernel` (order 2 or 4), summed over every pair closer than
    :func:`pse_reach` (module docstring: the normalisation, ∫ z_i z_j η = 2 δ_ij, makes
    dα_p/dt / V_p = ν ∇²ω + O(ε^order) for α_q = ω(x_q) V_q; the cut; the cell list).

    Parameters
    ----------
    x : array (N, 3) [L], element positions (N ≥ 1)
    alpha : array (N, 3) [L³/T], vector strengths (vorticity × volume)
    volume : float or array (N,) [L³], element volumes V_p > 0 (h³ on a lattice)
    epsilon : float [L], the exchange kernel's width ε > 0, one for all elements (of the
        order of h to 2h; ε = σ/√2 is Winckelmans & Leonard's choice for Gaussian
        blobs of core σ)
    nu : float [L²/T], kinematic viscosity ≥ 0 (0: a zero rate)
    box : float [L] or None.  None: free space; L: the periodic box [0, L)³ (positions
        are wrapped, pairs take the minimum image); L must be at least 2·reach·(1 + 1e-6)
    tol : float, the cut's relative tolerance (:func:`pse_cutoff`), 1e-15 to 1e-2
    order : 2 or 4, the order in ε of the kernel's consistency error

    Returns
    -------
    array (N, 3) float64 [L³/T²], in the order of ``x``; float64 accumulators.  Its sum
    over the elements vanishes up to round-off.  CuPy inputs (all three arrays on the
    device) give a CuPy result computed on the GPU (:mod:`vortexsim.physics.pse_gpu`,
    the same sum in another order).

    Raises
    ------
    ValueError for wrong shapes, non-finite values, ν < 0, ε ≤ 0, V ≤ 0 or NaN (unknown
    volumes), a box too small for the reach, an order other than 2 or 4; TypeError for
    non-numeric input or a mix of NumPy and CuPy arrays.

    Cost: each element meets the elements of its own cell and, once per pair, of 13 of
    its neighbours: 14 (w/h)³ pairs per element on a lattice of spacing h, the cell edge
    w in [reach, 2 reach); memory O(N).

    References: Degond & Mas-Gallic, Math. Comp. 53 (1989); Winckelmans & Leonard,
    J. Comput. Phys. 109 (1993); Cottet & Koumoutsakos, *Vortex Methods* (2000), ch. 5;
    Eldredge, Leonard & Colonius, J. Comput. Phys. 180 (2002).
    """
    order = check_pse_order(order)
    if any(is_cupy_array(a) for a in (x, alpha, volume)):
        from .pse_gpu import pse_rate_gpu  # noqa: PLC0415
        return pse_rate_gpu(x, alpha, volume, epsilon, nu, box=box, tol=tol, order=order)
    x, alpha, volume, epsilon, nu, reach, box = checked_arguments(
        check_host_elements(x, alpha, volume), epsilon, nu, box, tol, order, np)
    n = x.shape[0]
    out = np.zeros((n, 3))
    if nu == 0.0:
        return out
    grid = cell_grid(x, reach, box, np)
    acc = _exchange(grid, alpha, volume, reach, epsilon, order)
    out[grid.order] = acc
    out *= pse_constant(epsilon, nu)
    return out


# --- the pair sums ---------------------------------------------------------------------


def _exchange(grid, alpha, volume, reach, epsilon, order):
    """Σ_q (V_p α_q − V_q α_p) w(ρ_pq) over the pairs within ``reach`` (ρ = |x_p − x_q|/ε,
    w = e^{−ρ²/4} at order 2, (7/2 − ρ²/4) e^{−ρ²/4} at order 4; sorted order, (N, 3)
    float64, without the constant :func:`pse_constant`).

    The cells run serially: the blocks' products are BLAS calls, and a thread pool over
    the cells next to OpenBLAS's own threads oversubscribed the cores (2 to 20 times
    slower than serial on two shared cores)."""
    a_s = np.column_stack([alpha[grid.order], volume[grid.order]])    # (N, 4): α, V
    xs, start = grid.xs, grid.start
    nbr, shift = cell_neighbors(grid, _FORWARD, np)    # the forward half
    reach2, inv4e2 = reach * reach, -0.25 / (epsilon * epsilon)
    acc = np.zeros((xs.shape[0], 3))
    for cell in range(start.shape[0] - 1):
        t0, t1 = int(start[cell]), int(start[cell + 1])
        centre = grid.lo + (grid.cells[cell] + 0.5) * grid.width
        # the own cell (its pairs in both orders; targets updated only), then the
        # forward half of the stencil at its image positions (both sides updated)
        _cell_pairs(acc, xs, a_s, t0, t1, np.arange(t0, t1), xs[t0:t1] - centre, True,
                    centre, reach2, inv4e2, order)
        cols = np.flatnonzero(nbr[cell] >= 0)
        if cols.size == 0:
            continue
        parts = [np.arange(start[nbr[cell, j]], start[nbr[cell, j] + 1]) for j in cols]
        # a box of 2 cells along an axis holds one cell at two images in the stencil:
        # then one call per cell (a call scatters to distinct sources)
        groups = ([list(range(cols.size))] if np.unique(nbr[cell, cols]).size == cols.size
                  else [[j] for j in range(cols.size)])
        for g in groups:
            src = np.concatenate([parts[j] for j in g])
            images = xs[src] - centre
            if grid.box is not None:
                images += np.repeat(shift[cell, cols[g]], [parts[j].size for j in g], axis=0)
            _cell_pairs(acc, xs, a_s, t0, t1, src, images, False, centre, reach2, inv4e2,
                        order)
    return acc


def _cell_pairs(acc, xs, a_s, t0, t1, src, ys, own, centre, reach2, inv4e2, order):
    """Exchanges of the targets t0:t1 with the sources ``src`` (images at ``ys``,
    relative to ``centre``) in blocks of at most 2^18 pairs, added to ``acc`` (N, 3);
    ``own``: the sources are the targets' own cell (targets updated only)."""
    step = max(1, _PAIRS_PER_BLOCK // src.size)
    asrc = a_s[src]
    ys2 = np.einsum("ij,ij->i", ys, ys)
    ys_t = -2.0 * ys.T
    for c0 in range(t0, t1, step):
        c1 = min(t1, c0 + step)
        yt = xs[c0:c1] - centre
        # r² = |y_t|² + |y_s|² − 2 y_t·y_s, positions relative to the target cell (of
        # the order of the reach: the cancellation costs ~1e-15 of ε² in r²)
        w = yt @ ys_t
        w += ys2[None, :]
        w += np.einsum("ij,ij->i", yt, yt)[:, None]
        inside = w < reach2
        w *= inv4e2                                       # −ρ²/4
        if order == 4:
            poly = w + 3.5                                # 7/2 − ρ²/4
            np.exp(w, out=w)
            w *= poly
        else:
            np.exp(w, out=w)
        w *= inside                                       # w(ρ), 0 beyond reach
        at = a_s[c0:c1]
        ws = w @ asrc                                     # Σ_q w α_q, Σ_q w V_q
        acc[c0:c1] += at[:, 3:] * ws[:, :3] - at[:, :3] * ws[:, 3:]
        if not own:                                       # the same pairs seen from q
            wt = w.T @ at
            acc[src] += asrc[:, 3:] * wt[:, :3] - asrc[:, :3] * wt[:, 3:]


# --- checks --------------------------------------------------------------------------


