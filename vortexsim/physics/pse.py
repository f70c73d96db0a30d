r"""Viscous diffusion by particle strength exchange (PSE), Gaussian exchange kernel.

The operator (``physics.md``, "Viscous diffusion"; Degond & Mas-Gallic 1989; Cottet &
Koumoutsakos, *Vortex Methods*, ch. 5)::

    dα_p/dt = (ν/ε²) Σ_q (V_p α_q − V_q α_p) η_ε(x_p − x_q),
    η_ε(r) = ε⁻³ η(|r|/ε),      η(ρ) = (4π)^{−3/2} e^{−ρ²/4}.

**Normalisation.**  η is the density of N(0, 2 I₃): ∫ η dz = 1, ∫ z_i η dz = 0 and
∫ z_i z_j η dz = 2 δ_ij, so for smooth f

    (1/ε²) ∫ (f(y) − f(x)) η_ε(x − y) dy = ∇²f(x) + (ε²/2) ∇⁴f(x) + O(ε⁴),

second order in ε; with α_q = ω(x_q) V_q the sum is the quadrature of that integral, and
dα_p/dt / V_p → ν ∇²ω(x_p).  In fact η_ε is the heat kernel at time ε², so the
continuous operator is exactly ν (e^{ε²∇²} − 1)/ε²: a Gaussian G_s of variance s² per
axis goes to ν (G_{s'} − G_s)/ε² with s'² = s² + 2ε² (the tests check the constants
against this to 1e-9).  Winckelmans & Leonard (1993) write the same operator with the
blob's own cutoff, (2ν/σ²) Σ_q (…) ζ_σ, ζ(ρ) = (2π)^{−3/2} e^{−ρ²/2}: that is ε = σ/√2.

**Quadrature.**  On a lattice of spacing h (V = h³) the sum replaces η̂(k) = e^{−ε²k²}
by its periodisation, an error of order e^{−4π²ε²/h²} (1e-11 at ε = 0.8 h); the
consistency error O(ε²) dominates for ε ≳ 0.6 h.  ``physics.md`` takes ε of order h to
2 h.

**Cut.**  Only pairs closer than the reach ρ_c(tol) ε are summed, ρ_c the smallest ρ at
which the truncated second moment has lost the fraction tol of its value:
∫_{|z|>ρ} |z|² η dz / ∫ |z|² η dz = Q(5/2, ρ²/4) ≤ tol (Q: the regularised upper
incomplete gamma function; ρ_c = 8.47 at tol = 1e-6, 9.57 at 1e-8, where η/η(0) is
1.6e-8 and 1.1e-10).  Pairs are found through a cell list (cells of edge ≥ the reach,
a 27-cell stencil).  A cell meets its own elements (each pair in both orders) and the
forward half of its stencil, 13 cells whose pairs are evaluated once and give their
exchange to both elements, so Σ_p dα_p/dt = 0 up to round-off of the sums.  Memory O(N):
no N×N array, blocks of at most 2^18 pairs.

**Periodic box** [0, L)³: positions are wrapped, pairs take the minimum image.  The
box must exceed twice the reach (each pair then has at most one image within it).

**Cores.**  One ε for all elements (a scalar).  Elements of several core sizes would
need a symmetric pair width, e.g. ε_pq² = (ε_p² + ε_q²)/2, to keep the exchange
antisymmetric; not provided.

:func:`pse_rate` is the NumPy implementation (the specification); the cell sort is
written with ``xp`` operations, the pair loop on the host.  CuPy inputs are refused
until a GPU version exists.
"""
from __future__ import annotations

import functools
import logging
import math

import numpy as np
from scipy.special import gammaincc

from ..backend import is_cupy_array
from ..state import host_element_arrays

logger = logging.getLogger(__name__)

__all__ = ["pse_rate", "pse_kernel", "pse_cutoff", "pse_reach", "PSE_TOL",
           "PERIODIC_MARGIN"]

#: default relative tolerance of the cut (lost fraction of the kernel's second moment)
PSE_TOL = 1e-6

#: the periodic box must be at least 2·reach·(1 + PERIODIC_MARGIN): rounding in the
#: distances then cannot put two images of one pair within the reach
PERIODIC_MARGIN = 1e-6

#: normalisation of η, (4π)^{−3/2}
_NORM = (4.0 * math.pi) ** -1.5

#: pairs per block (one block's temporaries: a few arrays of this many float64)
_PAIRS_PER_BLOCK = 1 << 18

#: cells per axis of the free-space cell list (3 × 21 bits fit the int64 cell ids)
_MAX_CELLS_PER_AXIS = 1 << 21

# the 13 stencil offsets after (0, 0, 0) in lexicographic order: of two cells in each
# other's stencils exactly one holds the other in this forward half
_FORWARD = np.array([(i, j, k) for i in (-1, 0, 1) for j in (-1, 0, 1) for k in (-1, 0, 1)
                     if (i, j, k) > (0, 0, 0)], dtype=np.int64)


def pse_kernel(rho, xp=np):
    r"""The exchange kernel η(ρ) = (4π)^{−3/2} e^{−ρ²/4} (ρ = |r|/ε, dimensionless).

    ∫ η d³z = 1 and ∫ z_i z_j η d³z = 2 δ_ij (the second-moment condition of the
    operator in :func:`pse_rate`); η_ε(r) = ε⁻³ η(|r|/ε) [1/L³].
    """
    rho = xp.asarray(rho, dtype=xp.float64)
    return _NORM * xp.exp(-0.25 * rho * rho)


@functools.lru_cache(maxsize=64)
def pse_cutoff(tol: float = PSE_TOL) -> float:
    """ρ_c(tol): the smallest ρ with ∫_{|z|>ρ} |z|² η / ∫ |z|² η = Q(5/2, ρ²/4) ≤ tol.

    ``tol`` in [1e-15, 1e-2]; ρ_c = 8.47 at 1e-6 (η(ρ_c)/η(0) = 1.6e-8)."""
    tol = _check_tol(tol)
    lo, hi = 1.0, 20.0                     # Q(5/2, ρ²/4) decreases: 0.97 at 1, 1e-41 at 20
    for _ in range(60):                    # bisection to ~1e-17 of the bracket
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if gammaincc(2.5, 0.25 * mid * mid) > tol else (lo, mid)
    return hi


def pse_reach(epsilon: float, tol: float = PSE_TOL) -> float:
    """Distance [L] beyond which :func:`pse_rate` drops pairs: ρ_c(tol) · ε."""
    return pse_cutoff(tol) * _check_positive("epsilon", epsilon)


def pse_rate(x, alpha, volume, epsilon, nu, *, box=None, tol=PSE_TOL):
    r"""Rate of change of the vector strengths by viscous diffusion (PSE).

        dα_p/dt = (ν/ε²) Σ_q (V_p α_q − V_q α_p) η_ε(x_p − x_q),
        η_ε(r) = ε⁻³ (4π)^{−3/2} e^{−|r|²/(4ε²)},

    summed over every pair closer than :func:`pse_reach` (module docstring: the
    normalisation, ∫ z_i z_j η = 2 δ_ij, makes dα_p/dt / V_p = ν ∇²ω + O(ε²) for
    α_q = ω(x_q) V_q; the cut; the cell list).

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

    Returns
    -------
    array (N, 3) float64 [L³/T²], in the order of ``x``; float64 accumulators.  Its sum
    over the elements vanishes up to round-off.

    Raises
    ------
    ValueError for wrong shapes, non-finite values, ν < 0, ε ≤ 0, V ≤ 0 or NaN (unknown
    volumes), a box too small for the reach; TypeError for non-numeric input;
    RuntimeError for CuPy arrays (PSE on the GPU: not yet).

    Cost: each element meets the elements of its own cell and, once per pair, of 13 of
    its neighbours: 14 (w/h)³ pairs per element on a lattice of spacing h, the cell edge
    w in [reach, 2 reach); memory O(N).

    References: Degond & Mas-Gallic, Math. Comp. 53 (1989); Winckelmans & Leonard,
    J. Comput. Phys. 109 (1993); Cottet & Koumoutsakos, *Vortex Methods* (2000), ch. 5.
    """
    if any(is_cupy_array(a) for a in (x, alpha, volume)):
        raise RuntimeError(
            "PSE on the GPU: not yet. pse_rate takes NumPy arrays; copy the elements to "
            "the host (vortexsim.backend.to_host) or use viscous='core_spreading' on the "
            "GPU.")
    x, alpha, volume = _check_elements(x, alpha, volume)
    epsilon = _check_positive("epsilon", epsilon)
    nu = _check_nu(nu)
    reach = pse_reach(epsilon, tol)
    n = x.shape[0]
    if box is not None:
        box = _check_box(box, reach, epsilon, tol)
        x = _wrap(x, box, np)
    out = np.zeros((n, 3))
    if nu == 0.0:
        return out
    grid = _cell_grid(x, reach, box, np)
    acc = _exchange(grid, alpha, volume, reach, epsilon)
    out[grid.order] = acc
    out *= nu / (epsilon * epsilon) * _NORM / epsilon ** 3
    return out


# --- the cell list ---------------------------------------------------------------------

class _Grid:
    """Elements sorted by cell: ``order`` (N,), the occupied cells' integer coordinates
    ``cells`` (K, 3) and CSR ``start`` (K + 1,), the cell edge ``width`` (3,), the grid's
    ``lo`` (3,) and ``shape`` (3,), the box (None: free space), sorted positions ``xs``."""

    __slots__ = ("order", "cells", "ids", "start", "width", "lo", "shape", "box", "xs")

    def __init__(self, **kw):
        for k, v in kw.items():
            setattr(self, k, v)


def _cell_grid(x, reach, box, xp):
    """Sort the elements into cells of edge ≥ ``reach`` (only occupied cells are kept:
    memory O(N) whatever the extent)."""
    if box is None:
        lo = x.min(axis=0)
        extent = x.max(axis=0) - lo
        cells = extent / reach
        if float(cells.max()) >= _MAX_CELLS_PER_AXIS:
            raise ValueError(
                f"the elements span {float(extent.max()):.6g} [L], more than "
                f"{_MAX_CELLS_PER_AXIS} PSE reaches ({reach:.6g}) along one axis; the cell "
                "list holds at most 2^21 cells per axis. Split the elements into groups "
                "farther apart than the reach, or use a larger epsilon.")
        shape = xp.maximum(xp.floor(cells), 1).astype(xp.int64)
        # edges in [reach, 2 reach): positions relative to a cell's centre stay of the
        # order of the reach (one cell: its centre within the reach of every element)
        width = xp.where(shape > 1, extent / shape, reach)
    else:
        lo = xp.zeros(3)
        shape = xp.full(3, int(box // reach), dtype=xp.int64)     # ≥ 2 (checked box)
        width = box / shape
    ijk = xp.minimum(xp.floor((x - lo) / width).astype(xp.int64), shape - 1)
    ijk = xp.maximum(ijk, 0)
    ids = ijk[:, 0] + shape[0] * (ijk[:, 1] + shape[1] * ijk[:, 2])
    order = xp.argsort(ids, kind="stable")
    ids = ids[order]
    first = xp.concatenate([xp.ones(1, dtype=bool), ids[1:] != ids[:-1]])
    heads = xp.flatnonzero(first)
    start = xp.concatenate([heads, xp.asarray([ids.shape[0]])]).astype(xp.int64)
    return _Grid(order=order, cells=ijk[order][heads], ids=ids[heads], start=start,
                 width=width, lo=lo, shape=shape, box=box, xs=x[order])


def _forward_neighbors(grid):
    """For each occupied cell, its forward-half neighbours that are occupied:
    ``nbr`` (K, 13) indices into the occupied cells (−1: none) and the image shifts
    ``shift`` (K, 13, 3) [L] to add to their positions (0 in free space)."""
    cells, shape = grid.cells, grid.shape
    c = cells[:, None, :] + _FORWARD[None, :, :]                    # (K, 13, 3) unwrapped
    if grid.box is None:
        inside = ((c >= 0) & (c < shape)).all(axis=2)
        wrapped, shift = np.clip(c, 0, shape - 1), np.zeros(c.shape)
    else:
        inside = np.ones(c.shape[:2], dtype=bool)
        wrapped = np.mod(c, shape)
        shift = np.floor_divide(c, shape) * grid.box
    ids = wrapped[..., 0] + shape[0] * (wrapped[..., 1] + shape[1] * wrapped[..., 2])
    pos = np.minimum(np.searchsorted(grid.ids, ids), grid.ids.shape[0] - 1)
    found = inside & (grid.ids[pos] == ids)
    return np.where(found, pos, -1), shift


def _exchange(grid, alpha, volume, reach, epsilon):
    """Σ_q (V_p α_q − V_q α_p) e^{−|x_p − x_q|²/(4ε²)} over the pairs within ``reach``
    (sorted order, (N, 3) float64, without the constant ν ε⁻⁵ (4π)^{−3/2}).

    The cells run serially: the blocks' products are BLAS calls, and a thread pool over
    the cells next to OpenBLAS's own threads oversubscribed the cores (2 to 20 times
    slower than serial on two shared cores)."""
    a_s = np.column_stack([alpha[grid.order], volume[grid.order]])    # (N, 4): α, V
    xs, start = grid.xs, grid.start
    nbr, shift = _forward_neighbors(grid)
    reach2, inv4e2 = reach * reach, -0.25 / (epsilon * epsilon)
    acc = np.zeros((xs.shape[0], 3))
    for cell in range(start.shape[0] - 1):
        t0, t1 = int(start[cell]), int(start[cell + 1])
        centre = grid.lo + (grid.cells[cell] + 0.5) * grid.width
        # the own cell (its pairs in both orders; targets updated only), then the
        # forward half of the stencil at its image positions (both sides updated)
        _cell_pairs(acc, xs, a_s, t0, t1, np.arange(t0, t1), xs[t0:t1] - centre, True,
                    centre, reach2, inv4e2)
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
            _cell_pairs(acc, xs, a_s, t0, t1, src, images, False, centre, reach2, inv4e2)
    return acc


def _cell_pairs(acc, xs, a_s, t0, t1, src, ys, own, centre, reach2, inv4e2):
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
        w *= inv4e2
        np.exp(w, out=w)
        w *= inside                                       # e^{−r²/(4ε²)}, 0 beyond reach
        at = a_s[c0:c1]
        ws = w @ asrc                                     # Σ_q w α_q, Σ_q w V_q
        acc[c0:c1] += at[:, 3:] * ws[:, :3] - at[:, :3] * ws[:, 3:]
        if not own:                                       # the same pairs seen from q
            wt = w.T @ at
            acc[src] += asrc[:, 3:] * wt[:, :3] - asrc[:, :3] * wt[:, 3:]


# --- checks --------------------------------------------------------------------------

def _check_tol(tol):
    try:
        tol = float(tol)
    except (TypeError, ValueError):
        raise TypeError(f"tol must be a number in [1e-15, 1e-2], got {tol!r}.") from None
    if not 1e-15 <= tol <= 1e-2:
        raise ValueError(f"tol must be in [1e-15, 1e-2] (the fraction of the exchange "
                         f"kernel's second moment the cut may lose), got {tol!r}.")
    return tol


def _scalar(name, v, what):
    if isinstance(v, bool) or np.ndim(v) != 0:
        raise TypeError(f"{name} must be a scalar number ({what}), got {v!r}.")
    try:
        v = float(v)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a scalar number ({what}), got {v!r}.") from None
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite ({what}), got {v!r}.")
    return v


def _check_positive(name, v):
    v = _scalar(name, v, "a length [L] > 0")
    if v <= 0:
        raise ValueError(f"{name} must be > 0 [L], got {v!r}.")
    return v


def _check_nu(nu):
    nu = _scalar("nu", nu, "kinematic viscosity [L²/T] >= 0")
    if nu < 0:
        raise ValueError(f"viscosity nu must be >= 0 [L²/T], got {nu!r} (diffusion "
                         "backwards in time is ill-posed).")
    return nu


def _check_box(box, reach, epsilon, tol):
    box = _check_positive("box", box)
    need = 2.0 * reach * (1.0 + PERIODIC_MARGIN)
    if box < need:
        raise ValueError(
            f"periodic box L = {box!r} is too small for the PSE reach {reach:.6g} "
            f"(= {reach / epsilon:.4g} epsilon at tol = {tol:g}): need L >= 2 reach = "
            f"{need:.6g} so that each pair has one image within it. Use a smaller epsilon "
            f"(at most {box / need * epsilon:.6g}) or a larger tol.")
    return box


def _check_elements(x, alpha, volume):
    x, alpha, per = host_element_arrays(x, alpha, volume=volume)
    volume = per["volume"]
    if np.isnan(volume).any():
        raise ValueError("volume contains NaN (element volumes not known): PSE weighs "
                         "the exchange with the volumes; build the elements with "
                         "volume=... (h³ on a lattice).")
    if not (np.isfinite(volume) & (volume > 0)).all():
        raise ValueError(f"volume must be finite and > 0 for every element; got min "
                         f"{volume.min()!r}, max {volume.max()!r}.")
    return x, alpha, volume


def _wrap(x, box, xp):
    """Positions wrapped into [0, L)³."""
    w = x - box * xp.floor(x / box)
    return xp.where((w >= box) | (w < 0), 0.0, w)     # −tiny mod L may round to L
